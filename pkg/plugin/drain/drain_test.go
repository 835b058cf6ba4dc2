package drain

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/nodejob"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

func node(name string, unschedulable bool) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Unschedulable: unschedulable}}
}

// managedPod is a pod a ReplicaSet owns: drain removes it without --force.
func managedPod(name, nodeName string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ai-team", Name: name, OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: nodeName}, Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

func pods(t *testing.T, f *kittest.Factory) []string {
	t.Helper()
	list, err := f.Kube.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, p := range list.Items {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

// cluster is a fake cluster whose API server supports eviction (kittest.WithEviction).
func cluster(t *testing.T, evict func(name string) error, objs ...runtime.Object) *kittest.Factory {
	return kittest.NewFactory(t, objs...).WithEviction(evict)
}

func TestDrain(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cordoned      bool // before
		args          []string
		out, errOut   string
		unschedulable bool
		pods          []string
		events        []string
	}{
		{"cordons, evicts, records events", false, []string{"n1"},
			"node/n1 cordoned\nevicting pod ai-team/p1\npod/p1 evicted\nnode/n1 drained\n", "", true, nil,
			[]string{"Draining: draining node n1 (kubectl litepool drain)", "Drained: node n1 drained"}},
		{"a cordoned node is not cordoned again", true, []string{"n1"},
			"evicting pod ai-team/p1\npod/p1 evicted\nnode/n1 drained\n", "", true, nil,
			[]string{"Draining: draining node n1 (kubectl litepool drain)", "Drained: node n1 drained"}},
		{"client dry run lists and changes nothing", false, []string{"n1", "--dry-run=client"},
			"node/n1 cordoned (dry run)\nevicting pod ai-team/p1 (dry run)\nnode/n1 drained (dry run)\n", "", false, []string{"ai-team/p1"}, nil},
		{"server dry run changes nothing", false, []string{"n1", "--dry-run=server"},
			"node/n1 cordoned (server dry run)\nevicting pod ai-team/p1 (server dry run)\nnode/n1 drained (server dry run)\n", "", false, []string{"ai-team/p1"}, nil},
		{"-o name: the node once on stdout, progress on stderr", false, []string{"n1", "-o", "name"},
			"node/n1\n", "evicting pod ai-team/p1\npod/p1 evicted\n", true, nil,
			[]string{"Draining: draining node n1 (kubectl litepool drain)", "Drained: node n1 drained"}},
		{"-o jsonpath under client dry run: the node as it would be", false, []string{"n1", "--dry-run=client", "-o", "jsonpath={.spec.unschedulable}"},
			"true", "evicting pod ai-team/p1 (dry run)\n", false, []string{"ai-team/p1"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := cluster(t, nil, node("n1", tc.cordoned), managedPod("p1", "n1"))
			r := kittest.Run(f, NewCmdDrain, "", tc.args...)
			require.NoError(t, r.Err)
			assert.Equal(t, tc.out, r.Out)
			assert.Equal(t, tc.errOut, r.ErrOut)
			n := f.Node(t, "n1")
			assert.Equal(t, tc.unschedulable, n.Spec.Unschedulable)
			assert.NotContains(t, n.Annotations, policy.AnnotationDraining)
			assert.Equal(t, tc.pods, pods(t, f))
			assert.Equal(t, tc.events, f.Events(t))
		})
	}
}

// A drain that cannot start is refused before the node is cordoned.
func TestDrainRefusedBeforeCordoning(t *testing.T) {
	unmanaged := managedPod("solo", "n1")
	unmanaged.OwnerReferences = nil
	f := cluster(t, nil, node("n1", false), unmanaged)
	r := kittest.Run(f, NewCmdDrain, "", "n1")
	require.EqualError(t, r.Err, `node "n1" cannot be drained: cannot delete Pods that declare no controller (use --force to override): ai-team/solo`)
	assert.Empty(t, r.Out)
	assert.False(t, f.Node(t, "n1").Spec.Unschedulable)
	assert.Equal(t, []string{"ai-team/solo"}, pods(t, f))
	assert.Empty(t, f.Events(t))
}

// A cordon the API server refuses stops the drain: nothing is evicted, nothing claimed.
func TestDrainCordonWriteFails(t *testing.T) {
	f := cluster(t, nil, node("n1", false), managedPod("p1", "n1"))
	f.Kube.PrependReactor("update", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("connection lost"))
	})
	r := kittest.Run(f, NewCmdDrain, "", "n1")
	require.EqualError(t, r.Err, "Internal error occurred: connection lost")
	assert.Empty(t, r.Out)
	assert.False(t, f.Node(t, "n1").Spec.Unschedulable)
	assert.Equal(t, []string{"ai-team/p1"}, pods(t, f))
	assert.Empty(t, f.Events(t))
}

// An eviction that fails (not an interruption) stops the drain; the node stays
// cordoned, as with kubectl drain, and a warning event says why.
func TestDrainEvictionFails(t *testing.T) {
	f := cluster(t, func(string) error { return apierrors.NewInternalError(errors.New("etcd down")) },
		node("n1", false), managedPod("p1", "n1"))
	r := kittest.Run(f, NewCmdDrain, "", "n1")
	require.EqualError(t, r.Err, `drain of node "n1" failed: error when evicting pods/"p1" -n "ai-team": Internal error occurred: etcd down`,
		"the API server's own answer, not a PodDisruptionBudget's (it used to read \"not evicted in time\")")
	assert.Equal(t, "node/n1 cordoned\nevicting pod ai-team/p1\n", r.Out)
	n := f.Node(t, "n1")
	assert.True(t, n.Spec.Unschedulable)
	assert.NotContains(t, n.Annotations, policy.AnnotationDraining)
	assert.Equal(t, []string{"ai-team/p1"}, pods(t, f))
	assert.Equal(t, []string{"Draining: draining node n1 (kubectl litepool drain)", "DrainFailed: " + r.Err.Error()}, f.Events(t))
}

// An interrupted drain puts its node back: uncordoned, since this drain cordoned it.
func TestDrainInterruptedPutsBack(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := cluster(t, func(string) error { cancel(); return context.Canceled }, node("n1", false), managedPod("p1", "n1"))
	r := kittest.RunContext(ctx, f, NewCmdDrain, "", "n1")
	require.EqualError(t, r.Err, `drain of node "n1" interrupted (SIGINT/SIGTERM); the node was put back (uncordoned); evicted pods are not brought back, their controllers recreate them`)
	assert.Equal(t, "node/n1 cordoned\nevicting pod ai-team/p1\nnode/n1 uncordoned\n", r.Out)
	n := f.Node(t, "n1")
	assert.False(t, n.Spec.Unschedulable)
	assert.NotContains(t, n.Annotations, policy.AnnotationDraining)
	assert.Equal(t, []string{"ai-team/p1"}, pods(t, f))
	assert.Equal(t, []string{
		"Draining: draining node n1 (kubectl litepool drain)",
		"DrainStopped: drain of node n1 interrupted; node uncordoned",
	}, f.Events(t))
}

// The put-back leaves a node cordoned when it was cordoned before the drain, or when a
// litepool operation holds it.
func TestDrainInterruptedKeepsAnEarlierCordon(t *testing.T) {
	held := node("n2", false)
	held.Annotations = map[string]string{policy.CordonHolder("upgrade").Annotation(): "false"}
	for _, tc := range []struct {
		node *corev1.Node
		want string
		out  string
	}{
		{node("n1", true), `drain of node "n1" interrupted (SIGINT/SIGTERM); the node stays cordoned, as it was before`,
			"evicting pod ai-team/p1\n"},
		{held, `drain of node "n2" interrupted (SIGINT/SIGTERM); the node stays cordoned: litepool's upgrade holds it`,
			"node/n2 cordoned\nevicting pod ai-team/p1\n"},
	} {
		t.Run(tc.node.Name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := cluster(t, func(string) error { cancel(); return context.Canceled }, tc.node, managedPod("p1", tc.node.Name))
			r := kittest.RunContext(ctx, f, NewCmdDrain, "", tc.node.Name)
			require.EqualError(t, r.Err, tc.want)
			assert.Equal(t, tc.out, r.Out)
			assert.True(t, f.Node(t, tc.node.Name).Spec.Unschedulable)
		})
	}
}

func TestDrainStopsAtAMissingNode(t *testing.T) {
	f := cluster(t, nil, node("n1", false))
	r := kittest.Run(f, NewCmdDrain, "", "no-such-node", "n1")
	require.True(t, apierrors.IsNotFound(r.Err), "%v", r.Err)
	assert.Empty(t, r.Out)
	assert.False(t, f.Node(t, "n1").Spec.Unschedulable)
}

// nodeWork is litepool's node work in namespace ns: a pod a litepool Job controls.
func nodeWork(ns, name, nodeName string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{nodejob.LabelManagedBy: nodejob.ManagedBy},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: "job-uid", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: nodeName}, Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// litepool's node work (an installer) is never drained, in the namespace litepool was
// installed into: --controller-namespace names it (default litepool-system). Told
// nothing, the drain of an install in gpu-ops took that install's installer for a
// workload and evicted it, failing its node's upgrade.
func TestDrainLeavesNodeWorkOfTheControllerNamespace(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		left []string
	}{
		{"the default namespace", []string{"n1"}, []string{"litepool-system/installer"}},
		{"another namespace", []string{"n1", "--controller-namespace=gpu-ops"}, []string{"gpu-ops/installer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := cluster(t, nil, node("n1", false), managedPod("p1", "n1"),
				nodeWork("litepool-system", "installer", "n1"), nodeWork("gpu-ops", "installer", "n1"))
			r := kittest.Run(f, NewCmdDrain, "", tc.args...)
			require.NoError(t, r.Err)
			assert.Equal(t, tc.left, pods(t, f), "only the node work of the controller's namespace stays")
		})
	}
}
