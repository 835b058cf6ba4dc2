package policy

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// gpuctl pool files, in every shape gpuctl reads (gpuctl/api/pool.py, its parser's kind
// table, and its pool guide):
//
//	kind: pool                 # or resource
//	version: v0.1              # optional: gpuctl's default
//	pool:
//	  name: training-pool
//	  description: "LLM training"
//	  nodes:                   # as in the guide, or at the top level as gpuctl's code reads it
//	    node-1:
//	      gpu-type: A100-80G   # or gpuType (gpuctl's alias) or gpu_type (its field name)
//
// A pool file names a pool and the nodes that make it up; litepool turns it into a Pool
// object and the pool label on each listed node.

// GpuctlKind and GpuctlVersion identify a gpuctl pool file; GpuctlResourceKind is the
// other kind gpuctl reads as a pool file.
const (
	GpuctlKind         = "pool"
	GpuctlResourceKind = "resource"
	GpuctlVersion      = "v0.1"
)

// GpuctlPool is a parsed gpuctl pool file: the Pool object it makes and the nodes it
// labels, each with the gpu-type the file declares for it (sorted by node name).
type GpuctlPool struct {
	Pool  *v1alpha1.Pool
	Nodes []GpuctlNode
}

// GpuctlNode is one node of a gpuctl pool file.
type GpuctlNode struct {
	Name    string
	GPUType string
}

type gpuctlFile struct {
	Kind    string                    `json:"kind"`
	Version *string                   `json:"version,omitempty"`
	Pool    *gpuctlPoolDef            `json:"pool"`
	Nodes   map[string]*gpuctlNodeDef `json:"nodes,omitempty"`
}

type gpuctlPoolDef struct {
	Name        string                    `json:"name"`
	Description string                    `json:"description,omitempty"`
	Nodes       map[string]*gpuctlNodeDef `json:"nodes,omitempty"`
}

type gpuctlNodeDef struct {
	GPUType      *string `json:"gpu-type,omitempty"`
	GPUTypeCamel *string `json:"gpuType,omitempty"`
	GPUTypeSnake *string `json:"gpu_type,omitempty"`
}

// IsGpuctlDocument says whether a YAML document is meant as a gpuctl pool file: no
// apiVersion, and kind pool or resource (gpuctl matches kinds exactly).
func IsGpuctlDocument(kind, apiVersion string) bool {
	return apiVersion == "" && (kind == GpuctlKind || kind == GpuctlResourceKind)
}

const gpuctlFields = "kind (pool or resource), version, pool.name, pool.description, nodes.<node>.gpu-type (nodes at the top level or under pool; gpu-type, gpuType or gpu_type)"

// ParseGpuctlPool parses one gpuctl pool document strictly: unknown fields, a wrong
// version, a missing name, nodes listed both at the top level and under pool, nodes
// without a gpu-type, and nodes of different accelerator models (a pool holds one) are
// errors that say what would be accepted.
func ParseGpuctlPool(doc []byte) (*GpuctlPool, error) {
	var f gpuctlFile
	if err := yaml.UnmarshalStrict(doc, &f); err != nil {
		return nil, fmt.Errorf("not a valid gpuctl pool file: %s; expected the fields %s", DecodeErrorMessage(err), gpuctlFields)
	}
	if !IsGpuctlDocument(f.Kind, "") {
		return nil, fmt.Errorf("gpuctl pool file: kind %q: must be %q or %q", f.Kind, GpuctlKind, GpuctlResourceKind)
	}
	if f.Version != nil && *f.Version != GpuctlVersion {
		return nil, fmt.Errorf("gpuctl pool file: version %q is not supported: must be %q", *f.Version, GpuctlVersion)
	}
	if f.Pool == nil || f.Pool.Name == "" {
		return nil, fmt.Errorf("gpuctl pool file: pool.name is missing")
	}
	if err := ValidatePoolName(f.Pool.Name); err != nil {
		return nil, err
	}
	nodes := f.Nodes
	if len(f.Pool.Nodes) > 0 {
		if len(nodes) > 0 {
			return nil, fmt.Errorf("gpuctl pool file: pool %q lists nodes both at the top level and under pool: keep one list", f.Pool.Name)
		}
		nodes = f.Pool.Nodes
	}
	out := &GpuctlPool{Pool: &v1alpha1.Pool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Pool"},
		ObjectMeta: metav1.ObjectMeta{Name: f.Pool.Name},
		Spec:       v1alpha1.PoolSpec{Description: f.Pool.Description},
	}}
	byType := map[string][]string{}
	for name, def := range nodes {
		gpuType, err := def.gpuType(f.Pool.Name, name)
		if err != nil {
			return nil, err
		}
		out.Nodes = append(out.Nodes, GpuctlNode{Name: name, GPUType: gpuType})
		byType[gpuType] = append(byType[gpuType], name)
	}
	sort.Slice(out.Nodes, func(i, j int) bool { return out.Nodes[i].Name < out.Nodes[j].Name })
	if len(byType) > 1 {
		var kinds []string
		for t, nodes := range byType {
			sort.Strings(nodes)
			kinds = append(kinds, fmt.Sprintf("%s on %s", orNone(t), strings.Join(nodes, ", ")))
		}
		sort.Strings(kinds)
		return nil, Violationf("N2", "gpuctl pool file: pool %q lists nodes of different gpu-types (%s): a pool holds one accelerator model; split them into one pool per gpu-type",
			f.Pool.Name, strings.Join(kinds, "; "))
	}
	for t := range byType {
		out.Pool.Spec.Accelerator.Type = t
	}
	return out, nil
}

func (d *gpuctlNodeDef) gpuType(pool, node string) (string, error) {
	set := map[string]string{}
	if d != nil {
		for key, v := range map[string]*string{"gpu-type": d.GPUType, "gpuType": d.GPUTypeCamel, "gpu_type": d.GPUTypeSnake} {
			if v != nil {
				set[key] = *v
			}
		}
	}
	if len(set) == 0 {
		return "", fmt.Errorf("gpuctl pool file: pool %q: node %q has no gpu-type: write `gpu-type: <model>` under it (`gpu-type: \"\"` for a CPU node)", pool, node)
	}
	keys := slices.Sorted(maps.Keys(set))
	t := set[keys[0]]
	for _, k := range keys[1:] {
		if set[k] != t {
			return "", fmt.Errorf("gpuctl pool file: pool %q: node %q sets %s %q and %s %q: use one of them", pool, node, keys[0], t, k, set[k])
		}
	}
	if t != "" {
		if err := ValidateLabel(LabelGPUType, t); err != nil {
			return "", fmt.Errorf("gpuctl pool file: pool %q: node %q: %w", pool, node, err)
		}
	}
	return t, nil
}

// Labels the device plugins set that name a node's accelerator model.
const (
	LabelNVIDIAProduct = "nvidia.com/gpu.product"           // NVIDIA GPU feature discovery
	LabelNPUChipName   = "node.kubernetes.io/npu.chip.name" // Ascend device plugin (910B3, 310P3)
	LabelAscendFamily  = "accelerator"                      // Ascend device plugin (huawei-Ascend910)
)

// CheckDeclaredGPUType is N2 for a gpu-type a pool file declares for a node: it must not
// contradict what the node's device plugin reports (nvidia.com/gpu.product, the Ascend
// chip labels), compared by model (SameGPUModel), so that a file never mislabels a node.
// A node without such labels, and an empty gpu-type (a CPU node in gpuctl's files), are
// not judged.
func CheckDeclaredGPUType(node *corev1.Node, declared string) error {
	if declared == "" {
		return nil
	}
	for _, s := range NodeModelStatements(node) {
		if s.Label == LabelGPUType || SameGPUModel(declared, s.Value) {
			continue
		}
		if family := ascendFamilyOf(s.Value); family != "" {
			return Violationf("N2", "node %q: the pool file declares gpu-type %q but its device plugin reports %s (Ascend %s): declare an Ascend %s type (e.g. Snt%c, Ascend%s), or leave the node out",
				node.Name, declared, s, family, family, family[0], family)
		}
		return Violationf("N2", "node %q: the pool file declares gpu-type %q but its device plugin reports %s: declare the model the node has, or leave the node out",
			node.Name, declared, s)
	}
	return nil
}

// DecodeErrorMessage turns a strict YAML/JSON decoding error into words for the user:
// no decoder preamble, no Go type names ("field pool.nodes must be a mapping, not an
// array").
func DecodeErrorMessage(err error) string {
	msg := err.Error()
	for _, p := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
		msg = strings.ReplaceAll(msg, p, "")
	}
	if m := typeErrorPattern.FindStringSubmatch(msg); m != nil {
		field := m[2]
		if i := strings.Index(field, "."); i >= 0 && strings.HasPrefix(m[2], m[3]) {
			field = field[i+1:]
		}
		return fmt.Sprintf("field %s must be %s, not %s", field, goTypeWords(m[4]), articled(m[1]))
	}
	return msg
}

// typeErrorPattern matches encoding/json's "cannot unmarshal array into Go struct field
// gpuctlPoolDef.pool.nodes of type map[string]*policy.gpuctlNodeDef".
var typeErrorPattern = regexp.MustCompile(`cannot unmarshal (\w+) into Go struct field ((\w+)\.[\w.]+) of type (\S+)`)

func goTypeWords(t string) string {
	t = strings.TrimPrefix(t, "*")
	switch {
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case t == "string" || strings.HasSuffix(t, ".ResourceName") || strings.HasSuffix(t, "Type"):
		return "a string"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint") || strings.HasPrefix(t, "float"):
		return "a number"
	}
	return "a mapping"
}

func articled(jsonType string) string {
	switch jsonType {
	case "array":
		return "a list"
	case "object":
		return "a mapping"
	case "number":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	}
	return jsonType
}
