package volcano

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	gpu         = corev1.ResourceName("nvidia.com/gpu")
	superpod    = "huawei.com/topotree.superpodid"
	waitTimeout = 60 * time.Second
)

var (
	queues     = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "queues"}
	podGroups  = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
	jobs       = schema.GroupVersionResource{Group: "batch.volcano.sh", Version: "v1alpha1", Resource: "jobs"}
	hyperNodes = schema.GroupVersionResource{Group: "topology.volcano.sh", Version: "v1alpha1", Resource: "hypernodes"}
)

func dyn(gvr schema.GroupVersionResource, namespace string) dynamic.ResourceInterface {
	if namespace == "" {
		return framework.C.Dynamic.Resource(gvr)
	}
	return framework.C.Dynamic.Resource(gvr).Namespace(namespace)
}

// volcanoPool makes a Training Pool feeding Volcano, with the health loop (so that a
// node can be held out) and n kwok nodes of 8 GPUs, each labelled with labels(i); it
// waits until they are in service and returns their names.
func volcanoPool(t *testing.T, name string, n int, mutate func(*v1alpha1.Pool), labels func(i int) map[string]string) []string {
	t.Helper()
	p := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1, Exclusive: true,
			Accelerator: v1alpha1.AcceleratorSpec{ResourceName: gpu},
			Health:      &v1alpha1.HealthPolicy{HoldTime: &metav1.Duration{Duration: 2 * time.Second}, MaxQuarantinedPercent: 50},
			Queue:       &v1alpha1.QueueSpec{Scheduler: v1alpha1.QueueVolcano}}}
	if mutate != nil {
		mutate(p)
	}
	_, err := poolclient.New(framework.C.Dynamic).Create(context.Background(), p, metav1.CreateOptions{})
	require.NoError(t, err)
	var nodes []string
	for i := 1; i <= n; i++ {
		node := name + "-" + string(rune('0'+i))
		framework.CreateReadyNode(t, framework.C.Kube, node, name)
		if labels != nil {
			patchLabels(t, node, labels(i))
		}
		nodes = append(nodes, node)
	}
	framework.WaitInService(t, framework.C.Kube, nodes...)
	return nodes
}

func patchLabels(t *testing.T, node string, labels map[string]string) {
	t.Helper()
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		n, err := framework.C.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for k, v := range labels {
			if v == "" {
				delete(n.Labels, k)
			} else {
				n.Labels[k] = v
			}
		}
		_, err = framework.C.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err == nil, nil
	}))
}

func getPool(t *testing.T, name string) *v1alpha1.Pool {
	t.Helper()
	p, err := poolclient.New(framework.C.Dynamic).Get(context.Background(), name)
	require.NoError(t, err)
	return p
}

// capability is the Queue's spec.capability of the accelerator ("" without a Queue).
func capability(t *testing.T, name string) string {
	q, err := dyn(queues, "").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	s, _, _ := unstructured.NestedString(q.Object, "spec", "capability", string(gpu))
	return s
}

// waitCapability waits until the Queue's capability is want and returns how long it took.
func waitCapability(t *testing.T, name, want string) time.Duration {
	t.Helper()
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return capability(t, name) == want, nil
	})
	require.NoError(t, err, "Queue %s: capability %q, want %q", name, capability(t, name), want)
	return time.Since(start)
}

func queueCondition(t *testing.T, pool string) *metav1.Condition {
	return apimeta.FindStatusCondition(getPool(t, pool).Status.Conditions, "Queue")
}

// The Show: a pool of 3 × 8 GPUs feeding Volcano is a Queue whose capability is
// 24; one node quarantined (held out by the health verb): 16; it returns: 24.
func TestVolcanoQueueFollowsCapacity(t *testing.T) {
	const pool = "vtrain"
	nodes := volcanoPool(t, pool, 3, nil, nil)
	waitCapability(t, pool, "24")
	// deserved and guarantee are judged against the capacity: set once the members are in.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := getPool(t, pool) // the status controllers write it too
		p.Spec.Queue.Deserved, p.Spec.Queue.Guarantee = ptr.To[int64](24), ptr.To[int64](8)
		_, err := poolclient.New(framework.C.Dynamic).Update(context.Background(), p, metav1.UpdateOptions{})
		return err
	}))
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		q, err := dyn(queues, "").Get(ctx, pool, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		d, _, _ := unstructured.NestedString(q.Object, "spec", "deserved", string(gpu))
		return d == "24", nil
	}))
	q, err := dyn(queues, "").Get(context.Background(), pool, metav1.GetOptions{})
	require.NoError(t, err)
	ref := metav1.GetControllerOf(q)
	require.NotNil(t, ref, "the Queue is owned by its Pool")
	assert.Equal(t, "Pool", ref.Kind)
	assert.Equal(t, getPool(t, pool).UID, ref.UID)

	hold := time.Now()
	framework.C.MustLitepool(t, "health", "hold", nodes[0], "--reason", "e2e: a GPU fell off the bus")
	dropped := waitCapability(t, pool, "16")
	t.Logf("hold -> capability 16 in %s", time.Since(hold).Round(time.Millisecond))
	assert.Less(t, dropped, 30*time.Second)
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		c := queueCondition(t, pool)
		return c != nil && c.Reason == "Clamped", nil
	}), "the Queue condition says deserved was lowered: %+v", queueCondition(t, pool))
	q, err = dyn(queues, "").Get(context.Background(), pool, metav1.GetOptions{})
	require.NoError(t, err)
	deserved, _, _ := unstructured.NestedString(q.Object, "spec", "deserved", string(gpu))
	assert.Equal(t, "16", deserved, "deserved is never above the capability")
	assert.Contains(t, queueCondition(t, pool).Message, "deserved 24 lowered to the capability 16")

	back := time.Now()
	framework.C.MustLitepool(t, "health", "release", nodes[0])
	waitCapability(t, pool, "24")
	t.Logf("release -> capability 24 in %s", time.Since(back).Round(time.Millisecond))
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		c := queueCondition(t, pool)
		return c != nil && c.Reason == "Synced", nil
	}))

	desc := framework.C.MustLitepool(t, "describe", "pool", pool)
	t.Logf("kubectl litepool describe pool:\n%s", desc)
	assert.Contains(t, desc, "Volcano Queue vtrain: capability 24 nvidia.com/gpu from 3 schedulable nodes")
}

// The same pool with a topology: one HyperNode per super node, selecting exactly the
// pool's members of that super node; they follow the members and leave with the Pool.
func TestVolcanoHyperNodesPerSuperNode(t *testing.T) {
	const pool = "vtopo"
	sp := func(i int) string { return []string{"", "sp1", "sp1", "sp2"}[i] }
	nodes := volcanoPool(t, pool, 3, func(p *v1alpha1.Pool) {
		p.Spec.Topology = &v1alpha1.TopologySpec{Levels: []string{superpod}}
	}, func(i int) map[string]string { return map[string]string{superpod: sp(i)} })
	waitCapability(t, pool, "24")

	members := func(name string) []string {
		h, err := dyn(hyperNodes, "").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		ms, _, _ := unstructured.NestedSlice(h.Object, "spec", "members")
		require.Len(t, ms, 1)
		match, _, _ := unstructured.NestedStringMap(ms[0].(map[string]any), "selector", "labelMatch", "matchLabels")
		var sel []string
		for k, v := range match {
			sel = append(sel, k+"="+v)
		}
		list, err := framework.C.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: strings.Join(sel, ",")})
		require.NoError(t, err)
		var names []string
		for _, n := range list.Items {
			names = append(names, n.Name)
		}
		return names
	}
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return len(members("vtopo-sp2")) == 1, nil
	}), "HyperNodes: %s", framework.C.Kubectl(t, "", "get", "hypernodes", "-o", "yaml").Stdout)
	assert.ElementsMatch(t, nodes[:2], members("vtopo-sp1"))
	assert.ElementsMatch(t, nodes[2:], members("vtopo-sp2"))
	list, err := dyn(hyperNodes, "").List(context.Background(), metav1.ListOptions{LabelSelector: policy.LabelPool + "=" + pool})
	require.NoError(t, err)
	assert.Len(t, list.Items, 2, "one HyperNode per super node")
	for _, h := range list.Items {
		tier, _, _ := unstructured.NestedInt64(h.Object, "spec", "tier")
		assert.Equal(t, int64(1), tier)
		assert.NotNil(t, metav1.GetControllerOf(&h))
	}
	assert.Equal(t, int32(2), getPool(t, pool).Status.Queue.HyperNodes)
	domains := framework.C.MustLitepool(t, "get", "domains", pool)
	t.Logf("kubectl litepool get domains:\n%s", domains)
	assert.Regexp(t, `sp1\s.*vtopo-sp1`, domains)

	// sp2's member moves to sp1: sp2's HyperNode goes, sp1's selects all three.
	patchLabels(t, nodes[2], map[string]string{superpod: "sp1"})
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := dyn(hyperNodes, "").Get(ctx, "vtopo-sp2", metav1.GetOptions{})
		return err != nil, nil
	}), "the empty super node's HyperNode is deleted")
	assert.ElementsMatch(t, nodes, members("vtopo-sp1"))
}

// Bad input: each refused at admission with the field named, and nothing changed.
func TestVolcanoBadInput(t *testing.T) {
	ctx := context.Background()
	pools := poolclient.New(framework.C.Dynamic)
	const pool = "vbad"
	volcanoPool(t, pool, 1, nil, nil)
	waitCapability(t, pool, "8")
	before := getPool(t, pool)

	update := func(mutate func(*v1alpha1.Pool)) error {
		// The status controllers write the Pool too: retried on their conflicts only.
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p := getPool(t, pool)
			mutate(p)
			_, err := pools.Update(ctx, p, metav1.UpdateOptions{})
			return err
		})
	}
	for name, tc := range map[string]struct {
		mutate func(*v1alpha1.Pool)
		field  string
	}{
		"deserved above capability":   {func(p *v1alpha1.Pool) { p.Spec.Queue.Deserved = ptr.To[int64](9) }, "spec.queue.deserved"},
		"guarantee above capability":  {func(p *v1alpha1.Pool) { p.Spec.Queue.Guarantee = ptr.To[int64](9) }, "spec.queue.guarantee"},
		"Volcano with Kueue's cohort": {func(p *v1alpha1.Pool) { p.Spec.Queue.Cohort = "research" }, "spec.queue.cohort"},
		"Volcano with Kueue's shares": {func(p *v1alpha1.Pool) {
			p.Spec.Queue.Shares = []v1alpha1.QueueShare{{Namespace: "default", Accelerators: 4}}
		}, "spec.queue.shares"},
		"Kueue with Volcano's deserved": {func(p *v1alpha1.Pool) {
			p.Spec.Queue.Scheduler, p.Spec.Queue.Deserved = v1alpha1.QueueKueue, ptr.To[int64](4)
		}, "spec.queue.deserved"},
	} {
		t.Run(name, func(t *testing.T) {
			err := update(tc.mutate)
			require.Error(t, err)
			assert.Contains(t, err.Error(), `admission webhook "pools.runwhere.ai" denied the request: [R1] `+tc.field)
			after := getPool(t, pool)
			assert.Equal(t, before.Generation, after.Generation, "the refused update changed the Pool")
			assert.Equal(t, before.Spec, after.Spec, "the refused update changed the Pool")
			assert.Equal(t, "8", capability(t, pool))
		})
	}

	// A Queue of the name, someone else's: a pool of that name feeding Volcano is refused
	// and the Queue is left as it was.
	theirs := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
		"metadata": map[string]any{"name": "vtaken", "labels": map[string]any{policy.LabelPool: "vtaken"}},
		"spec":     map[string]any{"weight": int64(1), "capability": map[string]any{string(gpu): "100"}}}}
	_, err := dyn(queues, "").Create(ctx, theirs, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = pools.Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "vtaken"},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1, Accelerator: v1alpha1.AcceleratorSpec{ResourceName: gpu},
			Queue: &v1alpha1.QueueSpec{Scheduler: v1alpha1.QueueVolcano}}}, metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `[R1] metadata.name: a Volcano Queue named "vtaken" exists and is not pool "vtaken"'s`)
	_, err = pools.Get(ctx, "vtaken")
	assert.Error(t, err, "no Pool was made")
	assert.Equal(t, "100", capability(t, "vtaken"), "the other owner's Queue is left as it was")
}

// P4 for the queue's own objects: a Volcano Job or PodGroup naming the pool's queue from
// a namespace the pool does not admit is refused; from one it admits, accepted. The
// Job's pods, labelled with the pool, get the pool's nodeSelector and toleration (P1).
func TestVolcanoSubmissionsFromOtherNamespacesRefused(t *testing.T) {
	ctx := context.Background()
	const pool = "vqp4"
	for _, ns := range []string{"vqp4-team", "vqp4-other"} {
		_, err := framework.C.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	volcanoPool(t, pool, 1, func(p *v1alpha1.Pool) { p.Spec.Namespaces = []string{"vqp4-team"} }, nil)
	waitCapability(t, pool, "8")

	job := func(ns, name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec": map[string]any{"queue": pool, "minAvailable": int64(1), "schedulerName": "volcano",
				"tasks": []any{map[string]any{"name": "worker", "replicas": int64(1), "template": map[string]any{
					"metadata": map[string]any{"labels": map[string]any{policy.LabelPool: pool}},
					"spec": map[string]any{"containers": []any{map[string]any{"name": "train", "image": "registry.example.com/train:1",
						"resources": map[string]any{"limits": map[string]any{string(gpu): "8"}}}}}}}}}}}
	}
	podGroup := func(ns, name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"queue": pool, "minMember": int64(1)}}}
	}
	_, err := dyn(jobs, "vqp4-other").Create(ctx, job("vqp4-other", "sneak"), metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `admission webhook "volcano-queues.runwhere.ai" denied the request: [P4] Job in namespace "vqp4-other" names Volcano queue "vqp4"`)
	_, err = dyn(podGroups, "vqp4-other").Create(ctx, podGroup("vqp4-other", "sneak"), metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `[P4] PodGroup in namespace "vqp4-other" names Volcano queue "vqp4"`)
	_, err = dyn(jobs, "vqp4-other").Get(ctx, "sneak", metav1.GetOptions{})
	assert.Error(t, err, "the refused Job was not made")

	_, err = dyn(jobs, "vqp4-team").Create(ctx, job("vqp4-team", "train"), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = dyn(podGroups, "vqp4-team").Create(ctx, podGroup("vqp4-team", "train"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		q := getPool(t, pool).Status.Queue
		return q != nil && q.Pending == 1, nil
	}), "the PodGroup waits in the pool's queue: %+v", getPool(t, pool).Status.Queue)

	// The pod Volcano's job controller makes of the task (its template, the group
	// annotation, scheduler volcano): litepool's P1 keeps it to the pool's nodes.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-worker-0", Namespace: "vqp4-team",
		Labels:      map[string]string{policy.LabelPool: pool},
		Annotations: map[string]string{"scheduling.k8s.io/group-name": "train"}},
		Spec: corev1.PodSpec{SchedulerName: "volcano", Containers: []corev1.Container{{Name: "train", Image: "registry.example.com/train:1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{gpu: *resourceQuantity("8")}}}}}}
	got, err := framework.C.Kube.CoreV1().Pods("vqp4-team").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, pool, got.Spec.NodeSelector[policy.LabelPool])
	assert.Contains(t, got.Spec.Tolerations, policy.ExclusivePoolToleration(pool))
}
