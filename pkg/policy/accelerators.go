package policy

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// knownAccelerators are the accelerator resources every set holds (unexported: nothing
// may change them). nvidia.com/mig-<profile> resources are matched by prefix.
var knownAccelerators = []corev1.ResourceName{
	"nvidia.com/gpu", "huawei.com/Ascend910", "huawei.com/Ascend310",
	"huawei.com/Ascend310P", "amd.com/gpu",
}

const migPrefix = "nvidia.com/mig-"

// AcceleratorResourcesFlag is the flag that names extra accelerator resources
// (ParseAccelerators reads its value).
const AcceleratorResourcesFlag = "accelerator-resources"

// Accelerators is the set of resource names that count as accelerators: the known ones
// (knownAccelerators, nvidia.com/mig-*) and the extra ones it was made with. The zero
// value is the known set. A value never changes once made, so each program (the plugin,
// the webhook) holds its own and passes it down: nothing global to disagree about.
type Accelerators struct {
	extra []corev1.ResourceName
}

// NewAccelerators returns the known set plus extra.
func NewAccelerators(extra ...corev1.ResourceName) Accelerators {
	return Accelerators{extra: slices.Clone(extra)}
}

// ParseAccelerators reads the value of --accelerator-resources: a comma-separated list
// of extended resource names (vendor.example/xpu). Blank entries are ignored; an entry
// that is not a qualified name with a vendor prefix outside kubernetes.io is an error
// naming the flag and the entry.
func ParseAccelerators(value string) (Accelerators, error) {
	var extra []corev1.ResourceName
	for _, entry := range strings.Split(value, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if err := validExtendedResource(entry); err != nil {
			return Accelerators{}, fmt.Errorf("--%s: %q is not an extended resource name (such as vendor.example/xpu): %w", AcceleratorResourcesFlag, entry, err)
		}
		extra = append(extra, corev1.ResourceName(entry))
	}
	return Accelerators{extra: extra}, nil
}

// validExtendedResource checks a name as the API server checks an extended resource: a
// qualified name whose prefix is a DNS subdomain outside kubernetes.io, without the
// requests. prefix of quota keys.
func validExtendedResource(name string) error {
	if errs := validation.IsQualifiedName(name); len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	prefix, _, ok := strings.Cut(name, "/")
	if !ok {
		return errors.New("it has no vendor domain prefix")
	}
	if prefix == "kubernetes.io" || strings.HasSuffix(prefix, ".kubernetes.io") {
		return errors.New("the kubernetes.io domain is reserved for native resources")
	}
	if strings.HasPrefix(name, corev1.DefaultResourceRequestsPrefix) {
		return errors.New("the requests. prefix names a quota, not a resource")
	}
	return nil
}

// String lists the extra resources, comma-separated, as the flag takes them.
func (a Accelerators) String() string {
	names := make([]string, len(a.extra))
	for i, r := range a.extra {
		names[i] = string(r)
	}
	return strings.Join(names, ",")
}

// Is says whether a resource name counts as an accelerator. It allocates nothing.
func (a Accelerators) Is(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), migPrefix) ||
		slices.Contains(knownAccelerators, name) || slices.Contains(a.extra, name)
}

// IsNPUResource says whether a resource name is an Ascend NPU.
func IsNPUResource(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), "huawei.com/Ascend")
}

// IsMIG says whether a resource is an NVIDIA MIG slice (nvidia.com/mig-<profile>). A
// slice is a part of a GPU, never a GPU: slices are counted apart from whole devices.
func IsMIG(name corev1.ResourceName) bool { return strings.HasPrefix(string(name), migPrefix) }

// IsWhole says whether a resource counts whole devices (GPUs, NPUs): an
// accelerator that is not a MIG slice.
func (a Accelerators) IsWhole(name corev1.ResourceName) bool { return a.Is(name) && !IsMIG(name) }

// NodeAccelerators returns the whole accelerator devices a node offers (allocatable),
// summed into one count, and the resource name with the most devices. MIG slices are not
// devices and are not added (see NodeMIG).
func (a Accelerators) NodeAccelerators(node *corev1.Node) (corev1.ResourceName, int64) {
	var name corev1.ResourceName
	var total int64
	best := int64(-1) // a resource offered with 0 devices (all partitioned into MIG) still names it
	for rn, q := range node.Status.Allocatable {
		if !a.IsWhole(rn) {
			continue
		}
		v := q.Value()
		total += v
		if v > best || (v == best && rn < name) {
			name, best = rn, v
		}
	}
	return name, total
}

// NodeMIG returns the MIG slices a node offers (allocatable) per profile resource, nil
// when it has none. A node with nvidia.com/gpu: 0 and only slices shows them here.
func NodeMIG(node *corev1.Node) map[corev1.ResourceName]int64 {
	var out map[corev1.ResourceName]int64
	for rn, q := range node.Status.Allocatable {
		if IsMIG(rn) && !q.IsZero() {
			if out == nil {
				out = map[corev1.ResourceName]int64{}
			}
			out[rn] = q.Value()
		}
	}
	return out
}

// PodAcceleratorRequests returns what a pod requests of each accelerator resource,
// counted per resource as kubectl's resource helper and the scheduler count requests:
// the larger of the app containers' sum (plus sidecar init containers) and any one init
// container (plus the sidecars started before it), plus pod overhead. A container that
// sets only a limit requests its limit, as the API server defaults it for extended
// resources. Nil when the pod requests no accelerator.
func (a Accelerators) PodAcceleratorRequests(pod *corev1.Pod) map[corev1.ResourceName]int64 {
	var out map[corev1.ResourceName]int64
	add := func(m *map[corev1.ResourceName]int64, rn corev1.ResourceName, v int64) {
		if *m == nil {
			*m = map[corev1.ResourceName]int64{}
		}
		(*m)[rn] += v
	}
	for i := range pod.Spec.Containers {
		a.eachContainerAccelerator(&pod.Spec.Containers[i], func(rn corev1.ResourceName, v int64) { add(&out, rn, v) })
	}
	if len(pod.Spec.InitContainers) > 0 {
		var sidecars, initPeak map[corev1.ResourceName]int64
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
			a.eachContainerAccelerator(c, func(rn corev1.ResourceName, v int64) {
				if sidecar {
					add(&sidecars, rn, v)
					v = 0
				}
				add(&initPeak, rn, 0)
				initPeak[rn] = max(initPeak[rn], sidecars[rn]+v)
			})
		}
		for rn, v := range sidecars {
			add(&out, rn, v)
		}
		for rn, v := range initPeak {
			add(&out, rn, 0)
			out[rn] = max(out[rn], v)
		}
	}
	for rn, q := range pod.Spec.Overhead {
		if a.Is(rn) && !q.IsZero() {
			add(&out, rn, q.Value())
		}
	}
	return out
}

// PodAccelerators returns the whole accelerator devices a pod requests (MIG slices are
// not devices; see PodAcceleratorRequests), each resource counted as kubectl counts it.
func (a Accelerators) PodAccelerators(pod *corev1.Pod) int64 {
	var n int64
	for rn, v := range a.PodAcceleratorRequests(pod) {
		if !IsMIG(rn) {
			n += v
		}
	}
	return n
}

// eachContainerAccelerator calls fn with what one container requests of each
// accelerator (its limit when it sets no request). It allocates nothing: the inventory
// runs it over every pod of the cluster.
func (a Accelerators) eachContainerAccelerator(c *corev1.Container, fn func(corev1.ResourceName, int64)) {
	for rn, q := range c.Resources.Requests {
		if a.Is(rn) {
			fn(rn, q.Value())
		}
	}
	for rn, q := range c.Resources.Limits {
		if _, requested := c.Resources.Requests[rn]; !requested && a.Is(rn) {
			fn(rn, q.Value())
		}
	}
}

// PodAcceleratorResources lists every accelerator resource a pod's containers (init
// containers included) request or limit, sorted, each once.
func (a Accelerators) PodAcceleratorResources(pod *corev1.Pod) []corev1.ResourceName {
	seen := map[corev1.ResourceName]bool{}
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			for _, rl := range []corev1.ResourceList{cs[i].Resources.Limits, cs[i].Resources.Requests} {
				for rn := range rl {
					if a.Is(rn) {
						seen[rn] = true
					}
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// Driver-version labels real clusters carry, in the order they are trusted.
var DriverVersionLabels = []string{
	"huawei.com/driver.version",           // Ascend device plugin
	"nvidia.com/cuda.driver-version.full", // NVIDIA GPU feature discovery
	LabelDriverVersion,                    // set by litepool or the operator
}

// DriverVersion reads a node's accelerator driver version from its labels.
func DriverVersion(node *corev1.Node) string {
	for _, k := range DriverVersionLabels {
		if v := node.Labels[k]; v != "" {
			return v
		}
	}
	return ""
}

// GPUType is a node's accelerator model: runwhere.ai/gpu-type, else what the device
// plugins say (nvidia.com/gpu.product, node.kubernetes.io/npu.chip.name).
func GPUType(node *corev1.Node) string {
	for _, k := range []string{LabelGPUType, "nvidia.com/gpu.product", "node.kubernetes.io/npu.chip.name"} {
		if v := node.Labels[k]; v != "" {
			return v
		}
	}
	return ""
}
