package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const exclNode, exclPool, exclNS = "excl-node-1", "excl-dev", "excl-team"

// TestExclusivePool (P6): a pod that is not an exclusive pool's never runs on its node,
// whichever way it comes (spec.nodeName, tolerate-all with matchFields, a binding by a
// user other than the scheduler), and the denial names P6; the pool's own pods and the
// pods of a DaemonSet in a namespace trusted with node agents do run there, a tenant's
// DaemonSet's do not.
func TestExclusivePool(t *testing.T) {
	kube := framework.C.Kube
	// Registered first, so it runs last, once the webhook is unregistered: the other
	// tests of this cluster see none of this test's objects.
	t.Cleanup(func() { removeExclusiveFixture(kube) })
	crt := newCerts(t)
	proc, _ := startWebhook(t, crt)
	registerWebhooks(t, kube, proc.Addr, crt.CAPEM)
	require.NoError(t, localwebhook.WaitEffective(ctx, kube, ns, 30*time.Second))

	_, err := poolclient.New(framework.C.Dynamic).Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: exclPool},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeDevelopment, Exclusive: true, Namespaces: []string{exclNS}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: exclNS}}, metav1.CreateOptions{})
	require.NoError(t, err)
	createExclusiveNode(t, kube)

	nodeNamed := newPod("squatter", nil, corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")})
	nodeNamed.Spec.NodeName = exclNode
	// The webhook's cache sees the pool and its node a moment after they are made.
	var last error
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		_, last = kube.CoreV1().Pods(ns).Create(ctx, nodeNamed, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil && strings.Contains(last.Error(), "[P6]"), nil
	}), "P6 never applied: %v", last)

	t.Run("spec.nodeName denied", func(t *testing.T) {
		_, err := createPod(kube, ns, nodeNamed)
		require.Error(t, err)
		assert.Equal(t, denied("pod-placement.runwhere.ai", `[P6] pod ai-team/squatter may not run on node "excl-node-1": it is bound to the node, but the node belongs to exclusive pool "excl-dev", which runs only its own pods and node agents (DaemonSet pods that ask for no device, from a namespace the operator trusts with node agents), and the pod asks for no pool; label the pod runwhere.ai/pool=excl-dev from a namespace the pool admits, or keep it off the pool's nodes`), err.Error())
		assertNoPod(t, kube, ns, "squatter")
	})
	t.Run("tolerate-all with matchFields denied", func(t *testing.T) {
		p := newPod("tolerant", nil, nil)
		p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{exclNode}}}}}}}}
		_, err := createPod(kube, ns, p)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `denied the request: [P4] the pod's required node affinity pins it to pool "excl-dev" (only the pool's members satisfy it)`,
			"only the pool's node satisfies it: judged as the pool's pod first (38.2)")
		// Or an ordinary node: no one pool's pod, so P6 judges it.
		terms := &p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		*terms = append(*terms, corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"cpu-node-1"}}}})
		_, err = createPod(kube, ns, p)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `denied the request: [P6] pod ai-team/tolerant may not run on node "excl-node-1": it tolerates the pool's taint (operator Exists on every key) and its node affinity allows the node`)
		assertNoPod(t, kube, ns, "tolerant")
	})
	t.Run("a pod of the pool from a namespace it does not admit is denied on its node (P4 and P6)", func(t *testing.T) {
		p := newPod("wrong-ns", map[string]string{policy.LabelPool: exclPool, policy.LabelWorkloadType: "development"}, nil)
		p.Spec.NodeName = exclNode
		_, err := createPod(kube, ns, p)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `[P4] namespace "ai-team" may not use pool "excl-dev"`)
	})
	t.Run("binding by a user other than the scheduler denied", func(t *testing.T) {
		p := newPod("bound-by-hand", nil, nil)
		p.Spec.SchedulerName = "no-such-scheduler" // nobody else binds it
		_, err := createPod(kube, ns, p)
		require.NoError(t, err)
		err = kube.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "bound-by-hand"},
			Target: corev1.ObjectReference{Kind: "Node", Name: exclNode}}, metav1.CreateOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), `admission webhook "pod-placement-bindings.runwhere.ai" denied the request: [P6] pod ai-team/bound-by-hand may not run on node "excl-node-1": it is bound to the node`)
		got, err := kube.CoreV1().Pods(ns).Get(ctx, "bound-by-hand", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Empty(t, got.Spec.NodeName, "the pod stays unbound")
		require.NoError(t, kube.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "bound-by-hand"},
			Target: corev1.ObjectReference{Kind: "Node", Name: "cpu-node-1"}}, metav1.CreateOptions{}), "a binding to an ordinary node is allowed")
	})
	t.Run("the pool's own pod runs on its node", func(t *testing.T) {
		_, err := createPod(kube, exclNS, newPod("notebook", map[string]string{policy.LabelPool: exclPool, policy.LabelWorkloadType: "development"}, nil))
		require.NoError(t, err)
		waitRunningOn(t, kube, exclNS, func(p *corev1.Pod) bool { return p.Name == "notebook" })
	})
	t.Run("a pod pinned by nodeSelector alone is labelled with the pool and runs on its node", func(t *testing.T) {
		// What a Kueue Job admitted to the pool's queue looks like: no pool label, the
		// flavor's nodeSelector and toleration.
		p := newPod("pinned", map[string]string{policy.LabelWorkloadType: "development"}, nil)
		p.Spec.NodeSelector = map[string]string{policy.LabelPool: exclPool}
		p.Spec.Tolerations = []corev1.Toleration{policy.ExclusivePoolToleration(exclPool)}
		got, err := createPod(kube, exclNS, p)
		require.NoError(t, err)
		assert.Equal(t, exclPool, got.Labels[policy.LabelPool], "labelled with the pool it is pinned to")
		waitRunningOn(t, kube, exclNS, func(p *corev1.Pod) bool { return p.Name == "pinned" })

		p = newPod("pinned-elsewhere", map[string]string{policy.LabelWorkloadType: "development"}, nil)
		p.Spec.NodeSelector = map[string]string{policy.LabelPool: exclPool}
		p.Spec.Tolerations = []corev1.Toleration{policy.ExclusivePoolToleration(exclPool)}
		_, err = createPod(kube, ns, p)
		require.Error(t, err)
		assert.Equal(t, denied("pods-node-selector.runwhere.ai", `[P4] the pod's nodeSelector runwhere.ai/pool=excl-dev pins it to pool "excl-dev" (for a Kueue Job: the pool's ResourceFlavor sets it on the pods it admits), so it is judged as the pool's pod: namespace "ai-team" may not use pool "excl-dev": the pool admits only the namespaces its spec.namespaces lists or its spec.namespaceSelector selects, and "ai-team" is not among them; use a pool that admits it, or have "ai-team" added to spec.namespaces of pool "excl-dev"`), err.Error())
		assertNoPod(t, kube, ns, "pinned-elsewhere")
	})
	t.Run("a DaemonSet pod from a trusted namespace runs on the node, a tenant's does not", func(t *testing.T) {
		agentNS := framework.ShippedAgentNamespaces()[0] // gpu-operator
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNS}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
		for _, in := range []string{agentNS, "kube-system", ns} {
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "node-agent"}, Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "node-agent"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "node-agent"}}, Spec: corev1.PodSpec{
					NodeSelector: map[string]string{policy.LabelPool: exclPool},
					Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers:   []corev1.Container{{Name: "agent", Image: "busybox"}}}}}}
			_, err := kube.AppsV1().DaemonSets(in).Create(ctx, ds, metav1.CreateOptions{})
			require.NoError(t, err)
			t.Cleanup(func() {
				_ = kube.AppsV1().DaemonSets(in).Delete(context.Background(), "node-agent", metav1.DeleteOptions{})
			})
		}
		waitRunningOn(t, kube, agentNS, func(p *corev1.Pod) bool { return p.Labels["app"] == "node-agent" })
		waitRunningOn(t, kube, "kube-system", func(p *corev1.Pod) bool { return p.Labels["app"] == "node-agent" })
		// The tenant's: the DaemonSet controller's create is refused by P6 (its only
		// node is exclusive), so no pod of it ever exists.
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			ev, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate,involvedObject.name=node-agent"})
			return err == nil && len(ev.Items) > 0 && strings.Contains(ev.Items[0].Message, "[P6]"), err
		}), "the tenant's DaemonSet pod was refused by P6")
		list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=node-agent"})
		require.NoError(t, err)
		assert.Empty(t, list.Items, "no pod of the tenant's DaemonSet")
	})
	t.Run("ordinary pods never reach the placement webhook", func(t *testing.T) {
		// Not scheduled, so only its create is counted: the test cluster's scheduler
		// authenticates as the admin, not as system:kube-scheduler, so its bindings
		// are sent here (in a real cluster they are not). Other pods' requests may
		// reach the webhook meanwhile (a binding of a pod left pending, a DaemonSet
		// controller's retry): a pod sent there would raise the count every time, so one
		// create that leaves it unchanged shows this kind of pod is not sent.
		var deltas []int
		for i := range 5 {
			before := proc.decisions(t, "placement")
			p := newPod(fmt.Sprintf("ordinary-%d", i), nil, nil)
			p.Spec.SchedulerName = "no-such-scheduler"
			_, err := createPod(kube, ns, p)
			require.NoError(t, err)
			if deltas = append(deltas, proc.decisions(t, "placement")-before); deltas[i] == 0 {
				break
			}
		}
		assert.Contains(t, deltas, 0, "placement decisions during each ordinary pod's create")
	})
}

func createExclusiveNode(t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	res := corev1.ResourceList{"cpu": resource.MustParse("64"), "memory": resource.MustParse("512Gi"), "pods": resource.MustParse("110"), "nvidia.com/gpu": resource.MustParse("8")}
	_, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: exclNode, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{"kubernetes.io/hostname": exclNode, "kubernetes.io/os": "linux", "type": "kwok", policy.LabelPool: exclPool}},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{policy.ExclusiveTaint(exclPool)}},
		Status: corev1.NodeStatus{Allocatable: res, Capacity: res},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func assertNoPod(t *testing.T, kube kubernetes.Interface, namespace, name string) {
	t.Helper()
	_, err := kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "pod %s was not created: %v", name, err)
}

// waitRunningOn waits until a pod of namespace that match selects runs on the exclusive node.
func waitRunningOn(t *testing.T, kube kubernetes.Interface, namespace string, match func(*corev1.Pod) bool) {
	t.Helper()
	var seen []string
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		seen = nil
		for i := range list.Items {
			p := &list.Items[i]
			if match(p) {
				seen = append(seen, p.Name+"@"+p.Spec.NodeName+"/"+string(p.Status.Phase))
				if p.Spec.NodeName == exclNode && p.Status.Phase == corev1.PodRunning {
					return true, nil
				}
			}
		}
		return false, nil
	}), "no matching pod ran on %s: %v", exclNode, seen)
}

func removeExclusiveFixture(kube kubernetes.Interface) {
	bg := context.Background()
	now := metav1.DeleteOptions{GracePeriodSeconds: new(int64)}
	_ = kube.AppsV1().DaemonSets(ns).Delete(bg, "node-agent", metav1.DeleteOptions{})
	for _, name := range []string{"bound-by-hand", "ordinary-0", "ordinary-1", "ordinary-2", "ordinary-3", "ordinary-4"} {
		_ = kube.CoreV1().Pods(ns).Delete(bg, name, now)
	}
	_ = kube.CoreV1().Namespaces().Delete(bg, exclNS, metav1.DeleteOptions{})
	_ = poolclient.New(framework.C.Dynamic).Delete(bg, exclPool, metav1.DeleteOptions{})
	_ = kube.CoreV1().Nodes().Delete(bg, exclNode, metav1.DeleteOptions{})
}
