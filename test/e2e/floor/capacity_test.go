package floor

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// startOne runs one webhook process with its controllers and registers deploy/webhook's
// configurations for it.
func startOne(t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	crt, err := localwebhook.NewCerts(t.TempDir())
	require.NoError(t, err)
	p := framework.LaunchLitepool(t, crt.Dir, "--controllers")
	registerByURL(t, kube, p.Addr, crt.CAPEM)
	require.NoError(t, localwebhook.WaitEffective(ctx, kube, "default", 30*time.Second))
}

// TestFloorCountsReadyMembers: a pool at its floor (minNodes 2, two Ready members) lets
// the Node of a NotReady member be deleted, and still refuses a Ready member's.
func TestFloorCountsReadyMembers(t *testing.T) {
	kube := framework.C.Kube
	const pool = "floor-ready"
	t.Cleanup(func() {
		cleanNodes(kube, "cap-")
		_ = poolclient.New(framework.C.Dynamic).Delete(context.Background(), pool, metav1.DeleteOptions{})
	})
	startOne(t, kube)
	_, err := poolclient.New(framework.C.Dynamic).Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 2}}, metav1.CreateOptions{})
	require.NoError(t, err)
	createNode(t, kube, "cap-ready-1", pool)
	createNode(t, kube, "cap-ready-2", pool)
	// No kwok annotation: nobody plays its kubelet, so it never reports Ready (a dead
	// machine).
	_, err = kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cap-dead",
		Labels: map[string]string{policy.LabelPool: pool, "type": "kwok"}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// Once the webhook's cache holds the pool and its members, a Ready member is refused.
	var last error
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = kube.CoreV1().Nodes().Delete(ctx, "cap-ready-1", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil && slices.Contains(policy.RulesOfStatus(last), "N3"), nil
	}), "the floor never applied: %v", last)

	dead, err := kube.CoreV1().Nodes().Get(ctx, "cap-dead", metav1.GetOptions{})
	require.NoError(t, err)
	require.False(t, policy.IsNodeReady(dead), "the fixture's dead node is NotReady")
	require.NoError(t, kube.CoreV1().Nodes().Delete(ctx, "cap-dead", metav1.DeleteOptions{}), "a NotReady member's Node is deleted at the floor")

	err = kube.CoreV1().Nodes().Delete(ctx, "cap-ready-1", metav1.DeleteOptions{})
	require.Error(t, err)
	assert.Equal(t, []string{"N3"}, policy.RulesOfStatus(err))
	assert.Contains(t, err.Error(), `[N3] node "cap-ready-1" cannot leave pool "floor-ready": the pool would have 1 Ready node(s), below its minNodes 2`)
	_, err = kube.CoreV1().Nodes().Get(ctx, "cap-ready-1", metav1.GetOptions{})
	assert.NoError(t, err, "the Ready member stays")
}

// TestLabelPoolDissolves: a pool of labels only (no Pool object) has no floor: every
// idle node leaves and the pool is gone, with a warning to the client and an Event;
// a node that runs a workload pod is still refused.
func TestLabelPoolDissolves(t *testing.T) {
	kube := framework.C.Kube
	const pool = "labels-dissolve"
	t.Cleanup(func() {
		_ = kube.CoreV1().Pods("default").Delete(context.Background(), "busy", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		cleanNodes(kube, "lp-")
	})
	startOne(t, kube)
	for _, n := range []string{"lp-1", "lp-2", "lp-busy"} {
		createNode(t, kube, n, pool)
	}
	_, err := kube.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "busy"},
		Spec: corev1.PodSpec{NodeName: "lp-busy", Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	var last error
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = unlabel(ctx, kube, "lp-busy")
		return last != nil && slices.Contains(policy.RulesOfStatus(last), "N3"), nil
	}), "the busy node was never refused: %v", last)
	assert.Contains(t, last.Error(), `[N3] node "lp-busy" cannot leave pool "labels-dissolve": it runs 1 workload pod(s) (default/busy)`)

	warned := &framework.Warnings{}
	wkube := framework.WarningClient(t, warned)
	require.NoError(t, unlabel(ctx, wkube, "lp-1"))
	require.NoError(t, wkube.CoreV1().Nodes().Delete(ctx, "lp-2", metav1.DeleteOptions{}))
	assert.Empty(t, warned.Take(), "the pool still has a node")

	require.NoError(t, kube.CoreV1().Pods("default").Delete(ctx, "busy", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = unlabel(ctx, wkube, "lp-busy")
		return last == nil, nil
	}), "the last node, idle now, never left: %v", last)
	assert.Contains(t, warned.Take(), `[N3] node "lp-busy" was the last node of pool "labels-dissolve", a pool of labels only (no Pool object): the pool is gone; label a node runwhere.ai/pool=labels-dissolve to make it again, or create a Pool object to give it a floor (minNodes)`)
	members, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: policy.LabelPool + "=" + pool})
	require.NoError(t, err)
	assert.Empty(t, members.Items, "the pool is gone")

	var seen []string
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Pool,involvedObject.name=" + pool})
		if err != nil {
			return false, err
		}
		seen = nil
		for _, e := range evs.Items {
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason == "PoolDissolved" && strings.Contains(e.Message, "node lp-busy was its last node") {
				return true, nil
			}
		}
		return false, nil
	}), "no PoolDissolved event; events of the pool: %v", seen)
}

func unlabel(ctx context.Context, kube kubernetes.Interface, node string) error {
	_, err := kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+policy.LabelPool+`":null}}}`), metav1.PatchOptions{})
	return err
}

// cleanNodes deletes the nodes whose name starts with prefix (the webhook is gone by
// then: cleanups run newest first).
func cleanNodes(kube kubernetes.Interface, prefix string) {
	list, err := kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, n := range list.Items {
		if strings.HasPrefix(n.Name, prefix) {
			if err := kube.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				continue
			}
		}
	}
}
