package webhook

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/controller"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	sdPool, sdOpenPool, sdNS = "sd-excl", "sd-open", "sd-team"
	sdLabelled, sdMember     = "sd-node-1", "sd-node-3" // sd-excl: joined by plain kubectl label, and created in it
	sdOpenNode               = "sd-node-2"              // sd-open, made exclusive by kubectl patch
)

// startWithControllers runs the webhook with its controllers (the exclusive taints and
// the binding targets among them) and registers deploy/webhook's configurations.
func startWithControllers(t *testing.T, kube kubernetes.Interface) webhookProc {
	t.Helper()
	crt := newCerts(t)
	proc, logs := launchWebhook(t, "--cert-mode=files", "--cert-dir="+crt.Dir, "--controllers")
	waitReady(t, proc, logs)
	registerWebhooks(t, kube, proc.Addr, crt.CAPEM)
	require.NoError(t, localwebhook.WaitEffective(ctx, kube, ns, 30*time.Second))
	return proc
}

// TestExclusivePoolSideDoors: however a node joins an exclusive pool (a plain `kubectl
// label`, or its pool made exclusive with `kubectl patch`), the controller taints it
// within seconds and foreign pods stay off; the taint goes when it leaves; a foreign pod
// pinned to the node cannot gain the toleration by an update; and a binding onto the
// node by anyone but the scheduler is refused, while bindings onto other nodes never
// reach the webhook.
func TestExclusivePoolSideDoors(t *testing.T) {
	kube := framework.C.Kube
	t.Cleanup(func() { removeSideDoorFixture(kube) })
	proc := startWithControllers(t, kube)
	pools := poolclient.New(framework.C.Dynamic)
	_, err := pools.Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: sdPool},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeDevelopment, Exclusive: true, Namespaces: []string{sdNS}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = pools.Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: sdOpenPool},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeDevelopment, Namespaces: []string{sdNS}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sdNS}}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.CreateReadyNode(t, kube, sdLabelled, "")
	framework.CreateReadyNode(t, kube, sdMember, sdPool)
	framework.CreateReadyNode(t, kube, sdOpenNode, sdOpenPool)

	t.Run("a node joined with plain kubectl label is tainted", func(t *testing.T) {
		assert.Empty(t, nodeTaints(t, kube, sdLabelled))
		start := time.Now()
		r := framework.C.Kubectl(t, "", "label", "node", sdLabelled, policy.LabelPool+"="+sdPool)
		require.Equal(t, 0, r.ExitCode, r.Stderr)
		waitTaint(t, kube, sdLabelled, true)
		t.Logf("%s tainted %v after kubectl label", sdLabelled, time.Since(start).Round(10*time.Millisecond))
		waitTaint(t, kube, sdMember, true)
	})
	t.Run("the members of a pool made exclusive with kubectl patch are tainted", func(t *testing.T) {
		start := time.Now()
		r := framework.C.Kubectl(t, "", "patch", "pool", sdOpenPool, "--type=merge", "-p", `{"spec":{"exclusive":true}}`)
		require.Equal(t, 0, r.ExitCode, r.Stderr)
		waitTaint(t, kube, sdOpenNode, true)
		t.Logf("%s tainted %v after kubectl patch", sdOpenNode, time.Since(start).Round(10*time.Millisecond))
	})
	t.Run("foreign pods stay off, the pool's own run", func(t *testing.T) {
		for _, n := range []string{sdLabelled, sdOpenNode} {
			// Pinned to the node by hostname: only the pool's node satisfies it, so it is
			// judged as the pool's pod, from a namespace the pool does not admit (38.2).
			pinned := newPod("pinned-"+n, nil, nil)
			pinned.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": n}
			_, err := createPod(kube, ns, pinned)
			require.Error(t, err)
			assert.Contains(t, err.Error(), `[P4] the pod's nodeSelector kubernetes.io/hostname=`+n+` pins it to pool`)
			// The node or an ordinary one: no one pool's pod, not P6's to refuse (no
			// toleration, no nodeName); the taint keeps it off the exclusive node.
			foreign := newPod("foreign-"+n, nil, nil)
			foreign.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{n, "cpu-node-1"}}}}}}}}
			_, err = createPod(kube, ns, foreign)
			require.NoError(t, err, "no toleration, no nodeName: not P6's to refuse, the taint keeps it off")
		}
		own := newPod("own", map[string]string{policy.LabelPool: sdPool, policy.LabelWorkloadType: "development"}, nil)
		own.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": sdLabelled}
		_, err := createPod(kube, sdNS, own)
		require.NoError(t, err)
		waitPodOn(t, kube, sdNS, "own", sdLabelled)

		// Which of the pool's pods P6 is sent, counted on pods nobody binds (a binding
		// would be a request of its own).
		before, beforeP6 := proc.decisions(t, "placement"), proc.decisionsOf(t, "pods", "P6")
		unbound := newPod("own-unbound", map[string]string{policy.LabelPool: sdPool, policy.LabelWorkloadType: "development"}, nil)
		unbound.Spec.SchedulerName = "no-such-scheduler"
		created, err := createPod(kube, sdNS, unbound)
		require.NoError(t, err)
		require.Contains(t, created.Spec.Tolerations, policy.ExclusivePoolToleration(sdPool), "P1 gave it the pool's toleration")
		assert.Equal(t, before, proc.decisions(t, "placement"), "a pod created with a pool label is never sent to P6's validating entries")
		assert.Equal(t, beforeP6, proc.decisionsOf(t, "pods", "P6"), "with only its pool's toleration it cannot pass another pool's taint: P6 reads no member")
		all := newPod("own-tolerates-all", map[string]string{policy.LabelPool: sdPool, policy.LabelWorkloadType: "development"}, nil)
		all.Spec.SchedulerName = "no-such-scheduler"
		all.Spec.Tolerations = []corev1.Toleration{{Key: policy.LabelPool, Operator: corev1.TolerationOpExists}}
		_, err = createPod(kube, sdNS, all)
		require.NoError(t, err, "admitted: its pool's nodeSelector keeps it on its pool")
		assert.Equal(t, before, proc.decisions(t, "placement"), "a pod created with a pool label is never sent to P6's validating entries")
		assert.Equal(t, beforeP6+1, proc.decisionsOf(t, "pods", "P6"), "a runwhere.ai/pool Exists toleration is judged by P6, in the mutating call")
		for _, name := range []string{unbound.Name, all.Name} {
			require.NoError(t, kube.CoreV1().Pods(sdNS).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
		}
		for _, n := range []string{sdLabelled, sdOpenNode} {
			// The scheduler places it on the one node whose taints it tolerates.
			waitPodOn(t, kube, ns, "foreign-"+n, "cpu-node-1")
		}
	})
	t.Run("a foreign pod pinned to the node cannot gain the toleration by update", func(t *testing.T) {
		p := newPod("gains-toleration", nil, corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")})
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{sdMember}}}},
				// or an ordinary node, so that it is no one pool's pod (38.2 would judge
				// it as sd-excl's and refuse it at once); never scheduled.
				{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"cpu-node-1"}}}}}}}}
		p.Spec.SchedulerName = "no-such-scheduler"
		created, err := createPod(kube, ns, p)
		require.NoError(t, err)
		for _, tol := range []string{`{"key":"runwhere.ai/pool","operator":"Exists"}`, `{"operator":"Exists"}`} {
			// Added to the tolerations the API server gave it: a pod update may only add.
			add := `[{"op":"add","path":"/spec/tolerations/-","value":` + tol + `}]`
			if len(created.Spec.Tolerations) == 0 {
				add = `[{"op":"add","path":"/spec/tolerations","value":[` + tol + `]}]`
			}
			_, err = kube.CoreV1().Pods(ns).Patch(ctx, "gains-toleration", types.JSONPatchType, []byte(add), metav1.PatchOptions{})
			require.Error(t, err, tol)
			assert.Contains(t, err.Error(), `admission webhook "pod-placement-updates.runwhere.ai" denied the request: [P6] pod ai-team/gains-toleration may not run on node "sd-node-3": it tolerates the pool's taint`)
			assert.Equal(t, []string{"P6"}, policy.RulesOfStatus(err))
		}
		got, err := kube.CoreV1().Pods(ns).Get(ctx, "gains-toleration", metav1.GetOptions{})
		require.NoError(t, err)
		assert.False(t, slices.ContainsFunc(got.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == policy.LabelPool || t.Key == "" }))
		assert.Empty(t, got.Spec.NodeName, "it never runs on the exclusive node")

		before := proc.decisions(t, "placement")
		_, err = kube.CoreV1().Pods(ns).Patch(ctx, "gains-toleration", types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"x"}}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		assert.Equal(t, before, proc.decisions(t, "placement"), "an update that changes nothing P6 judges is not sent")
	})
	t.Run("bindings: onto an exclusive node refused, onto other nodes never sent", func(t *testing.T) {
		waitBindingTargets(t, kube, []string{sdLabelled, sdOpenNode, sdMember})
		for _, name := range []string{"hand-bound-1", "hand-bound-2"} {
			p := newPod(name, nil, nil)
			p.Spec.SchedulerName = "no-such-scheduler"
			_, err := createPod(kube, ns, p)
			require.NoError(t, err)
		}
		err := kube.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "hand-bound-1"},
			Target: corev1.ObjectReference{Kind: "Node", Name: sdOpenNode}}, metav1.CreateOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), `denied the request: [P6] pod ai-team/hand-bound-1 may not run on node "sd-node-2": it is bound to the node`)
		before := proc.decisions(t, "placement")
		require.NoError(t, kube.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "hand-bound-2"},
			Target: corev1.ObjectReference{Kind: "Node", Name: "cpu-node-1"}}, metav1.CreateOptions{}))
		assert.Equal(t, before, proc.decisions(t, "placement"), "a binding onto an ordinary node is not sent to the webhook")
	})
	t.Run("the taint goes when the node leaves or the pool stops being exclusive", func(t *testing.T) {
		require.NoError(t, kube.CoreV1().Pods(sdNS).Delete(ctx, "own", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			r := framework.C.Kubectl(t, "", "label", "node", sdLabelled, policy.LabelPool+"-")
			return r.ExitCode == 0, nil
		}), "the idle node leaves its pool of 2")
		waitTaint(t, kube, sdLabelled, false)
		r := framework.C.Kubectl(t, "", "patch", "pool", sdOpenPool, "--type=merge", "-p", `{"spec":{"exclusive":false}}`)
		require.Equal(t, 0, r.ExitCode, r.Stderr)
		waitTaint(t, kube, sdOpenNode, false)
		waitBindingTargets(t, kube, []string{sdMember})
	})
}

// TestDaemonSetInDefaultPoolNamespace: a DaemonSet in a namespace whose default pool is
// train-a100 runs one pod on each node it should run on, not only on the pool's nodes:
// its pods get no pool nodeSelector.
func TestDaemonSetInDefaultPoolNamespace(t *testing.T) {
	kube := framework.C.Kube
	const dsNS = "ds-team"
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), dsNS, metav1.DeleteOptions{}) })
	crt := newCerts(t)
	proc, _ := startWebhook(t, crt)
	registerWebhooks(t, kube, proc.Addr, crt.CAPEM)
	require.NoError(t, localwebhook.WaitEffective(ctx, kube, ns, 30*time.Second))
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dsNS,
		Labels: map[string]string{policy.LabelPool: "train-a100"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// Nodes no kubelet plays (the fixture's NotReady node) would run a pod that never
	// becomes ready: the DaemonSet is kept off them, as a cluster's agents are kept off
	// dead machines.
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var dead []string
	for i := range nodes.Items {
		if !policy.IsNodeReady(&nodes.Items[i]) {
			dead = append(dead, nodes.Items[i].Name)
		}
	}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "node-agent"}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "node-agent"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "node-agent"}}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "agent", Image: "busybox"}}}}}}
	if len(dead) > 0 {
		ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpNotIn, Values: dead}}}}}}}
	}
	_, err = kube.AppsV1().DaemonSets(dsNS).Create(ctx, ds, metav1.CreateOptions{})
	require.NoError(t, err)
	waitDaemonSet(t, kube, dsNS, "node-agent")
}

// waitDaemonSet waits until the DaemonSet's desired, scheduled and ready counts agree,
// then checks one Running pod per node, none pinned to a pool.
func waitDaemonSet(t *testing.T, kube kubernetes.Interface, namespace, name string) {
	t.Helper()
	var last appsv1.DaemonSetStatus
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := kube.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = got.Status
		s := got.Status
		return s.ObservedGeneration == got.Generation && s.DesiredNumberScheduled > 1 &&
			s.CurrentNumberScheduled == s.DesiredNumberScheduled && s.NumberReady == s.DesiredNumberScheduled && s.NumberMisscheduled == 0, nil
	}), "DaemonSet %s/%s: desired %d, scheduled %d, ready %d", namespace, name, last.DesiredNumberScheduled, last.CurrentNumberScheduled, last.NumberReady)
	pods, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	require.NoError(t, err)
	perNode := map[string]int{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		assert.Equal(t, corev1.PodRunning, p.Status.Phase, "pod %s", p.Name)
		assert.NotContains(t, p.Spec.NodeSelector, policy.LabelPool, "pod %s got a pool nodeSelector", p.Name)
		perNode[p.Spec.NodeName]++
	}
	assert.Len(t, perNode, int(last.DesiredNumberScheduled), "one pod on each node: %v", perNode)
	for n, c := range perNode {
		assert.Equal(t, 1, c, "node %s runs %d pods", n, c)
	}
	outside := 0
	for n := range perNode {
		node, err := kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		require.NoError(t, err)
		if node.Labels[policy.LabelPool] != "train-a100" {
			outside++
		}
	}
	assert.Positive(t, outside, "pods run beyond the namespace's default pool: %v", perNode)
	t.Logf("DaemonSet %s/%s: desired %d = scheduled %d = ready %d, on %v", namespace, name, last.DesiredNumberScheduled, last.CurrentNumberScheduled, last.NumberReady, perNode)
}

func nodeTaints(t *testing.T, kube kubernetes.Interface, name string) []corev1.Taint {
	t.Helper()
	n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	var out []corev1.Taint
	for _, tt := range n.Spec.Taints {
		if tt.Key == policy.LabelPool {
			out = append(out, tt)
		}
	}
	return out
}

// waitTaint polls until node carries its pool's exclusive taint (want) or none.
func waitTaint(t *testing.T, kube kubernetes.Interface, node string, want bool) {
	t.Helper()
	var last []corev1.Taint
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = nodeTaints(t, kube, node)
		if !want {
			return len(last) == 0, nil
		}
		return len(last) == 1 && last[0] == policy.ExclusiveTaint(n.Labels[policy.LabelPool]), nil
	}), "node %s: exclusive taint wanted %v, has %v", node, want, last)
}

func waitPodOn(t *testing.T, kube kubernetes.Interface, namespace, name, node string) {
	t.Helper()
	var last *corev1.Pod
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = p
		return p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning, nil
	}), "pod %s/%s never ran on %s: %+v", namespace, name, node, last.Status)
}

// waitBindingTargets waits until the controller has written exactly nodes into P6's
// binding match conditions.
func waitBindingTargets(t *testing.T, kube kubernetes.Interface, nodes []string) {
	t.Helper()
	want := controller.BindingTargetsConditions(slices.Sorted(slices.Values(nodes)))
	var last []admissionregistrationv1.MatchCondition
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		cfg, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, controller.WebhookConfiguration, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = nil
		for _, w := range cfg.Webhooks {
			for _, c := range w.MatchConditions {
				if w.Name == controller.PlacementBindingsWebhook && controller.IsBindingTargetsCondition(c.Name) {
					last = append(last, c)
				}
			}
		}
		return slices.Equal(last, want), nil
	}), "binding targets: want %v, have %v", want, last)
}

func removeSideDoorFixture(kube kubernetes.Interface) {
	bg := context.Background()
	now := metav1.DeleteOptions{GracePeriodSeconds: new(int64)}
	for _, name := range []string{"foreign-" + sdLabelled, "foreign-" + sdOpenNode, "gains-toleration", "hand-bound-1", "hand-bound-2"} {
		_ = kube.CoreV1().Pods(ns).Delete(bg, name, now)
	}
	_ = kube.CoreV1().Namespaces().Delete(bg, sdNS, metav1.DeleteOptions{})
	for _, p := range []string{sdPool, sdOpenPool} {
		_ = poolclient.New(framework.C.Dynamic).Delete(bg, p, metav1.DeleteOptions{})
	}
	for _, n := range []string{sdLabelled, sdMember, sdOpenNode} {
		_ = kube.CoreV1().Nodes().Delete(bg, n, metav1.DeleteOptions{})
	}
}
