package policy

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// PoolInfo is what the pod and node rules know about one pool: its Pool object, if it
// has one, and what its member nodes say.
type PoolInfo struct {
	Name string
	// Object is the Pool object; nil for a pool that exists only as node labels.
	Object *v1alpha1.Pool
	// Members is the number of nodes labelled runwhere.ai/pool=<Name>.
	Members int
	// GPUTypes are the distinct accelerator models of the members, sorted.
	GPUTypes []string
}

// Spec is the pool's policy; a pool made only of labels has the zero spec (a Training
// pool that takes everyone, with no accelerator pinned).
func (p PoolInfo) Spec() v1alpha1.PoolSpec {
	if p.Object == nil {
		return v1alpha1.PoolSpec{}
	}
	return p.Object.Spec
}

// AcceleratorType is the accelerator model the pool takes: the Pool object's, or for a
// pool of labels only, the one model all its members share, compared by model
// (SameGPUModel: members labelled a10-24g and NVIDIA-A10 share one) and named by the
// first of their names; empty when they differ.
func (p PoolInfo) AcceleratorType() string {
	if p.Object != nil {
		return p.Object.Spec.Accelerator.Type
	}
	if len(p.GPUTypes) == 0 {
		return ""
	}
	for _, t := range p.GPUTypes[1:] {
		if !SameGPUModel(t, p.GPUTypes[0]) {
			return ""
		}
	}
	return p.GPUTypes[0]
}

// PoolCatalog answers what the rules ask about pools. The webhook backs it with its
// informer cache, the plugin with what it listed, tests with a map. Implementations do
// no I/O per call.
type PoolCatalog interface {
	// Pool returns the pool NAME if it exists: as a Pool object or as node labels.
	Pool(name string) (PoolInfo, bool)
	// PoolNames lists every existing pool, sorted.
	PoolNames() []string
}

// PodPatch is what rule P1 adds to a pod. It only ever adds: a value the pod already
// has is never replaced (a clash is a denial instead).
type PodPatch struct {
	Labels       map[string]string
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	Env          []ContainerEnv
}

// ContainerEnv is environment added to one container (Init: of spec.initContainers).
type ContainerEnv struct {
	Init  bool
	Index int
	Name  string
	Env   []corev1.EnvVar
}

// Empty says whether the patch changes nothing.
func (p PodPatch) Empty() bool {
	return len(p.Labels) == 0 && len(p.NodeSelector) == 0 && len(p.Tolerations) == 0 && len(p.Env) == 0
}

// Apply makes the patch's changes to pod.
func (p PodPatch) Apply(pod *corev1.Pod) {
	for k, v := range p.Labels {
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[k] = v
	}
	for k, v := range p.NodeSelector {
		if pod.Spec.NodeSelector == nil {
			pod.Spec.NodeSelector = map[string]string{}
		}
		pod.Spec.NodeSelector[k] = v
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, p.Tolerations...)
	for _, ce := range p.Env {
		cs := pod.Spec.Containers
		if ce.Init {
			cs = pod.Spec.InitContainers
		}
		cs[ce.Index].Env = append(cs[ce.Index].Env, ce.Env...)
	}
}

// ExclusivePoolToleration is the toleration of the taint runwhere.ai/pool=<pool>:NoSchedule
// that the members of an exclusive pool carry.
func ExclusivePoolToleration(pool string) corev1.Toleration {
	// Derived from the taint scale and nodepool put on members, so the two cannot drift.
	t := ExclusiveTaint(pool)
	return corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpEqual, Value: t.Value, Effect: t.Effect}
}

// PoolOrigin says where a pod's pool comes from.
type PoolOrigin int

const (
	// PoolFromLabel: the pod's runwhere.ai/pool label.
	PoolFromLabel PoolOrigin = iota
	// PoolFromNamespace: the default pool its namespace names (label runwhere.ai/pool).
	PoolFromNamespace
	// PoolFromNodeSelector: its nodeSelector runwhere.ai/pool=<pool>, as Kueue's
	// ResourceFlavor of a pool's queue sets it on the pods it admits.
	PoolFromNodeSelector
	// PoolFromPlacement: its required placement (PlacementPin), which only the pool's
	// members satisfy.
	PoolFromPlacement
)

// PodPoolName is the pool a pod asks for (PodPoolOrigin); fromNamespace says it is its
// namespace's default pool.
func PodPoolName(pod *corev1.Pod, ns *corev1.Namespace) (name string, fromNamespace bool) {
	name, origin := PodPoolOrigin(pod, ns)
	return name, origin == PoolFromNamespace
}

// PodPoolOrigin is the pool a pod asks for: its runwhere.ai/pool label, else the default
// pool its namespace names with the same label, else the pool its nodeSelector pins it
// to (a pod so pinned runs only on that pool's nodes: it is the pool's pod, and is judged
// as one). An empty label value names no pool, so it counts as absent:
// `runwhere.ai/pool: ""` does not escape the namespace's default pool (and P1 then sets
// the label to that pool). A namespace's default pool comes before the nodeSelector, so
// a pod pinned to another pool clashes with P1 there, as a labelled one would.
func PodPoolOrigin(pod *corev1.Pod, ns *corev1.Namespace) (string, PoolOrigin) {
	if v := pod.Labels[LabelPool]; v != "" {
		return v, PoolFromLabel
	}
	if ns != nil && ns.Labels[LabelPool] != "" {
		return ns.Labels[LabelPool], PoolFromNamespace
	}
	if v := pod.Spec.NodeSelector[LabelPool]; v != "" {
		return v, PoolFromNodeSelector
	}
	return "", PoolFromLabel
}

// MutatePod runs the pod rules P1-P5 on a pod being created in namespace ns (nil when
// the namespace is not known; it then counts as having no labels). It returns what P1
// adds, warnings for the client, and the denial: every failed rule, one per line, each
// with its rule id. A pod that asks for no pool (or for "default") gets nothing.
// accel says which resources are accelerators (P5).
//
// MutatePod is idempotent: run on its own output it returns an empty patch and no
// error, which is what reinvocation needs.
//
// A DaemonSet's pods are placed node by node (the DaemonSet controller pins each to
// its node): a namespace's default pool does not apply to them, and a pool they ask
// for by label gets them no nodeSelector (P1 would otherwise pin a pod meant for one
// node to a pool that may not hold that node, and it could never be scheduled).
//
// When pools is also a NodeView (the webhook's catalog), a pod that asks for no pool
// (no label, or "default") but whose required placement only one pool's members satisfy
// (PlacementPin) is judged as that pool's pod too.
func MutatePod(pod *corev1.Pod, ns *corev1.Namespace, pools PoolCatalog, accel Accelerators) (PodPatch, []string, error) {
	var patch PodPatch
	name, origin := PodPoolOrigin(pod, ns)
	var pin Pin
	// A node agent's pod (a DaemonSet's, asking for no device) is placed node by node
	// and judged by P6 alone. The owner is a claim, so what it skips is only what a real
	// DaemonSet of the tenant's gets: a pod that asks for devices is judged by its pin.
	if nodes, ok := pools.(NodeView); ok && origin == PoolFromLabel && (name == "" || name == DefaultPool) && !claimsToBeAnAgent(pod) {
		if pin = PlacementPin(&pod.Spec, nodes); pin.Pool != "" {
			name, origin = pin.Pool, PoolFromPlacement
		}
	}
	if name == "" || name == DefaultPool || ((origin == PoolFromNamespace || origin == PoolFromNodeSelector) && isDaemonSetPod(pod)) {
		return patch, nil, nil
	}
	info, ok := pools.Pool(name)
	if !ok {
		return patch, nil, poolMissing(name, origin, pin, ns, pools.PoolNames())
	}
	var warnings []string
	errs := []error{
		checkNodePool(pod, info),
		podNamespace(info, ns, pod.Namespace, origin, pin),
		labelledNoPool(pod, pin),
	}
	warn, werr := CheckPodWorkload(pod, info)
	errs = append(errs, werr)
	if warn != "" {
		warnings = append(warnings, warn)
	}
	errs = append(errs, CheckPodAccelerator(pod, info, accel))
	patch, p1 := podPlacement(pod, info, origin != PoolFromLabel)
	errs = append(errs, p1)
	if err := errors.Join(errs...); err != nil {
		return PodPatch{}, warnings, err
	}
	return patch, warnings, nil
}

// claimsToBeAnAgent: a DaemonSet owner (a claim) and no device asked for.
func claimsToBeAnAgent(pod *corev1.Pod) bool { return isDaemonSetPod(pod) && !RequestsDevices(pod) }

// poolMissing is rule P2's denial. It names no other pool: the requester may not be
// allowed to list Pools, and the pools and their namespaces are other teams' business.
func poolMissing(name string, from PoolOrigin, pin Pin, ns *corev1.Namespace, existing []string) error {
	origin, fix := fmt.Sprintf("label %s", LabelPool), "remove the label"
	switch {
	case from == PoolFromPlacement:
		origin, fix = "the pod's "+pin.How+", which only its members satisfy", "place the pod otherwise"
	case from == PoolFromNamespace && ns != nil:
		origin = fmt.Sprintf("the default pool of namespace %q", ns.Name)
		fix = fmt.Sprintf("have the namespace's label %s corrected", LabelPool)
	case from == PoolFromNodeSelector:
		origin, fix = fmt.Sprintf("nodeSelector %s", LabelPool), "remove it from the nodeSelector"
	}
	if len(existing) == 0 {
		return Violationf("P2", "pool %q (%s) does not exist, and no pools exist yet: create it (kubectl litepool create -f pool.yaml) or %s", name, origin, fix)
	}
	return Violationf("P2", "pool %q (%s) does not exist: ask for a pool that exists (kubectl litepool get pools) or %s", name, origin, fix)
}

// checkNodePool is P2 for the node pool a pod names (label runwhere.ai/node-pool): it
// must be one the Pool object declares, when it declares any.
func checkNodePool(pod *corev1.Pod, info PoolInfo) error {
	np, ok := pod.Labels[LabelNodePool]
	if !ok || info.Object == nil || len(info.Object.Spec.NodePools) == 0 {
		return nil
	}
	var names []string
	for _, p := range info.Object.Spec.NodePools {
		if p.Name == np {
			return nil
		}
		names = append(names, p.Name)
	}
	return Violationf("P2", "node pool %q (label %s) does not exist in pool %q: its node pools are %s",
		np, LabelNodePool, info.Name, strings.Join(names, ", "))
}

// podNamespace is P4 for the pod's pool; a pod pinned by nodeSelector is told so, since
// it may not know it asked for a pool (Kueue's flavor put it there).
func podNamespace(info PoolInfo, ns *corev1.Namespace, namespace string, origin PoolOrigin, pin Pin) error {
	err := CheckPodNamespace(info, ns, namespace)
	var v *Violation
	if err == nil || (origin != PoolFromNodeSelector && origin != PoolFromPlacement) || !errors.As(err, &v) {
		return err
	}
	if origin == PoolFromPlacement {
		return Violationf(v.Rule, "the pod's %s pins it to pool %q (only the pool's members satisfy it), so it is judged as the pool's pod: %s", pin.How, info.Name, v.Message)
	}
	return Violationf(v.Rule, "the pod's nodeSelector %s=%s pins it to pool %q (for a Kueue Job: the pool's ResourceFlavor sets it on the pods it admits), so it is judged as the pool's pod: %s",
		LabelPool, info.Name, info.Name, v.Message)
}

// labelledNoPool is P1's clash for a pod labelled runwhere.ai/pool=default (no pool)
// whose placement pins it to a pool: the label is never overwritten.
func labelledNoPool(pod *corev1.Pod, pin Pin) error {
	if pin.Pool == "" || pod.Labels[LabelPool] != DefaultPool {
		return nil
	}
	return Violationf("P1", "label %s=%s says the pod asks for no pool, but its %s pins it to pool %q: remove the label (it is then labelled %s=%s and judged as the pool's pod) or place the pod otherwise (litepool never overwrites it)",
		LabelPool, DefaultPool, pin.How, pin.Pool, LabelPool, pin.Pool)
}

// CheckPodNamespace is rule P4: the namespace must be allowed to use the pool. A pool
// with neither spec.namespaces nor spec.namespaceSelector admits every namespace.
func CheckPodNamespace(info PoolInfo, ns *corev1.Namespace, namespace string) error {
	spec := info.Spec()
	if len(spec.Namespaces) == 0 && spec.NamespaceSelector == nil {
		return nil
	}
	if slices.Contains(spec.Namespaces, namespace) {
		return nil
	}
	if spec.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(spec.NamespaceSelector)
		if err != nil {
			return Violationf("P4", "pool %q has an invalid namespaceSelector (%v): fix the pool before its pods can be admitted", info.Name, err)
		}
		var nsLabels labels.Set
		if ns != nil {
			nsLabels = ns.Labels
		}
		if sel.Matches(nsLabels) {
			return nil
		}
	}
	// Which namespaces the pool admits is not said: they are other teams'.
	return Violationf("P4", "namespace %q may not use pool %q: the pool admits only the namespaces its spec.namespaces lists or its spec.namespaceSelector selects, and %q is not among them; use a pool that admits it, or have %q added to spec.namespaces of pool %q",
		namespace, info.Name, namespace, namespace, info.Name)
}

// CheckPodWorkload is rule P3: the pod's kind of work must be one the pool accepts. A pod
// that declares no workload type and has no owner that says is admitted with a warning.
func CheckPodWorkload(pod *corev1.Pod, info PoolInfo) (warning string, err error) {
	wt, origin := WorkloadTypeAndOrigin(pod)
	switch origin {
	case WorkloadFromLabel:
		if err := ValidateWorkloadType(string(wt)); err != nil {
			return "", Violationf("P3", "label %s: %v", LabelWorkloadType, err)
		}
	case WorkloadFromJobType:
		if err := ValidateJobType(pod.Labels[LabelJobType]); err != nil {
			return "", Violationf("P3", "label %s (gpuctl's job type): %v; or set label %s (%s)",
				LabelJobType, err, LabelWorkloadType, joinTypes(WorkloadTypes))
		}
	}
	if info.Object == nil {
		return "", nil
	}
	accepted := AcceptedWorkloads(info.Object.Spec)
	if wt == "" {
		return fmt.Sprintf("[P3] pod declares no workload type: set label %s to one that pool %q accepts (%s)",
			LabelWorkloadType, info.Name, joinTypes(accepted)), nil
	}
	if slices.Contains(accepted, wt) {
		return "", nil
	}
	if origin == WorkloadFromJobType {
		origin = fmt.Sprintf("label %s=%s", LabelJobType, pod.Labels[LabelJobType])
	}
	poolType := info.Object.Spec.Type
	if poolType == "" {
		poolType = v1alpha1.PoolTypeTraining
	}
	return "", Violationf("P3", "pool %q (type %s) does not accept %s work (%s): it accepts %s; use a pool that takes %s work",
		info.Name, poolType, wt, origin, joinTypes(accepted), wt)
}

// CheckPodAccelerator is rule P5: a runwhere.ai/gpu-type the pod asks for (label,
// nodeSelector or required node affinity) must be the pool's accelerator model
// (compared by model, SameGPUModel), and an
// accelerator resource it requests (one of accel) must be the one the pool provides.
func CheckPodAccelerator(pod *corev1.Pod, info PoolInfo, accel Accelerators) error {
	var errs []error
	if want := info.AcceleratorType(); want != "" {
		// gpuctl's pods ask with runwhere.ai/gpuType; it means the same as gpu-type.
		for _, key := range []string{LabelGPUType, LabelGPUTypeCamel} {
			for _, req := range requestedValues(pod, key, true) {
				if !req.allowsModel(want) {
					errs = append(errs, Violationf("P5", "%s %s does not match pool %q, whose nodes are %s=%s: ask for %s=%s or use a pool of the gpu-type you need",
						req.origin, req.expr(key), info.Name, LabelGPUType, want, key, want))
				}
			}
		}
	}
	if have := info.Spec().Accelerator.ResourceName; have != "" {
		for _, got := range accel.PodAcceleratorResources(pod) {
			if !sameAccelerator(got, have) {
				errs = append(errs, Violationf("P5", "pod requests %s but pool %q provides %s: request %s or use a pool of %s nodes",
					got, info.Name, have, have, got))
			}
		}
	}
	return errors.Join(errs...)
}

// sameAccelerator says whether a pod requesting got fits a pool counted by have: the
// same resource, or NVIDIA MIG slices of an NVIDIA GPU pool.
func sameAccelerator(got, have corev1.ResourceName) bool {
	if got == have {
		return true
	}
	nvidia := func(r corev1.ResourceName) bool {
		return r == "nvidia.com/gpu" || strings.HasPrefix(string(r), migPrefix)
	}
	return nvidia(got) && nvidia(have)
}

// podPlacement is rule P1: pin the pod to the pool (and its node pool), let it tolerate
// an exclusive pool's taint, and give NPU containers the pool's HCCL retry settings. A
// DaemonSet's pod is not pinned: it is placed node by node.
func podPlacement(pod *corev1.Pod, info PoolInfo, fromNS bool) (PodPatch, error) {
	var patch PodPatch
	var errs []error
	if fromNS {
		patch.Labels = map[string]string{LabelPool: info.Name}
	}
	want := map[string]string{LabelPool: info.Name}
	if isDaemonSetPod(pod) {
		want = nil
	}
	if np, ok := pod.Labels[LabelNodePool]; ok && np != "" && want != nil {
		want[LabelNodePool] = np
	}
	for _, key := range sortedMapKeys(want) {
		value := want[key]
		conflict := false
		for _, req := range requestedValues(pod, key, false) {
			if !req.allows(value) {
				conflict = true
				errs = append(errs, Violationf("P1", "%s %s conflicts with pool %q, which needs %s=%s: remove it or make it %s=%s (litepool never overwrites it)",
					req.origin, req.expr(key), info.Name, key, value, key, value))
			}
		}
		if _, set := pod.Spec.NodeSelector[key]; !set && !conflict {
			if patch.NodeSelector == nil {
				patch.NodeSelector = map[string]string{}
			}
			patch.NodeSelector[key] = value
		}
	}
	if info.Spec().Exclusive {
		tol := ExclusivePoolToleration(info.Name)
		if !slices.ContainsFunc(pod.Spec.Tolerations, func(t corev1.Toleration) bool { return t.MatchToleration(&tol) }) {
			patch.Tolerations = append(patch.Tolerations, tol)
		}
	}
	env, err := hcclPatch(pod, info)
	patch.Env = env
	errs = append(errs, err)
	return patch, errors.Join(errs...)
}

// hcclPatch adds the pool's HCCL retry environment to every container that requests an
// Ascend NPU. A container that already sets one of the variables to another value (or
// from a reference) is a conflict: the pool's value is not forced over the pod's.
func hcclPatch(pod *corev1.Pod, info PoolInfo) ([]ContainerEnv, error) {
	want := HCCLEnv(info.Spec())
	if want == nil {
		return nil, nil
	}
	var out []ContainerEnv
	var errs []error
	visit := func(init bool, cs []corev1.Container) {
		for i := range cs {
			c := &cs[i]
			if !requestsNPU(c) {
				continue
			}
			var add []corev1.EnvVar
			for _, ev := range want {
				j := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == ev.Name })
				switch {
				case j < 0:
					add = append(add, ev)
				case c.Env[j].ValueFrom != nil:
					errs = append(errs, Violationf("P1", "container %q sets %s from a reference but pool %q sets it to %q: remove it from the container (the pool's value is injected) or change the pool's HCCL settings",
						c.Name, ev.Name, info.Name, ev.Value))
				case c.Env[j].Value != ev.Value:
					errs = append(errs, Violationf("P1", "container %q sets %s=%q but pool %q sets %q: remove it from the container (the pool's value is injected) or change the pool's HCCL settings",
						c.Name, ev.Name, c.Env[j].Value, info.Name, ev.Value))
				}
			}
			if len(add) > 0 {
				out = append(out, ContainerEnv{Init: init, Index: i, Name: c.Name, Env: add})
			}
		}
	}
	visit(true, pod.Spec.InitContainers)
	visit(false, pod.Spec.Containers)
	return out, errors.Join(errs...)
}

func requestsNPU(c *corev1.Container) bool {
	for _, rl := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
		for rn := range rl {
			if IsNPUResource(rn) {
				return true
			}
		}
	}
	return false
}

// requested is one constraint a pod places on a node label: a value it names (label or
// nodeSelector), or one node-affinity requirement.
type requested struct {
	origin string
	op     corev1.NodeSelectorOperator
	values []string
}

func (r requested) allows(v string) bool {
	switch r.op {
	case corev1.NodeSelectorOpIn:
		return slices.Contains(r.values, v)
	case corev1.NodeSelectorOpNotIn:
		return !slices.Contains(r.values, v)
	case corev1.NodeSelectorOpExists:
		return true
	default: // DoesNotExist, Gt, Lt: no pool node satisfies it
		return false
	}
}

// allowsModel is allows for an accelerator model: a value names it when it is the same
// model (SameGPUModel), not only the same string.
func (r requested) allowsModel(v string) bool {
	same := func(x string) bool { return SameGPUModel(x, v) }
	switch r.op {
	case corev1.NodeSelectorOpIn:
		return slices.ContainsFunc(r.values, same)
	case corev1.NodeSelectorOpNotIn:
		return !slices.ContainsFunc(r.values, same)
	}
	return r.allows(v)
}

// expr writes the constraint on key as a selector expression: key=v, key in (a, b), ...
func (r requested) expr(key string) string {
	switch r.op {
	case corev1.NodeSelectorOpIn:
		if len(r.values) == 1 {
			return key + "=" + r.values[0]
		}
		return key + " in (" + strings.Join(r.values, ", ") + ")"
	case corev1.NodeSelectorOpNotIn:
		return key + " notin (" + strings.Join(r.values, ", ") + ")"
	case corev1.NodeSelectorOpDoesNotExist:
		return "!" + key
	}
	return key + " " + string(r.op) + " " + strings.Join(r.values, ", ")
}

// requestedValues collects what a pod asks of node label key: its nodeSelector, the
// required node-affinity requirements on the key, and (withLabel) the pod's own label.
func requestedValues(pod *corev1.Pod, key string, withLabel bool) []requested {
	var out []requested
	if v, ok := pod.Labels[key]; ok && withLabel {
		out = append(out, requested{origin: "label", op: corev1.NodeSelectorOpIn, values: []string{v}})
	}
	if v, ok := pod.Spec.NodeSelector[key]; ok {
		out = append(out, requested{origin: "nodeSelector", op: corev1.NodeSelectorOpIn, values: []string{v}})
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return out
	}
	for i, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == key {
				out = append(out, requested{origin: fmt.Sprintf("required node affinity (term %d)", i), op: e.Operator, values: e.Values})
			}
		}
	}
	return out
}

func sortedMapKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
