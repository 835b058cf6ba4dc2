package queue

// The Volcano adapter: what litepool writes for a Pool with spec.queue.scheduler: Volcano.
//
//   - One Queue (scheduling.volcano.sh/v1beta1, cluster-scoped) named after the pool.
//     litepool sets spec.capability (the pool's accelerator, and cpu/memory when
//     spec.queue.resources covers them: policy.PoolCapacity, the number Kueue's quota
//     is), spec.deserved and spec.guarantee.resource (spec.queue's, lowered to the
//     capability). Every other field of the Queue (weight, reclaimable, parent...) is
//     left as Volcano or its admin set it.
//   - With spec.topology, one HyperNode (topology.volcano.sh/v1alpha1) per domain of
//     each level: the finest level's HyperNodes (tier 1) select their nodes by
//     labelMatch on the levels' keys and the pool's label; a coarser level's select the
//     HyperNodes below by exactMatch on their names. None are written when Volcano's
//     own label discovery (networkTopologyDiscovery, source: label) is on.
//
// Each object carries a controller ownerReference to the Pool (the garbage collector
// deletes them with it) and the runwhere.ai/pool label (for listing only). An object of
// the same name without that ownerReference is never changed.
//
// litepool reads back the Queue's status (allocated) and the PodGroups naming the
// queue (their phase) for status.queue.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Volcano's API as litepool writes it, through unstructured objects (volcano.sh/apis
// pins other k8s.io versions than ours; hack/tools-volcano pins it for the CRDs).
var (
	VolcanoQueue     = schema.GroupVersionKind{Group: "scheduling.volcano.sh", Version: "v1beta1", Kind: "Queue"}
	VolcanoPodGroup  = schema.GroupVersionKind{Group: "scheduling.volcano.sh", Version: "v1beta1", Kind: "PodGroup"}
	VolcanoJob       = schema.GroupVersionKind{Group: "batch.volcano.sh", Version: "v1alpha1", Kind: "Job"}
	VolcanoHyperNode = schema.GroupVersionKind{Group: "topology.volcano.sh", Version: "v1alpha1", Kind: "HyperNode"}
)

// VolcanoDiscoveryConfigMap is where Volcano's controller-manager reads its
// networkTopologyDiscovery (<release>-controller-configmap in its namespace; the Helm
// chart's defaults), and the key of its configuration.
var (
	VolcanoDiscoveryConfigMap = types.NamespacedName{Namespace: "volcano-system", Name: "volcano-controller-configmap"}
	VolcanoDiscoveryKey       = "volcano-controller.conf"
)

// Volcano is the Volcano adapter.
type Volcano struct {
	// Client reads and writes Volcano's objects (unstructured: not cached) and reads
	// the pool's member nodes (cached).
	Client client.Client
	// Reader reads Volcano's configuration ConfigMap from the API server (one object:
	// no cache of every ConfigMap); nil reads it with Client.
	Reader client.Reader
	// ConfigMap is Volcano's controller ConfigMap; zero: VolcanoDiscoveryConfigMap.
	ConfigMap types.NamespacedName
}

var _ Adapter = Volcano{}

// VolcanoQueueSpec is the Queue's fields litepool owns for pool: capability (the
// capacity), deserved and guarantee (spec.queue's, lowered to the capability), and
// clamped says which were lowered.
func VolcanoQueueSpec(pool *v1alpha1.Pool, c policy.Capacity) (spec map[string]any, deserved, guarantee *int64, clamped []string) {
	capability := map[string]any{}
	if c.Resource != "" {
		capability[string(c.Resource)] = count(c.Accelerators)
	}
	for _, r := range pool.Spec.Queue.Resources {
		amount := c.CPU
		if corev1.ResourceName(r) == corev1.ResourceMemory {
			amount = c.Memory
		}
		capability[string(r)] = amount.String()
	}
	spec = map[string]any{"capability": capability}
	q := pool.Spec.Queue
	if q.Deserved != nil {
		d := min(*q.Deserved, c.Accelerators)
		if d < *q.Deserved {
			clamped = append(clamped, fmt.Sprintf("deserved %d lowered to the capability %d", *q.Deserved, d))
		}
		deserved = &d
	}
	if q.Guarantee != nil {
		top := c.Accelerators
		if deserved != nil {
			top = min(top, *deserved) // Volcano: guarantee <= deserved <= capability
		}
		g := min(*q.Guarantee, top)
		if g < *q.Guarantee {
			clamped = append(clamped, fmt.Sprintf("guarantee %d lowered to %d", *q.Guarantee, g))
		}
		guarantee = &g
	}
	if c.Resource != "" && deserved != nil {
		spec["deserved"] = map[string]any{string(c.Resource): count(*deserved)}
	}
	if c.Resource != "" && guarantee != nil {
		spec["guarantee"] = map[string]any{"resource": map[string]any{string(c.Resource): count(*guarantee)}}
	}
	return spec, deserved, guarantee, clamped
}

// volcanoQueueFields are the Queue's spec fields litepool owns.
var volcanoQueueFields = []string{"capability", "deserved", "guarantee"}

// Sync writes the pool's Queue and HyperNodes and reads what Volcano reports of the
// queue. namespaces are not used: Volcano has no per-namespace queue object, and rule
// P4 refuses Jobs and PodGroups naming the queue from the namespaces the pool does not
// admit (pkg/admission).
func (v Volcano) Sync(ctx context.Context, pool *v1alpha1.Pool, c policy.Capacity, _ []string, _ bool) (*v1alpha1.QueueStatus, error) {
	spec, deserved, guarantee, clamped := VolcanoQueueSpec(pool, c)
	q := object(VolcanoQueue, "", pool, spec)
	var conflicts []error
	if err := v.apply(ctx, pool, q, volcanoQueueFields); IsNotOwned(err) {
		conflicts = append(conflicts, err)
	} else if err != nil {
		return nil, err
	}
	st := &v1alpha1.QueueStatus{Scheduler: v1alpha1.QueueVolcano, ClusterQueue: pool.Name, Resource: c.Resource,
		Quota: c.Accelerators, SchedulableNodes: int32(len(c.Nodes)), Deserved: deserved, Guarantee: guarantee}
	n, skipped, err := v.syncHyperNodes(ctx, pool)
	switch {
	case IsNotOwned(err):
		conflicts = append(conflicts, err)
	case err != nil:
		return nil, err
	}
	st.HyperNodes, st.HyperNodesSkipped = n, skipped
	if len(conflicts) == 0 {
		if err := v.readStatus(ctx, pool, st); err != nil {
			return nil, err
		}
	}
	if len(clamped) > 0 {
		conflicts = append(conflicts, &ClampedError{Pool: pool.Name, What: clamped})
	}
	return st, errors.Join(conflicts...)
}

// ClampedError says the Queue was written with deserved or guarantee lowered to the
// capacity (members left the pool's schedulable capacity since they were admitted).
type ClampedError struct {
	Pool string
	What []string
}

func (e *ClampedError) Error() string {
	return fmt.Sprintf("Volcano Queue %s: %s (the pool's schedulable capacity dropped below spec.queue's; they go back up with the capacity)",
		e.Pool, strings.Join(e.What, ", "))
}

// IsClamped tells a ClampedError from the rest.
func IsClamped(err error) bool {
	var e *ClampedError
	return errors.As(err, &e)
}

// apply creates want, or sets the owned fields of the pool's own object when they
// differ; the object's other fields stay as they are.
func (v Volcano) apply(ctx context.Context, pool *v1alpha1.Pool, want *unstructured.Unstructured, fields []string) error {
	have := &unstructured.Unstructured{}
	have.SetGroupVersionKind(want.GroupVersionKind())
	err := v.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apimeta.IsNoMatchError(err):
		return &NotInstalledError{Scheduler: v1alpha1.QueueVolcano, API: want.GroupVersionKind().GroupVersion().String() + " " + want.GetKind()}
	case apierrors.IsNotFound(err):
		return v.Client.Create(ctx, want)
	case err != nil:
		return err
	}
	if !OwnedBy(have, pool) {
		return &NotOwnedError{Kind: want.GetKind(), Name: want.GetName(), Pool: pool.Name}
	}
	if sameFields(have, want, fields) {
		return nil
	}
	spec, _, _ := unstructured.NestedMap(have.Object, "spec")
	if spec == nil {
		spec = map[string]any{}
	}
	for _, f := range fields {
		if w, ok := want.Object["spec"].(map[string]any)[f]; ok {
			spec[f] = w
		} else {
			delete(spec, f)
		}
	}
	have.Object["spec"] = spec
	have.SetLabels(mergeLabels(have.GetLabels(), want.GetLabels()))
	return v.Client.Update(ctx, have)
}

// readStatus adds what Volcano reports: the accelerators allocated to the Queue, and
// the PodGroups naming it by phase (Pending: waiting to be admitted; Inqueue and
// Running: admitted).
func (v Volcano) readStatus(ctx context.Context, pool *v1alpha1.Pool, st *v1alpha1.QueueStatus) error {
	q := &unstructured.Unstructured{}
	q.SetGroupVersionKind(VolcanoQueue)
	if err := v.Client.Get(ctx, client.ObjectKey{Name: pool.Name}, q); err != nil {
		return client.IgnoreNotFound(err)
	}
	if st.Resource != "" {
		if s, ok, _ := unstructured.NestedString(q.Object, "status", "allocated", string(st.Resource)); ok {
			if qty, err := resource.ParseQuantity(s); err == nil {
				st.Used = qty.Value()
			}
		}
	}
	groups := &unstructured.UnstructuredList{}
	groups.SetGroupVersionKind(VolcanoPodGroup.GroupVersion().WithKind("PodGroupList"))
	if err := v.Client.List(ctx, groups); err != nil {
		if apimeta.IsNoMatchError(err) {
			return nil
		}
		return err
	}
	for _, g := range groups.Items {
		if name, _, _ := unstructured.NestedString(g.Object, "spec", "queue"); name != pool.Name {
			continue
		}
		switch phase, _, _ := unstructured.NestedString(g.Object, "status", "phase"); phase {
		case "", "Pending":
			st.Pending++
		case "Inqueue", "Running":
			st.Admitted++
		}
	}
	return nil
}

// Remove deletes the pool's own Queue and HyperNodes.
func (v Volcano) Remove(ctx context.Context, pool *v1alpha1.Pool) error {
	err := v.prune(ctx, pool, VolcanoHyperNode.GroupVersion().WithKind("HyperNodeList"), nil)
	if err != nil && !apimeta.IsNoMatchError(err) {
		return err
	}
	err = v.prune(ctx, pool, VolcanoQueue.GroupVersion().WithKind("QueueList"), nil)
	if apimeta.IsNoMatchError(err) {
		return nil
	}
	return err
}

// prune deletes the objects of list kind that the pool owns, but those named in keep.
func (v Volcano) prune(ctx context.Context, pool *v1alpha1.Pool, kind schema.GroupVersionKind, keep []string) error {
	return Kueue{Client: v.Client}.prune(ctx, pool, kind, keep, (*unstructured.Unstructured).GetName)
}

// LabelDiscoveryOn says whether Volcano's controller discovers HyperNodes from node
// labels itself (a networkTopologyDiscovery entry with source: label, enabled), read
// from its ConfigMap; a missing ConfigMap is no discovery.
func (v Volcano) LabelDiscoveryOn(ctx context.Context) (bool, error) {
	key := v.ConfigMap
	if key.Name == "" {
		key = VolcanoDiscoveryConfigMap
	}
	r := v.Reader
	if r == nil {
		r = v.Client
	}
	var cm corev1.ConfigMap
	if err := r.Get(ctx, key, &cm); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return LabelDiscoveryIn(cm.Data[VolcanoDiscoveryKey]), nil
}

// LabelDiscoveryIn says whether Volcano's controller configuration turns label
// discovery on. A configuration that does not parse is taken as on: litepool then
// writes no HyperNodes rather than fight a discovery it cannot read.
func LabelDiscoveryIn(conf string) bool {
	if strings.TrimSpace(conf) == "" {
		return false
	}
	var c struct {
		NetworkTopologyDiscovery []discoverySource `json:"networkTopologyDiscovery"`
	}
	if err := yaml.Unmarshal([]byte(conf), &c); err != nil {
		return true
	}
	return slices.ContainsFunc(c.NetworkTopologyDiscovery, func(d discoverySource) bool {
		return d.Source == "label" && d.Enabled
	})
}

// discoverySource is the part of a networkTopologyDiscovery entry litepool reads.
type discoverySource struct {
	Source  string `json:"source"`
	Enabled bool   `json:"enabled"`
}
