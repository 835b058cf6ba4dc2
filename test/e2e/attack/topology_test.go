package attack

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// Rows of issue 40: a writer of node labels moving nodes between a pool's domains.
const superPod = "huawei.com/topotree.superpodid"

// topoPool makes a pool with super nodes (Ascend preset, minNodesPerDomain 2) whose
// members are given by domain, and returns its name.
func topoPool(t *testing.T, name string, domains map[string][]string) {
	t.Helper()
	kube := framework.C.Kube
	_, err := poolclient.New(framework.C.Dynamic).Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.PoolSpec{
		Type: v1alpha1.PoolTypeDevelopment, MinNodes: 1, Namespaces: []string{ownNS},
		Topology: &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend, MinNodesPerDomain: 2}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for d, nodes := range domains {
		for _, n := range nodes {
			framework.CreateReadyNode(t, kube, n, name)
			_, err := kube.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(`{"metadata":{"labels":{"`+superPod+`":"`+d+`"}}}`), metav1.PatchOptions{})
			require.NoError(t, err)
		}
	}
}

// nodeFacts is what litepool could do to a node: its pool, cordon and litepool's taints.
func nodeFacts(t *testing.T, names ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range names {
		n, err := framework.C.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		var taints []string
		for _, tt := range n.Spec.Taints {
			if strings.HasPrefix(tt.Key, policy.Prefix) { // litepool's; the node lifecycle controller's come and go
				taints = append(taints, tt.ToString())
			}
		}
		out[name] = "pool=" + n.Labels[policy.LabelPool] + " cordoned=" + map[bool]string{true: "yes", false: "no"}[n.Spec.Unschedulable] + " taints=" + strings.Join(taints, ",")
	}
	return out
}

// attackMoveBetweenDomains: the node labeller rewrites the super node of members (one
// runs a pod), removes one member's, and the pool changes nothing in answer. The sync
// point is the controller's own: an operator adds a member afterwards, and once the
// status counts it, the controller has seen the moves too (it reconciles the pool as a
// whole, from the nodes as they are).
func attackMoveBetweenDomains(t *testing.T) {
	const pool = "at-topo"
	nodes := []string{"at-topo-a1", "at-topo-a2", "at-topo-b1", "at-topo-b2"}
	topoPool(t, pool, map[string][]string{"sp-a": nodes[:2], "sp-b": nodes[2:]})
	pod := gpuPod("at-topo-job", "8")
	pod.Labels = map[string]string{policy.LabelPool: pool}
	pod.Spec.NodeName = "at-topo-a1"
	_, err := framework.C.Kube.CoreV1().Pods(ownNS).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	before := nodeFacts(t, nodes...)

	labeller := as(t, nodePatcher)
	for _, patch := range []struct{ node, value string }{
		{"at-topo-a1", `"sp-b"`}, // the busy member into the other super node
		{"at-topo-b1", `"sp-a"`}, // an idle one the other way
		{"at-topo-b2", `null`},   // out of every domain
	} {
		_, err := labeller.CoreV1().Nodes().Patch(ctx, patch.node, types.MergePatchType, []byte(`{"metadata":{"labels":{"`+superPod+`":`+patch.value+`}}}`), metav1.PatchOptions{})
		require.NoError(t, err, "topology labels are their agents': never refused (%s)", patch.node)
	}

	framework.CreateReadyNode(t, framework.C.Kube, "at-topo-a3", pool)
	var status v1alpha1.PoolStatus
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(c context.Context) (bool, error) {
		p, err := poolclient.New(framework.C.Dynamic).Get(c, pool)
		if err != nil {
			return false, err
		}
		status = p.Status
		return status.NodeCount == 5, nil
	})
	require.NoError(t, err, "the controller never counted the fifth member: %+v", status)
	assert.Equal(t, int64(40), status.AcceleratorTotal, "capacity is each member's allocatable, whatever domain it claims")
	assert.Equal(t, before, nodeFacts(t, nodes...), "litepool cordoned, tainted or removed nothing")
	got, err := framework.C.Kube.CoreV1().Pods(ownNS).Get(ctx, "at-topo-job", metav1.GetOptions{})
	require.NoError(t, err, "the pod still exists")
	assert.Nil(t, got.DeletionTimestamp, "nothing evicts the pod")
}

// attackShrinkDomainThenDepart: sp-c has 3 members and a floor of 2; the labeller moves
// one out, then removes the pool label of another. The floor counts the members sp-c
// has at the departure, so it is refused.
func attackShrinkDomainThenDepart(t *testing.T) {
	const pool = "at-topo2"
	topoPool(t, pool, map[string][]string{"sp-c": {"at-topo-c1", "at-topo-c2", "at-topo-c3"}})
	labeller := as(t, nodePatcher)
	_, err := labeller.CoreV1().Nodes().Patch(ctx, "at-topo-c1", types.MergePatchType, []byte(`{"metadata":{"labels":{"`+superPod+`":"sp-z"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	leave := []byte(`{"metadata":{"labels":{"` + policy.LabelPool + `":null}}}`)
	// The webhook judges from its cache: a server-side dry run (which reserves nothing)
	// tells when the cache has seen the move.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(c context.Context) (bool, error) {
		_, err := framework.C.Kube.CoreV1().Nodes().Patch(c, "at-topo-c2", types.MergePatchType, leave, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "minNodesPerDomain 2"), nil
	})
	require.NoError(t, err, "the webhook never saw sp-c at its floor")
	_, err = labeller.CoreV1().Nodes().Patch(ctx, "at-topo-c2", types.MergePatchType, leave, metav1.PatchOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `[N3] node "at-topo-c2" cannot leave pool "at-topo2": its domain "sp-c"`)
	assert.Equal(t, map[string]string{"at-topo-c2": "pool=" + pool + " cordoned=no taints="}, nodeFacts(t, "at-topo-c2"))
}
