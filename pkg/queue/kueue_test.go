package queue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

func kueueClient(installed bool, objs ...client.Object) client.Client {
	mapper := apimeta.NewDefaultRESTMapper(nil)
	if installed {
		mapper.Add(KueueFlavor, apimeta.RESTScopeRoot)
		mapper.Add(KueueClusterQueue, apimeta.RESTScopeRoot)
		mapper.Add(KueueLocalQueue, apimeta.RESTScopeNamespace)
		mapper.Add(KueueTopology, apimeta.RESTScopeRoot)
	}
	b := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithRESTMapper(mapper).WithObjects(objs...)
	if !installed {
		// The fake client does not ask its mapper; a real client answers so when the
		// API server does not serve the group.
		noMatch := func(obj runtime.Object) error {
			gvk := obj.GetObjectKind().GroupVersionKind()
			return &apimeta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
		}
		b = b.WithInterceptorFuncs(interceptor.Funcs{
			Get: func(_ context.Context, _ client.WithWatch, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
				return noMatch(obj)
			},
			List: func(_ context.Context, _ client.WithWatch, list client.ObjectList, _ ...client.ListOption) error {
				return noMatch(list)
			},
			Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
				return noMatch(obj)
			},
		})
	}
	return b.Build()
}

func queuePool() *v1alpha1.Pool {
	return &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train", UID: "uid-train"},
		Spec: v1alpha1.PoolSpec{Exclusive: true, Namespaces: []string{"team-a", "team-b"},
			Queue: &v1alpha1.QueueSpec{Scheduler: v1alpha1.QueueKueue, Cohort: "research", BorrowingLimit: ptr.To[int64](4)}}}
}

var capacity24 = policy.Capacity{Resource: "nvidia.com/gpu", Accelerators: 24, Nodes: []string{"a", "b", "c"}}

func get(t *testing.T, c client.Client, gvk schema.GroupVersionKind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return u
}

func field(u *unstructured.Unstructured, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
	return v
}

func TestKueueSyncWritesThePoolsQueue(t *testing.T) {
	c := kueueClient(true)
	pool := queuePool()
	st, err := Kueue{Client: c}.Sync(context.Background(), pool, capacity24, []string{"team-a", "team-b"}, false)
	require.NoError(t, err)
	assert.Equal(t, &v1alpha1.QueueStatus{Scheduler: v1alpha1.QueueKueue, ClusterQueue: "train", Resource: "nvidia.com/gpu",
		Quota: 24, SchedulableNodes: 3, Namespaces: []string{"team-a", "team-b"}}, st)

	rf := get(t, c, KueueFlavor, "", "train")
	require.NotNil(t, rf)
	assert.True(t, OwnedBy(rf, pool))
	assert.Equal(t, map[string]any{policy.LabelPool: "train"}, field(rf, "spec", "nodeLabels"))
	assert.Equal(t, []any{map[string]any{"key": policy.LabelPool, "value": "train", "effect": "NoSchedule"}}, field(rf, "spec", "nodeTaints"))
	assert.Equal(t, []any{map[string]any{"key": policy.LabelPool, "operator": "Equal", "value": "train", "effect": "NoSchedule"}}, field(rf, "spec", "tolerations"))

	cq := get(t, c, KueueClusterQueue, "", "train")
	require.NotNil(t, cq)
	assert.True(t, OwnedBy(cq, pool))
	assert.Equal(t, "research", field(cq, "spec", "cohortName"))
	assert.Equal(t, []any{map[string]any{"coveredResources": []any{"nvidia.com/gpu"}, "flavors": []any{map[string]any{"name": "train",
		"resources": []any{map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "24", "borrowingLimit": "4"}}}}}},
		field(cq, "spec", "resourceGroups"))
	assert.Equal(t, []any{map[string]any{"key": "kubernetes.io/metadata.name", "operator": "In", "values": []any{"team-a", "team-b"}}},
		field(cq, "spec", "namespaceSelector", "matchExpressions"))
	for _, ns := range []string{"team-a", "team-b"} {
		lq := get(t, c, KueueLocalQueue, ns, "train")
		require.NotNil(t, lq, ns)
		assert.Equal(t, "train", field(lq, "spec", "clusterQueue"))
		assert.True(t, OwnedBy(lq, pool))
	}

	// The capacity drops (a node out): the quota follows; a namespace leaves: its
	// LocalQueue goes.
	down := policy.Capacity{Resource: "nvidia.com/gpu", Accelerators: 16, Nodes: []string{"a", "b"}}
	_, err = Kueue{Client: c}.Sync(context.Background(), pool, down, []string{"team-a"}, false)
	require.NoError(t, err)
	cq = get(t, c, KueueClusterQueue, "", "train")
	assert.Equal(t, "16", field(cq, "spec", "resourceGroups").([]any)[0].(map[string]any)["flavors"].([]any)[0].(map[string]any)["resources"].([]any)[0].(map[string]any)["nominalQuota"])
	assert.Nil(t, get(t, c, KueueLocalQueue, "team-b", "train"))
}

// Quantities are written as the API server writes them back, or every pass would see a
// difference and update the ClusterQueue again.
func TestKueueWritesCanonicalQuantities(t *testing.T) {
	big := policy.Capacity{Resource: "nvidia.com/gpu", Accelerators: 1000}
	cq := KueueClusterQueueFor(queuePool(), big, nil, true)
	res := field(cq, "spec", "resourceGroups").([]any)[0].(map[string]any)["flavors"].([]any)[0].(map[string]any)["resources"].([]any)[0].(map[string]any)
	assert.Equal(t, "1k", res["nominalQuota"])
}

func TestKueueCPUAndMemoryWhenAsked(t *testing.T) {
	pool := queuePool()
	pool.Spec.Queue.Resources = []v1alpha1.QueueResource{"cpu", "memory"}
	c := policy.PoolCapacity(pool, nil, policy.NewAccelerators())
	c.Resource = "nvidia.com/gpu"
	c.CPU.Add(*resourceQuantity("128"))
	c.Memory.Add(*resourceQuantity("1Ti"))
	cq := KueueClusterQueueFor(pool, c, nil, true)
	rg := field(cq, "spec", "resourceGroups").([]any)[0].(map[string]any)
	assert.Equal(t, []any{"nvidia.com/gpu", "cpu", "memory"}, rg["coveredResources"])
	res := rg["flavors"].([]any)[0].(map[string]any)["resources"].([]any)
	assert.Equal(t, "128", res[1].(map[string]any)["nominalQuota"])
	assert.Equal(t, "1Ti", res[2].(map[string]any)["nominalQuota"])
	assert.Equal(t, map[string]any{}, field(cq, "spec", "namespaceSelector"), "a pool that admits everyone: any namespace")
}

// DRA devices (spec.queue.devices) are one more covered resource of the pool's flavor:
// the logical resource Kueue charges claims to, with the device count as its quota.
func TestKueueDeviceQuota(t *testing.T) {
	pool := queuePool()
	pool.Spec.Queue.Devices = &v1alpha1.QueueDevices{Resource: "example.com/gpu", DeviceClassNames: []string{"gpu.example.com"}}
	c := policy.Capacity{Resource: "nvidia.com/gpu", Accelerators: 0, DeviceResource: "example.com/gpu", Devices: 24}
	rg := field(KueueClusterQueueFor(pool, c, nil, true), "spec", "resourceGroups").([]any)[0].(map[string]any)
	assert.Equal(t, []any{"nvidia.com/gpu", "example.com/gpu"}, rg["coveredResources"])
	res := rg["flavors"].([]any)[0].(map[string]any)["resources"].([]any)
	assert.Equal(t, map[string]any{"name": "example.com/gpu", "nominalQuota": "24"}, res[1])

	c.Resource = "" // a pool of DRA devices only
	rg = field(KueueClusterQueueFor(pool, c, nil, true), "spec", "resourceGroups").([]any)[0].(map[string]any)
	assert.Equal(t, []any{"example.com/gpu"}, rg["coveredResources"])

	// The devices' own limits, apart from the accelerator's.
	pool.Spec.Queue.Devices.BorrowingLimit, pool.Spec.Queue.Devices.LendingLimit = ptr.To[int64](8), ptr.To[int64](0)
	res = field(KueueClusterQueueFor(pool, c, nil, true), "spec", "resourceGroups").([]any)[0].(map[string]any)["flavors"].([]any)[0].(map[string]any)["resources"].([]any)
	assert.Equal(t, map[string]any{"name": "example.com/gpu", "nominalQuota": "24", "borrowingLimit": "8", "lendingLimit": "0"}, res[0])
}

// An object of the queue's name that the pool does not control is never touched, even
// when it carries the pool's label: the rest of the queue is still written.
func TestKueueLeavesWhatItDoesNotOwn(t *testing.T) {
	pool := queuePool()
	foreignCQ := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"cohortName": "mine",
		"resourceGroups": []any{map[string]any{"coveredResources": []any{"nvidia.com/gpu"}, "flavors": []any{map[string]any{"name": "train",
			"resources": []any{map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "1000"}}}}}}}}}
	foreignCQ.SetGroupVersionKind(KueueClusterQueue)
	foreignCQ.SetName("train")
	foreignCQ.SetLabels(map[string]string{policy.LabelPool: "train"})
	// Owned by another pool of the same name (an earlier one, deleted and made again).
	foreignCQ.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Pool", Name: "train", UID: "uid-old", Controller: ptr.To(true)}})
	foreignLQ := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"clusterQueue": "elsewhere"}}}
	foreignLQ.SetGroupVersionKind(KueueLocalQueue)
	foreignLQ.SetName("train")
	foreignLQ.SetNamespace("team-b")
	foreignLQ.SetLabels(map[string]string{policy.LabelPool: "train"})
	c := kueueClient(true, foreignCQ, foreignLQ)

	st, err := Kueue{Client: c}.Sync(context.Background(), pool, capacity24, []string{"team-a", "team-b"}, false)
	require.Error(t, err)
	assert.True(t, IsNotOwned(err))
	assert.Contains(t, err.Error(), "ClusterQueue train exists and is not pool \"train\"'s")
	assert.Contains(t, err.Error(), "LocalQueue team-b/train")
	assert.Equal(t, []string{"team-a"}, st.Namespaces)

	cq := get(t, c, KueueClusterQueue, "", "train")
	assert.Equal(t, "mine", field(cq, "spec", "cohortName"), "not adopted")
	assert.Equal(t, "elsewhere", field(get(t, c, KueueLocalQueue, "team-b", "train"), "spec", "clusterQueue"))
	assert.NotNil(t, get(t, c, KueueFlavor, "", "train"))
	assert.NotNil(t, get(t, c, KueueLocalQueue, "team-a", "train"))

	// Turning the queue off deletes only what the pool owns.
	require.NoError(t, Kueue{Client: c}.Remove(context.Background(), pool))
	assert.Nil(t, get(t, c, KueueFlavor, "", "train"))
	assert.Nil(t, get(t, c, KueueLocalQueue, "team-a", "train"))
	assert.NotNil(t, get(t, c, KueueClusterQueue, "", "train"))
	assert.NotNil(t, get(t, c, KueueLocalQueue, "team-b", "train"))
}

// A ClusterQueue the pool owns that someone edited (a quota raised, an admission check
// added) gets litepool's spec back whole.
func TestKueueRestoresItsOwnSpec(t *testing.T) {
	c := kueueClient(true)
	pool := queuePool()
	_, err := Kueue{Client: c}.Sync(context.Background(), pool, capacity24, []string{"team-a"}, false)
	require.NoError(t, err)
	cq := get(t, c, KueueClusterQueue, "", "train")
	rg := field(cq, "spec", "resourceGroups").([]any)
	rg[0].(map[string]any)["flavors"].([]any)[0].(map[string]any)["resources"].([]any)[0].(map[string]any)["nominalQuota"] = "1000"
	require.NoError(t, unstructured.SetNestedSlice(cq.Object, rg, "spec", "resourceGroups"))
	require.NoError(t, unstructured.SetNestedSlice(cq.Object, []any{"check"}, "spec", "admissionChecks"))
	require.NoError(t, c.Update(context.Background(), cq))

	_, err = Kueue{Client: c}.Sync(context.Background(), pool, capacity24, []string{"team-a"}, false)
	require.NoError(t, err)
	cq = get(t, c, KueueClusterQueue, "", "train")
	assert.Nil(t, field(cq, "spec", "admissionChecks"))
	assert.Equal(t, "24", field(cq, "spec", "resourceGroups").([]any)[0].(map[string]any)["flavors"].([]any)[0].(map[string]any)["resources"].([]any)[0].(map[string]any)["nominalQuota"])
}

// A pool made exclusive after its flavor was written: the flavor it owns gets the
// pool's taint and P1's toleration (policy's, the one place) on the next sync; a
// foreign flavor of another pool's name is left as it is.
func TestKueueFlavorFollowsExclusive(t *testing.T) {
	foreign := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"nodeLabels": map[string]any{"team": "x"}}}}
	foreign.SetGroupVersionKind(KueueFlavor)
	foreign.SetName("infer")
	c := kueueClient(true, foreign)
	pool := queuePool()
	pool.Spec.Exclusive = false
	_, err := Kueue{Client: c}.Sync(context.Background(), pool, capacity24, []string{"team-a"}, false)
	require.NoError(t, err)
	assert.Nil(t, field(get(t, c, KueueFlavor, "", "train"), "spec", "tolerations"))

	pool.Spec.Exclusive = true
	_, err = Kueue{Client: c}.Sync(context.Background(), pool, capacity24, []string{"team-a"}, false)
	require.NoError(t, err)
	rf := get(t, c, KueueFlavor, "", "train")
	tol := policy.ExclusivePoolToleration("train")
	assert.Equal(t, []any{map[string]any{"key": tol.Key, "operator": string(tol.Operator), "value": tol.Value, "effect": string(tol.Effect)}},
		field(rf, "spec", "tolerations"))
	taint := policy.ExclusiveTaint("train")
	assert.Equal(t, []any{map[string]any{"key": taint.Key, "value": taint.Value, "effect": string(taint.Effect)}}, field(rf, "spec", "nodeTaints"))
	assert.Equal(t, map[string]any{"team": "x"}, field(get(t, c, KueueFlavor, "", "infer"), "spec", "nodeLabels"), "not the pool's: untouched")
	assert.Nil(t, field(get(t, c, KueueFlavor, "", "infer"), "spec", "tolerations"))
}

func TestKueueNotInstalledChangesNothing(t *testing.T) {
	_, err := Kueue{Client: kueueClient(false)}.Sync(context.Background(), queuePool(), capacity24, []string{"team-a"}, false)
	require.Error(t, err)
	assert.True(t, IsNotInstalled(err), err.Error())
	assert.Contains(t, err.Error(), "Kueue is not installed")
	require.NoError(t, Kueue{Client: kueueClient(false)}.Remove(context.Background(), queuePool()))
}

func TestAdmittedNamespaces(t *testing.T) {
	nss := []corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team-c", Labels: map[string]string{"tier": "gpu"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
	}
	pool := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train"}}
	names, all := AdmittedNamespaces(pool, nss)
	assert.True(t, all)
	assert.Nil(t, names)
	pool.Spec.Namespaces = []string{"team-a", "gone"}
	pool.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gpu"}}
	names, all = AdmittedNamespaces(pool, nss)
	assert.False(t, all)
	assert.Equal(t, []string{"team-a", "team-c"}, names, "only namespaces that exist")
}

func resourceQuantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}
