package kueue

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/pkg/queue"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	superPod     = "huawei.com/topotree.superpodid"
	requiredTopo = "kueue.x-k8s.io/podset-required-topology"
)

// superNodePool makes an exclusive pool of domains super nodes × size kwok nodes of 8
// GPUs, labelled as MindCluster labels an A3 super pod, with spec.queue and the Ascend
// preset; it returns each node's super node.
func superNodePool(t *testing.T, name, namespace string, domains, size int) map[string]string {
	t.Helper()
	_, err := poolclient.New(framework.C.Dynamic).Create(context.Background(), &v1alpha1.Pool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, Exclusive: true, Namespaces: []string{namespace},
			Accelerator: v1alpha1.AcceleratorSpec{ResourceName: gpu},
			Topology:    &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend},
			Queue:       &v1alpha1.QueueSpec{Scheduler: v1alpha1.QueueKueue}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	domainOf := map[string]string{}
	for d := 1; d <= domains; d++ {
		for i := 1; i <= size; i++ {
			node := fmt.Sprintf("%s-sp%d-%d", name, d, i)
			framework.CreateReadyNode(t, framework.C.Kube, node, name)
			sp := fmt.Sprintf("superpod-%d", d)
			patchNode(t, node, func(n *corev1.Node) {
				n.Labels[superPod] = sp
				n.Labels["huawei.com/topotree.rackid"] = fmt.Sprintf("rack-%d-%d", d, (i+1)/2)
			})
			domainOf[node] = sp
		}
	}
	return domainOf
}

// tasJob is a gpuJob whose pods Kueue must place inside one domain of level.
func tasJob(namespace, name, pool string, pods int32, level string) *batchv1.Job {
	job := gpuJob(namespace, name, pool, pods, 8, map[string]string{policy.LabelPool: pool}, false)
	job.Spec.Template.Annotations = map[string]string{requiredTopo: level}
	return job
}

// domainsOf are the super nodes the Job's pods ran on.
func domainsOf(t *testing.T, namespace, job string, domainOf map[string]string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, p := range waitJobPodsRunning(t, namespace, job, n) {
		got[domainOf[p.Spec.NodeName]]++
	}
	return got
}

// TestSuperNodePoolQueuesWholeDomains: a pool with the Ascend topology is a Kueue TAS
// flavor over its super nodes. A gang that requires a super node lands in one; with a
// member of three of them cordoned it lands in the fourth; a gang larger than any super
// node waits in Kueue and no pod of it is made.
func TestSuperNodePoolQueuesWholeDomains(t *testing.T) {
	const pool, ns = "qsuper", "q-super"
	createNamespace(t, ns, nil)
	domainOf := superNodePool(t, pool, ns, 4, 4)
	waitQuota(t, pool, "128")

	p := getPool(t, pool)
	top := waitObject(t, kueueGVR("topologies"), "", queue.TopologyName(p))
	assert.Equal(t, []any{map[string]any{"nodeLabel": superPod}, map[string]any{"nodeLabel": "huawei.com/topotree.rackid"}, map[string]any{"nodeLabel": corev1.LabelHostname}},
		top.Object["spec"].(map[string]any)["levels"])
	rf := waitObject(t, flavors, "", queue.FlavorName(p))
	assert.Equal(t, queue.TopologyName(p), rf.Object["spec"].(map[string]any)["topologyName"])

	createJob(t, tasJob(ns, "gang", pool, 4, superPod))
	got := domainsOf(t, ns, "gang", domainOf, 4)
	assert.Len(t, got, 1, "the gang of 4 × 8 GPUs in one super node: %v", got)
	waitJobDone(t, ns, "gang")

	// One member of each of three super nodes cordoned: only the fourth is whole.
	for d := 1; d <= 3; d++ {
		node := fmt.Sprintf("%s-sp%d-1", pool, d)
		patchNode(t, node, func(n *corev1.Node) { n.Spec.Unschedulable = true })
		t.Cleanup(func() { patchNode(t, node, func(n *corev1.Node) { n.Spec.Unschedulable = false }) })
	}
	waitQuota(t, pool, "104")
	createJob(t, tasJob(ns, "fourth", pool, 4, superPod))
	assert.Equal(t, map[string]int{"superpod-4": 4}, domainsOf(t, ns, "fourth", domainOf, 4))

	// 5 × 8 GPUs fit in no super node (32 each), though the quota has room (104, less
	// the 32 of "fourth" if it still runs).
	createJob(t, tasJob(ns, "too-big", pool, 5, superPod))
	var msg string
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		wl := workloadOf(t, ns, "too-big")
		if wl == nil {
			return false, nil
		}
		s, _, m := condition(wl, "QuotaReserved")
		msg = m
		return s == "False" && strings.Contains(m, "topology"), nil
	}), "the gang larger than a super node is not admitted for lack of a domain; workload: %s", workloadSummary(t, ns, "too-big"))
	assert.Empty(t, jobPods(t, ns, "too-big"), "no pod of a Job Kueue did not admit: %s", msg)
}
