package queue

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Kueue's API as litepool writes it: kueue.x-k8s.io/v1beta2, through unstructured
// objects (importing Kueue's Go module would pin other k8s.io versions than ours).
var (
	KueueFlavor       = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "ResourceFlavor"}
	KueueClusterQueue = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "ClusterQueue"}
	KueueLocalQueue   = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "LocalQueue"}
)

// The spec fields litepool owns in each Kueue object: compared on every sync and, when
// one differs, the object's spec is replaced by litepool's whole (the fields it does not
// set go back to Kueue's defaults).
var (
	flavorFields       = []string{"nodeLabels", "nodeTaints", "tolerations", "topologyName"}
	clusterQueueFields = []string{"resourceGroups", "cohortName", "namespaceSelector", "admissionChecks", "admissionChecksStrategy", "stopPolicy"}
	localQueueFields   = []string{"clusterQueue", "stopPolicy"}
)

// Kueue is the Kueue adapter. Every object is named after the pool: the ResourceFlavor,
// the ClusterQueue and each LocalQueue (so a Job names its pool as its queue).
type Kueue struct {
	// Client reads Kueue's objects from the API server (unstructured objects are not
	// cached) and writes them.
	Client client.Client
}

var _ Adapter = Kueue{}

// KueueFlavorFor is the pool's ResourceFlavor: its members' label, and for an exclusive
// pool its taint with the matching toleration (P1's, from pkg/policy). Kueue adds the
// toleration to the pods it admits, so that rule P1, P4 and P6 see what they would see
// of a pod that names the pool; its flavor assigner and TAS placement count it when
// they match the members' taints, so the pool's own taint does not keep a Workload
// out. Kueue's TAS node controller does not read it (it judges a node by the Workload's
// template alone): docs/queueing.md asks a TAS gang's template for the toleration.
func KueueFlavorFor(pool *v1alpha1.Pool) *unstructured.Unstructured {
	spec := map[string]any{"nodeLabels": map[string]any{policy.LabelPool: pool.Name}}
	if pool.Spec.Exclusive {
		t, tol := policy.ExclusiveTaint(pool.Name), policy.ExclusivePoolToleration(pool.Name)
		spec["nodeTaints"] = []any{map[string]any{"key": t.Key, "value": t.Value, "effect": string(t.Effect)}}
		spec["tolerations"] = []any{map[string]any{"key": tol.Key, "operator": string(tol.Operator), "value": tol.Value, "effect": string(tol.Effect)}}
	}
	if top := TopologyName(pool); top != "" {
		spec["topologyName"] = top
	}
	u := object(KueueFlavor, "", pool, spec)
	u.SetName(FlavorName(pool))
	return u
}

// KueueClusterQueueFor is the pool's ClusterQueue: one flavor (the pool's), whose
// nominal quota is the capacity less the namespaces' shares (Split), for the
// accelerator, the DRA devices' logical resource and the resources spec.queue asks for;
// the cohort and limits as the Pool says; open to the namespaces the pool admits, but
// those with a share, whose workloads go through the share's ClusterQueue.
func KueueClusterQueueFor(pool *v1alpha1.Pool, c policy.Capacity, namespaces []string, all bool) *unstructured.Unstructured {
	q := pool.Spec.Queue
	shares, rest := Split(pool, c)
	lim := limits{accBorrow: q.BorrowingLimit, accLend: q.LendingLimit}
	if q.Devices != nil {
		lim.devBorrow, lim.devLend = q.Devices.BorrowingLimit, q.Devices.LendingLimit
	}
	var shared []string
	for _, s := range shares {
		shared = append(shared, s.Namespace)
	}
	return clusterQueue(pool, pool.Name, rest, lim, namespaceSelector(namespaces, all, shared))
}

// KueueShareQueueFor is the ClusterQueue of one namespace's share: the pool's flavor
// with the share's quota of each resource the pool's queue covers, in the pool's cohort
// (it borrows what the pool and the other shares do not use, up to its borrowingLimit,
// and lends what it does not), open to its namespace only.
func KueueShareQueueFor(pool *v1alpha1.Pool, c policy.Capacity, s Share) *unstructured.Unstructured {
	sc := c
	sc.Accelerators, sc.Devices, sc.CPU, sc.Memory = s.Accelerators, s.Devices, s.CPU, s.Memory
	lim := limits{accBorrow: s.BorrowingLimit, devBorrow: s.BorrowingLimit}
	return clusterQueue(pool, s.ClusterQueue, sc, lim, namespaceSelector([]string{s.Namespace}, false, nil))
}

// limits are a ClusterQueue's borrowing and lending limits of the accelerator and of
// the devices (nil: none).
type limits struct{ accBorrow, accLend, devBorrow, devLend *int64 }

func clusterQueue(pool *v1alpha1.Pool, name string, c policy.Capacity, lim limits, selector map[string]any) *unstructured.Unstructured {
	q := pool.Spec.Queue
	var covered, quotas []any
	if c.Resource != "" {
		covered, quotas = append(covered, string(c.Resource)), append(quotas, quota(c.Resource, count(c.Accelerators), lim.accBorrow, lim.accLend))
	}
	if c.DeviceResource != "" && c.DeviceResource != c.Resource {
		// Kueue charges a workload's ResourceClaimTemplates of the mapped DeviceClasses
		// to this logical resource (its deviceClassMappings).
		covered = append(covered, string(c.DeviceResource))
		quotas = append(quotas, quota(c.DeviceResource, count(c.Devices), lim.devBorrow, lim.devLend))
	}
	for _, r := range q.Resources {
		amount := c.CPU
		if corev1.ResourceName(r) == corev1.ResourceMemory {
			amount = c.Memory
		}
		covered = append(covered, string(r))
		quotas = append(quotas, map[string]any{"name": string(r), "nominalQuota": amount.String()})
	}
	spec := map[string]any{"namespaceSelector": selector}
	if len(covered) > 0 {
		spec["resourceGroups"] = []any{map[string]any{"coveredResources": covered,
			"flavors": []any{map[string]any{"name": FlavorName(pool), "resources": quotas}}}}
	}
	if cohort := Cohort(pool); cohort != "" {
		spec["cohortName"] = cohort
	}
	u := object(KueueClusterQueue, "", pool, spec)
	u.SetName(name)
	return u
}

func quota(r corev1.ResourceName, nominal string, borrow, lend *int64) map[string]any {
	m := map[string]any{"name": string(r), "nominalQuota": nominal}
	if borrow != nil {
		m["borrowingLimit"] = count(*borrow)
	}
	if lend != nil {
		m["lendingLimit"] = count(*lend)
	}
	return m
}

// count is n as the API server writes a quantity back (1000 is "1k"), so that what
// litepool wrote compares equal to what it reads.
func count(n int64) string { return resource.NewQuantity(n, resource.DecimalSI).String() }

// namespaceSelector admits what the pool admits, by the namespace's name label (set by
// the API server, so no namespace can claim another's): a LocalQueue someone else made
// in another namespace gets no workload admitted through the pool's queue.
// Namespaces with a share of their own (except) are left out: their workloads are
// admitted through the share's ClusterQueue only, so that a LocalQueue of their own
// pointing at the pool's cannot pass their share.
func namespaceSelector(namespaces []string, all bool, except []string) map[string]any {
	const key = "kubernetes.io/metadata.name"
	namespaces = slices.DeleteFunc(slices.Clone(namespaces), func(n string) bool { return slices.Contains(except, n) })
	switch {
	case all && len(except) > 0:
		return map[string]any{"matchExpressions": []any{map[string]any{"key": key, "operator": "NotIn", "values": anys(except)}}}
	case all:
		return map[string]any{}
	case len(namespaces) == 0:
		return map[string]any{"matchExpressions": []any{map[string]any{"key": key, "operator": "DoesNotExist"}}}
	}
	return map[string]any{"matchExpressions": []any{map[string]any{"key": key, "operator": "In", "values": anys(namespaces)}}}
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// KueueLocalQueueFor is the pool's LocalQueue in namespace: it points at the pool's
// ClusterQueue, or at the namespace's share's.
func KueueLocalQueueFor(pool *v1alpha1.Pool, namespace string) *unstructured.Unstructured {
	cq := pool.Name
	if slices.ContainsFunc(pool.Spec.Queue.Shares, func(s v1alpha1.QueueShare) bool { return s.Namespace == namespace }) {
		cq = ShareQueueName(pool.Name, namespace)
	}
	return object(KueueLocalQueue, namespace, pool, map[string]any{"clusterQueue": cq})
}

// object is a Kueue object named after pool, labelled with it (for listing; not proof)
// and controlled by it (the proof, and what the garbage collector deletes it by).
func object(gvk schema.GroupVersionKind, namespace string, pool *v1alpha1.Pool, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetName(pool.Name)
	u.SetNamespace(namespace)
	u.SetLabels(map[string]string{policy.LabelPool: pool.Name})
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Pool",
		Name: pool.Name, UID: pool.UID, Controller: ptr.To(true)}})
	return u
}

// OwnedBy says whether obj has a controller ownerReference to pool's uid.
func OwnedBy(obj metav1.Object, pool *v1alpha1.Pool) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == pool.UID && ref.Kind == "Pool" && ref.APIVersion == v1alpha1.GroupVersion.String()
}

// Sync writes the flavor, the ClusterQueue and the LocalQueues, deletes the pool's
// LocalQueues in namespaces it no longer admits, and reads the ClusterQueue's status.
// An object of another owner stops nothing else: the rest is written, and the error
// names it.
func (k Kueue) Sync(ctx context.Context, pool *v1alpha1.Pool, c policy.Capacity, namespaces []string, all bool) (*v1alpha1.QueueStatus, error) {
	var conflicts []error
	note := func(err error) error {
		if IsNotOwned(err) {
			conflicts = append(conflicts, err)
			return nil
		}
		return err
	}
	if top := KueueTopologyFor(pool); top != nil {
		if err := note(k.apply(ctx, pool, top, topologyFields)); err != nil {
			return nil, err
		}
	}
	if err := note(k.apply(ctx, pool, KueueFlavorFor(pool), flavorFields)); err != nil {
		return nil, err
	}
	cq := KueueClusterQueueFor(pool, c, namespaces, all)
	if err := note(k.apply(ctx, pool, cq, clusterQueueFields)); err != nil {
		return nil, err
	}
	shares, _ := Split(pool, c)
	queues, namespaces := []string{pool.Name}, slices.Clone(namespaces)
	for _, sh := range shares {
		if err := note(k.apply(ctx, pool, KueueShareQueueFor(pool, c, sh), clusterQueueFields)); err != nil {
			return nil, err
		}
		queues = append(queues, sh.ClusterQueue)
		if !slices.Contains(namespaces, sh.Namespace) {
			namespaces = append(namespaces, sh.Namespace) // the pool admits every namespace
		}
	}
	if err := k.pruneShareQueues(ctx, pool, queues); err != nil {
		return nil, err
	}
	// Only now that no ClusterQueue of the pool names them: a flavor and Topology of
	// levels the pool no longer has.
	if err := k.pruneTopology(ctx, pool, []string{FlavorName(pool)}, []string{TopologyName(pool)}); err != nil {
		return nil, err
	}
	slices.Sort(namespaces)
	st := &v1alpha1.QueueStatus{Scheduler: v1alpha1.QueueKueue, ClusterQueue: pool.Name, Resource: c.Resource,
		Quota: c.Accelerators, SchedulableNodes: int32(len(c.Nodes)), DeviceResource: c.DeviceResource, DeviceQuota: c.Devices}
	for _, sh := range shares {
		st.Shares = append(st.Shares, v1alpha1.QueueShareStatus{Namespace: sh.Namespace, ClusterQueue: sh.ClusterQueue,
			Quota: sh.Accelerators, DeviceQuota: sh.Devices})
	}
	for _, ns := range namespaces {
		err := note(k.apply(ctx, pool, KueueLocalQueueFor(pool, ns), localQueueFields))
		if err != nil {
			return nil, err
		}
	}
	if err := k.pruneLocalQueues(ctx, pool, namespaces); err != nil {
		return nil, err
	}
	for _, ns := range namespaces {
		if !conflictIn(conflicts, ns) {
			st.Namespaces = append(st.Namespaces, ns)
		}
	}
	for _, name := range queues {
		if err := k.readStatus(ctx, pool, name, st); err != nil {
			return nil, err
		}
	}
	return st, errors.Join(conflicts...)
}

func conflictIn(conflicts []error, namespace string) bool {
	for _, err := range conflicts {
		var e *NotOwnedError
		if errors.As(err, &e) && e.Kind == KueueLocalQueue.Kind && e.Namespace == namespace {
			return true
		}
	}
	return false
}

// apply creates want, or, when an object of its name exists and the pool owns it, puts
// litepool's spec in place of one whose owned fields differ.
func (k Kueue) apply(ctx context.Context, pool *v1alpha1.Pool, want *unstructured.Unstructured, fields []string) error {
	have := &unstructured.Unstructured{}
	have.SetGroupVersionKind(want.GroupVersionKind())
	err := k.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apimeta.IsNoMatchError(err):
		return &NotInstalledError{Scheduler: v1alpha1.QueueKueue, API: want.GroupVersionKind().GroupVersion().String() + " " + want.GetKind()}
	case apierrors.IsNotFound(err):
		return k.Client.Create(ctx, want)
	case err != nil:
		return err
	}
	if !OwnedBy(have, pool) {
		return &NotOwnedError{Kind: want.GetKind(), Namespace: want.GetNamespace(), Name: want.GetName(), Pool: pool.Name}
	}
	if sameFields(have, want, fields) {
		return nil
	}
	if want.GetKind() == KueueLocalQueue.Kind && !sameFields(have, want, []string{"clusterQueue"}) {
		// Kueue makes a LocalQueue's clusterQueue immutable: a namespace given a share
		// (or losing it) gets its LocalQueue anew; its pending workloads wait for it.
		if err := k.Client.Delete(ctx, have); client.IgnoreNotFound(err) != nil {
			return err
		}
		return k.Client.Create(ctx, want)
	}
	have.Object["spec"] = want.Object["spec"]
	have.SetLabels(mergeLabels(have.GetLabels(), want.GetLabels()))
	return k.Client.Update(ctx, have)
}

// sameFields compares the owned spec fields by their JSON (the API server's numbers
// decode as int64, ours are whatever we wrote).
func sameFields(have, want *unstructured.Unstructured, fields []string) bool {
	for _, f := range fields {
		h, _, _ := unstructured.NestedFieldNoCopy(have.Object, "spec", f)
		w, _, _ := unstructured.NestedFieldNoCopy(want.Object, "spec", f)
		if f == "namespaceSelector" && h != nil && w != nil {
			// {} and an absent selector are the same to Kueue, which defaults it to {}.
			if isEmptyMap(h) && isEmptyMap(w) {
				continue
			}
		}
		if f == "stopPolicy" && w == nil && h == "None" {
			continue // Kueue's default
		}
		hj, _ := json.Marshal(h)
		wj, _ := json.Marshal(w)
		if string(hj) != string(wj) {
			return false
		}
	}
	return true
}

func isEmptyMap(v any) bool {
	m, ok := v.(map[string]any)
	return ok && len(m) == 0
}

func mergeLabels(have, want map[string]string) map[string]string {
	if have == nil {
		have = map[string]string{}
	}
	for k, v := range want {
		have[k] = v
	}
	return have
}

// pruneLocalQueues deletes the pool's own LocalQueues outside namespaces.
func (k Kueue) pruneLocalQueues(ctx context.Context, pool *v1alpha1.Pool, keep []string) error {
	return k.prune(ctx, pool, KueueLocalQueue.GroupVersion().WithKind("LocalQueueList"), keep,
		(*unstructured.Unstructured).GetNamespace)
}

// pruneShareQueues deletes the pool's own share ClusterQueues not in keep (a share
// taken out of spec.queue.shares, or a namespace the pool no longer admits).
func (k Kueue) pruneShareQueues(ctx context.Context, pool *v1alpha1.Pool, keep []string) error {
	return k.prune(ctx, pool, KueueClusterQueue.GroupVersion().WithKind("ClusterQueueList"), keep,
		(*unstructured.Unstructured).GetName)
}

// pruneTopology deletes the pool's own flavors and Topologies not in keep: those of
// levels it no longer has (a Topology's levels and a TAS flavor's topologyName cannot
// change, so new ones are written beside them). A cluster without Kueue's Topology API
// has none to delete.
func (k Kueue) pruneTopology(ctx context.Context, pool *v1alpha1.Pool, flavors, topologies []string) error {
	if err := k.prune(ctx, pool, KueueFlavor.GroupVersion().WithKind("ResourceFlavorList"), flavors,
		(*unstructured.Unstructured).GetName); err != nil {
		return err
	}
	err := k.prune(ctx, pool, KueueTopology.GroupVersion().WithKind("TopologyList"), topologies,
		(*unstructured.Unstructured).GetName)
	if apimeta.IsNoMatchError(err) {
		return nil
	}
	return err
}

// prune deletes the objects of list kind that carry the pool's label and the pool's
// controller reference, but those whose key is in keep; an object the pool does not
// own is left whatever its label says.
func (k Kueue) prune(ctx context.Context, pool *v1alpha1.Pool, kind schema.GroupVersionKind, keep []string, key func(*unstructured.Unstructured) string) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(kind)
	if err := k.Client.List(ctx, list, client.MatchingLabels{policy.LabelPool: pool.Name}); err != nil {
		return err
	}
	for i := range list.Items {
		o := &list.Items[i]
		if !OwnedBy(o, pool) || slices.Contains(keep, key(o)) {
			continue
		}
		if err := k.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// readStatus adds what Kueue reports of one of the pool's ClusterQueues (its own, or a
// share's): its admitted and pending workloads and what they use of the pool's
// accelerator and DRA devices.
func (k Kueue) readStatus(ctx context.Context, pool *v1alpha1.Pool, name string, st *v1alpha1.QueueStatus) error {
	cq := &unstructured.Unstructured{}
	cq.SetGroupVersionKind(KueueClusterQueue)
	if err := k.Client.Get(ctx, client.ObjectKey{Name: name}, cq); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !OwnedBy(cq, pool) {
		return nil
	}
	admitted, _, _ := unstructured.NestedInt64(cq.Object, "status", "admittedWorkloads")
	pending, _, _ := unstructured.NestedInt64(cq.Object, "status", "pendingWorkloads")
	st.Admitted, st.Pending = st.Admitted+int32(admitted), st.Pending+int32(pending)
	var used int64
	usage, _, _ := unstructured.NestedSlice(cq.Object, "status", "flavorsUsage")
	for _, f := range usage {
		fm, _ := f.(map[string]any)
		if fm["name"] != FlavorName(pool) {
			continue
		}
		res, _ := fm["resources"].([]any)
		for _, r := range res {
			rm, _ := r.(map[string]any)
			switch {
			case st.Resource != "" && rm["name"] == string(st.Resource):
				used = total(rm)
				st.Used += used
			case st.DeviceResource != "" && rm["name"] == string(st.DeviceResource):
				st.DeviceUsed += total(rm)
			}
		}
	}
	for i := range st.Shares {
		if st.Shares[i].ClusterQueue == name {
			st.Shares[i].Used = used
		}
	}
	return nil
}

// total is a flavorsUsage resource's total (a quantity string, or a number).
func total(rm map[string]any) int64 {
	if s, ok := rm["total"].(string); ok {
		if q, err := resource.ParseQuantity(s); err == nil {
			return q.Value()
		}
	} else if n, ok := rm["total"].(int64); ok {
		return n
	}
	return 0
}

// Remove deletes the pool's own LocalQueues, ClusterQueues (its own and its shares'),
// flavors and Topologies. Kueue keeps a ClusterQueue or flavor that admitted workloads
// still use until they finish.
func (k Kueue) Remove(ctx context.Context, pool *v1alpha1.Pool) error {
	if err := k.pruneLocalQueues(ctx, pool, nil); err != nil {
		if apimeta.IsNoMatchError(err) {
			return nil
		}
		return err
	}
	if err := k.pruneShareQueues(ctx, pool, nil); err != nil {
		return err
	}
	return k.pruneTopology(ctx, pool, nil, nil)
}
