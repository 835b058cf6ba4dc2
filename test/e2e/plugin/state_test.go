package plugin

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	fw "github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	waitInterval = 200 * time.Millisecond
	waitTimeout  = 60 * time.Second
)

// nodeState is what litepool commands may change on a node.
type nodeState struct {
	Labels        map[string]string
	Annotations   map[string]string // runwhere.ai/ ones only
	Taints        []corev1.Taint
	Unschedulable bool
}

// poolState is what litepool commands may change on a Pool.
type poolState struct {
	Labels, Annotations map[string]string
	Spec                v1alpha1.PoolSpec
}

// clusterState is everything the commands under test may touch.
type clusterState struct {
	Nodes map[string]nodeState
	Pools map[string]poolState
	Pods  map[string]string // namespace/name -> node, for pods outside kube-system
	pods  map[string]corev1.Pod
}

func ctx() context.Context { return context.Background() }

func pools() *poolclient.Client { return poolclient.New(fw.C.Dynamic) }

// snapshot reads the cluster state.
func snapshot(t *testing.T) clusterState {
	t.Helper()
	s := clusterState{Nodes: map[string]nodeState{}, Pools: map[string]poolState{}, Pods: map[string]string{}, pods: map[string]corev1.Pod{}}
	nodes, err := fw.C.Kube.CoreV1().Nodes().List(ctx(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, n := range nodes.Items {
		s.Nodes[n.Name] = stateOf(&n)
	}
	list, err := pools().List(ctx())
	require.NoError(t, err)
	for _, p := range list {
		s.Pools[p.Name] = poolState{Labels: p.Labels, Annotations: p.Annotations, Spec: p.Spec}
	}
	pods, err := fw.C.Kube.CoreV1().Pods("").List(ctx(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range pods.Items {
		if p.Namespace == "kube-system" || p.DeletionTimestamp != nil {
			continue
		}
		s.Pods[p.Namespace+"/"+p.Name] = p.Spec.NodeName
		s.pods[p.Namespace+"/"+p.Name] = p
	}
	return s
}

func stateOf(n *corev1.Node) nodeState {
	ann := map[string]string{}
	for k, v := range n.Annotations {
		if strings.HasPrefix(k, "runwhere.ai/") {
			ann[k] = v
		}
	}
	// Taints under node.kubernetes.io/ are the node controllers' (they mirror a cordon
	// or readiness, a moment later): not litepool's to change.
	var taints []corev1.Taint
	for _, t := range n.Spec.Taints {
		if !strings.HasPrefix(t.Key, "node.kubernetes.io/") {
			t.TimeAdded = nil
			taints = append(taints, t)
		}
	}
	sort.Slice(taints, func(i, j int) bool {
		return taints[i].Key+string(taints[i].Effect) < taints[j].Key+string(taints[j].Effect)
	})
	if len(taints) == 0 {
		taints = nil
	}
	return nodeState{Labels: n.Labels, Annotations: ann, Taints: taints, Unschedulable: n.Spec.Unschedulable}
}

// assertUnchanged checks that the cluster is as before.
func assertUnchanged(t *testing.T, before clusterState) {
	t.Helper()
	after := snapshot(t)
	assert.Equal(t, before.Nodes, after.Nodes, "nodes changed")
	assert.Equal(t, before.Pools, after.Pools, "pools changed")
	assert.Equal(t, before.Pods, after.Pods, "pods changed")
}

// restoreAfter puts the cluster back as it is now when the test ends.
func restoreAfter(t *testing.T) clusterState {
	t.Helper()
	s := snapshot(t)
	t.Cleanup(func() { restore(t, s) })
	return s
}

// restore puts nodes, pools and pods back: node labels, litepool annotations, taints
// and cordons; Pool objects (recreated, updated or deleted); fixture pods that were
// deleted are recreated and pods the test left are deleted.
func restore(t *testing.T, s clusterState) {
	t.Helper()
	kube := fw.C.Kube
	nodes, err := kube.CoreV1().Nodes().List(ctx(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, n := range nodes.Items {
		want, ok := s.Nodes[n.Name]
		if !ok {
			// The webhook (N3) refuses to delete a pool's node without the override.
			forceNode(t, n.Name, true)
			require.NoError(t, kube.CoreV1().Nodes().Delete(ctx(), n.Name, metav1.DeleteOptions{}))
			continue
		}
		if equality.Semantic.DeepEqual(stateOf(&n), want) {
			continue // untouched: two writes per node per test were most of this package's API load
		}
		setNode(t, n.Name, want, true)
		if _, kept := want.Annotations[policy.AnnotationForce]; !kept {
			setNode(t, n.Name, want, false)
		}
	}
	current, err := pools().List(ctx())
	require.NoError(t, err)
	have := map[string]v1alpha1.Pool{}
	for _, p := range current {
		have[p.Name] = p
		if _, ok := s.Pools[p.Name]; !ok {
			confirmed := p.DeepCopy()
			if confirmed.Annotations == nil {
				confirmed.Annotations = map[string]string{}
			}
			confirmed.Annotations[policy.AnnotationConfirmDelete] = p.Name // R2 at the webhook
			_, err := pools().Update(ctx(), confirmed, metav1.UpdateOptions{})
			require.NoError(t, err)
			require.NoError(t, pools().Delete(ctx(), p.Name, metav1.DeleteOptions{}))
		}
	}
	for name, want := range s.Pools {
		p, ok := have[name]
		if !ok {
			_, err := pools().Create(ctx(), &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: want.Labels, Annotations: want.Annotations}, Spec: want.Spec}, metav1.CreateOptions{})
			require.NoError(t, err)
			continue
		}
		if equality.Semantic.DeepEqual(poolState{Labels: p.Labels, Annotations: p.Annotations, Spec: p.Spec}, want) {
			continue
		}
		p.Labels, p.Annotations, p.Spec = want.Labels, want.Annotations, want.Spec
		_, err := pools().Update(ctx(), &p, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	restorePods(t, s)
	assertUnchanged(t, s)
}

// restoreForce is the audited override restore writes while it puts nodes back: the
// webhook's N3 would refuse a node leaving a pool below its floor or with pods on it.
const restoreForce = "e2e-restore: putting the fixture back after a test"

// setNode writes want's labels, litepool annotations, taints and cordon onto the node;
// with force, it also carries runwhere.ai/force.
func setNode(t *testing.T, name string, want nodeState, force bool) {
	t.Helper()
	kube := fw.C.Kube
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := kube.CoreV1().Nodes().Get(ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Labels = want.Labels
		for k := range cur.Annotations {
			if strings.HasPrefix(k, "runwhere.ai/") {
				delete(cur.Annotations, k)
			}
		}
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		for k, v := range want.Annotations {
			cur.Annotations[k] = v
		}
		if force {
			cur.Annotations[policy.AnnotationForce] = restoreForce
		}
		var taints []corev1.Taint
		for _, t := range cur.Spec.Taints {
			if strings.HasPrefix(t.Key, "node.kubernetes.io/") {
				taints = append(taints, t)
			}
		}
		cur.Spec.Taints, cur.Spec.Unschedulable = append(taints, want.Taints...), want.Unschedulable
		_, err = kube.CoreV1().Nodes().Update(ctx(), cur, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
}

// changeNode applies change to a node and writes it, reading again on a conflict (the
// node's controllers write to it too).
func changeNode(t *testing.T, name string, change func(*corev1.Node)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := fw.C.Kube.CoreV1().Nodes().Get(ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		change(n)
		_, err = fw.C.Kube.CoreV1().Nodes().Update(ctx(), n, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
}

// forceNode sets (or removes) runwhere.ai/force on a node.
func forceNode(t *testing.T, name string, on bool) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := fw.C.Kube.CoreV1().Nodes().Get(ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		if on {
			cur.Annotations[policy.AnnotationForce] = restoreForce
		} else {
			delete(cur.Annotations, policy.AnnotationForce)
		}
		_, err = fw.C.Kube.CoreV1().Nodes().Update(ctx(), cur, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
}

func restorePods(t *testing.T, s clusterState) {
	kube := fw.C.Kube
	pods, err := kube.CoreV1().Pods("").List(ctx(), metav1.ListOptions{})
	require.NoError(t, err)
	zero := int64(0)
	for _, p := range pods.Items {
		key := p.Namespace + "/" + p.Name
		if p.Namespace == "kube-system" {
			continue
		}
		if _, ok := s.Pods[key]; !ok || p.Spec.NodeName != s.Pods[key] {
			err := kube.CoreV1().Pods(p.Namespace).Delete(ctx(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			if !apierrors.IsNotFound(err) {
				require.NoError(t, err)
			}
		}
	}
	for key, want := range s.pods {
		err := wait.PollUntilContextTimeout(ctx(), waitInterval, waitTimeout, true, func(c context.Context) (bool, error) {
			p, err := kube.CoreV1().Pods(want.Namespace).Get(c, want.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				fresh := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: want.Name, Namespace: want.Namespace, Labels: want.Labels,
					Annotations: want.Annotations, OwnerReferences: want.OwnerReferences}, Spec: want.Spec}
				_, err = kube.CoreV1().Pods(want.Namespace).Create(c, fresh, metav1.CreateOptions{})
				return false, client(err)
			}
			if err != nil {
				return false, err
			}
			return p.DeletionTimestamp == nil && p.Spec.NodeName == want.Spec.NodeName, nil
		})
		require.NoError(t, err, "restoring pod %s", key)
	}
}

// client ignores the errors of a create racing a deletion still in progress.
func client(err error) error {
	if err == nil || apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// node reads a node.
func node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := fw.C.Kube.CoreV1().Nodes().Get(ctx(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return n
}

// litepoolEvents returns "Reason: message" of litepool's events on a node, oldest first.
func litepoolEvents(t *testing.T, nodeName string) []string {
	t.Helper()
	list, err := fw.C.Kube.CoreV1().Events("").List(ctx(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + nodeName + ",source=litepool"})
	require.NoError(t, err)
	sort.SliceStable(list.Items, func(i, j int) bool { return list.Items[i].EventTime.Before(&list.Items[j].EventTime) })
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return out
}

// clearEvents deletes litepool's events so a test sees only its own.
func clearEvents(t *testing.T) {
	t.Helper()
	err := fw.C.Kube.CoreV1().Events("default").DeleteCollection(ctx(), metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "source=litepool"})
	require.NoError(t, err)
}

// run is `kubectl litepool ARGS` with stdin.
func run(t *testing.T, stdin string, args ...string) fw.Result {
	t.Helper()
	return fw.C.Kubectl(t, stdin, append([]string{"litepool"}, args...)...)
}

// must runs `kubectl litepool ARGS`, fails on a non-zero exit and returns stdout.
func must(t *testing.T, args ...string) string {
	t.Helper()
	return fw.C.MustLitepool(t, args...)
}

// fails runs `kubectl litepool ARGS`, expects exit 1 with nothing on stdout, and
// returns stderr.
func fails(t *testing.T, args ...string) string {
	t.Helper()
	r := fw.C.Litepool(t, args...)
	require.Equal(t, 1, r.ExitCode, "kubectl litepool %v should fail\nstdout:\n%s\nstderr:\n%s", args, r.Stdout, r.Stderr)
	return r.Stderr
}

var metaUpdate = metav1.UpdateOptions{}

func framework() *fw.Cluster { return fw.C }

func resourceQ(s string) resource.Quantity { return resource.MustParse(s) }

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
