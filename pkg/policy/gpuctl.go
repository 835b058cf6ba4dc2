package policy

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// gpuctl pool files (gpuctl's "kind: pool, version: v0.1"):
//
//	kind: pool
//	version: v0.1
//	pool:
//	  name: training-pool
//	  description: "LLM training"
//	  nodes:
//	    node-1:
//	      gpu-type: A100-100G      # or gpuType
//
// A pool file names a pool and the nodes that make it up; litepool turns it into a Pool
// object and the pool label on each listed node.

// GpuctlKind and GpuctlVersion identify a gpuctl pool file.
const (
	GpuctlKind    = "pool"
	GpuctlVersion = "v0.1"
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
	Kind    string         `json:"kind"`
	Version string         `json:"version"`
	Pool    *gpuctlPoolDef `json:"pool"`
}

type gpuctlPoolDef struct {
	Name        string                    `json:"name"`
	Description string                    `json:"description,omitempty"`
	Nodes       map[string]*gpuctlNodeDef `json:"nodes"`
}

type gpuctlNodeDef struct {
	GPUType      *string `json:"gpu-type,omitempty"`
	GPUTypeCamel *string `json:"gpuType,omitempty"`
}

// IsGpuctlDocument says whether a YAML document's kind is gpuctl's "pool" (any case) and
// it has no apiVersion: that is, it is meant as a gpuctl pool file.
func IsGpuctlDocument(kind, apiVersion string) bool {
	return apiVersion == "" && strings.EqualFold(kind, GpuctlKind)
}

// ParseGpuctlPool parses one gpuctl pool document strictly: unknown fields, a wrong
// version, a missing name, nodes without a gpu-type key, and nodes of different
// accelerator models (a pool holds one) are errors that say what would be accepted.
func ParseGpuctlPool(doc []byte) (*GpuctlPool, error) {
	var f gpuctlFile
	if err := yaml.UnmarshalStrict(doc, &f); err != nil {
		return nil, fmt.Errorf("not a valid gpuctl pool file: %s; expected the fields kind, version, pool.name, pool.description, pool.nodes.<node>.gpu-type", DecodeErrorMessage(err))
	}
	if f.Kind != GpuctlKind {
		return nil, fmt.Errorf("gpuctl pool file: kind %q: must be %q", f.Kind, GpuctlKind)
	}
	if f.Version != GpuctlVersion {
		return nil, fmt.Errorf("gpuctl pool file: version %q is not supported: must be %q", f.Version, GpuctlVersion)
	}
	if f.Pool == nil || f.Pool.Name == "" {
		return nil, fmt.Errorf("gpuctl pool file: pool.name is missing")
	}
	if err := ValidatePoolName(f.Pool.Name); err != nil {
		return nil, err
	}
	out := &GpuctlPool{Pool: &v1alpha1.Pool{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Pool"},
		ObjectMeta: metav1.ObjectMeta{Name: f.Pool.Name},
		Spec:       v1alpha1.PoolSpec{Description: f.Pool.Description},
	}}
	byType := map[string][]string{}
	for name, def := range f.Pool.Nodes {
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
		return nil, fmt.Errorf("[N2] gpuctl pool file: pool %q lists nodes of different gpu-types (%s): a pool holds one accelerator model; split them into one pool per gpu-type",
			f.Pool.Name, strings.Join(kinds, "; "))
	}
	for t := range byType {
		out.Pool.Spec.Accelerator.Type = t
	}
	return out, nil
}

func (d *gpuctlNodeDef) gpuType(pool, node string) (string, error) {
	if d == nil || (d.GPUType == nil && d.GPUTypeCamel == nil) {
		return "", fmt.Errorf("gpuctl pool file: pool %q: node %q has no gpu-type: write `gpu-type: <model>` under it (`gpu-type: \"\"` for a CPU node)", pool, node)
	}
	if d.GPUType != nil && d.GPUTypeCamel != nil && *d.GPUType != *d.GPUTypeCamel {
		return "", fmt.Errorf("gpuctl pool file: pool %q: node %q sets gpu-type %q and gpuType %q: use one of them", pool, node, *d.GPUType, *d.GPUTypeCamel)
	}
	t := d.GPUType
	if t == nil {
		t = d.GPUTypeCamel
	}
	if *t != "" {
		if err := ValidateLabel(LabelGPUType, *t); err != nil {
			return "", fmt.Errorf("gpuctl pool file: pool %q: node %q: %w", pool, node, err)
		}
	}
	return *t, nil
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
