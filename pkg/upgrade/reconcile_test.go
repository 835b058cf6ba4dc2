package upgrade

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/nodejob"
	"github.com/runwhere-ai/litepool/pkg/podindex"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

const ns = "litepool-system"

func testNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{policy.LabelPool: "p", policy.LabelDriverVersion: "1.0"}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

func testRollout(name string, maxU int) *v1alpha1.DriverRollout {
	v := intstr.FromInt32(int32(maxU))
	return &v1alpha1.DriverRollout{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec: v1alpha1.DriverRolloutSpec{Pool: "p", Version: "2.0", Installer: v1alpha1.DriverInstaller{Image: "inst:2"},
			MaxUnavailable: &v, ValidateTimeout: &metav1.Duration{Duration: time.Minute}},
	}
}

// world is a cluster of fakes: the DriverRollouts (controller-runtime's fake client,
// which refuses stale updates as the API server does) and the rest (client-go's).
type world struct {
	t     *testing.T
	c     client.Client
	kube  *kubefake.Clientset
	clock *clocktesting.FakeClock
}

func newWorld(t *testing.T, ro *v1alpha1.DriverRollout, nodes ...string) *world {
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha1.AddToScheme(s))
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(ro).WithStatusSubresource(&v1alpha1.DriverRollout{}).Build()
	kube := kubefake.NewClientset()
	for _, n := range nodes {
		_, err := kube.CoreV1().Nodes().Create(context.Background(), testNode(n), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	return &world{t: t, c: c, kube: kube, clock: clocktesting.NewFakeClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))}
}

func (w *world) reconciler() *Reconciler {
	return &Reconciler{Client: w.c, Kube: w.kube, Namespace: ns, Clock: w.clock}
}

func (w *world) reconcile(r *Reconciler, name string) reconcile.Result {
	w.t.Helper()
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
	require.NoError(w.t, err)
	return res
}

func (w *world) rollout(name string) *v1alpha1.DriverRollout {
	w.t.Helper()
	var ro v1alpha1.DriverRollout
	require.NoError(w.t, w.c.Get(context.Background(), client.ObjectKey{Name: name}, &ro))
	return &ro
}

// playInstallers completes every running installer Job and, unless the node is in
// broken, sets its driver label to the Job's version: what the installer and the
// driver's device plugin do on a real node.
func (w *world) playInstallers(broken ...string) {
	w.t.Helper()
	ctx := context.Background()
	jobs, err := w.kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	require.NoError(w.t, err)
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if len(j.Status.Conditions) > 0 {
			continue
		}
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		_, err := w.kube.BatchV1().Jobs(ns).UpdateStatus(ctx, j, metav1.UpdateOptions{})
		require.NoError(w.t, err)
		node := j.Annotations[AnnotationJobNode]
		if contains(broken, node) {
			continue
		}
		n, err := w.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		require.NoError(w.t, err)
		n.Labels[policy.LabelDriverVersion] = j.Spec.Template.Spec.Containers[0].Env[0].Value
		_, err = w.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		require.NoError(w.t, err)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func (w *world) unschedulable() int {
	list, err := w.kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	require.NoError(w.t, err)
	n := 0
	for _, node := range list.Items {
		if node.Spec.Unschedulable {
			n++
		}
	}
	return n
}

func (w *world) jobsPerNode() map[string]int {
	out := map[string]int{}
	list, err := w.kube.BatchV1().Jobs("").List(context.Background(), metav1.ListOptions{})
	require.NoError(w.t, err)
	for _, j := range list.Items {
		assert.Equal(w.t, ns, j.Namespace, "installer Jobs run in litepool's namespace only")
		out[j.Spec.Template.Spec.NodeName]++
	}
	return out
}

func TestReconcileRollsAPoolInWavesOfMaxUnavailable(t *testing.T) {
	w := newWorld(t, testRollout("r", 2), "n1", "n2", "n3", "n4", "n5")
	r := w.reconciler()
	most := 0
	for i := 0; i < 50 && w.rollout("r").Status.Phase != v1alpha1.RolloutSucceeded; i++ {
		if res := w.reconcile(r, "r"); w.rollout("r").Status.Phase != v1alpha1.RolloutSucceeded {
			assert.Equal(t, 2*time.Second, res.RequeueAfter, "a rollout under way asks to be looked at again")
		}
		most = max(most, w.unschedulable())
		w.playInstallers()
		w.clock.Step(time.Second)
	}
	ro := w.rollout("r")
	require.Equal(t, v1alpha1.RolloutSucceeded, ro.Status.Phase, ro.Status.Message)
	assert.Equal(t, 2, most, "never more than maxUnavailable nodes out at once, and as many as it allows")
	assert.Equal(t, "5/5", ro.Status.Progress)
	assert.Equal(t, "5/5 nodes at 2.0", ro.Status.Message)
	assert.Equal(t, int64(1), ro.Status.ObservedGeneration)
	assert.Equal(t, map[string]int{"n1": 1, "n2": 1, "n3": 1, "n4": 1, "n5": 1}, w.jobsPerNode())
	assert.Zero(t, w.unschedulable())
	for _, n := range ro.Status.Nodes {
		assert.Equal(t, "done", n.State, n.Name)
		assert.Equal(t, InstallerJobName(ro, n.Name, 1), n.Job)
	}
	// The nodes carry the state for people to read.
	n1, _ := w.kube.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	assert.Equal(t, "done", n1.Annotations[policy.AnnotationUpgradeState])
	assert.Equal(t, "r", n1.Annotations[policy.AnnotationUpgradeRun])
	// Done is done: no requeue, nothing more happens.
	assert.Zero(t, w.reconcile(r, "r"))
}

// Two processes reconcile one rollout, each from its own (possibly stale) read: each
// node still gets exactly one installer Job and one pass through the machine.
func TestTwoReconcilersNeverUpgradeANodeTwice(t *testing.T) {
	w := newWorld(t, testRollout("r", 1), "n1", "n2", "n3")
	a, b := w.reconciler(), w.reconciler()
	stale := &staleClient{Client: w.c}
	b.Client = stale
	conflicts := 0
	for i := 0; i < 80 && w.rollout("r").Status.Phase != v1alpha1.RolloutSucceeded; i++ {
		w.reconcile(a, "r")
		// b reads the state before a's pass, then is refused (a conflict, for its rate
		// limiter) or redoes it.
		if _, err := b.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "r"}}); err != nil {
			require.True(t, apierrors.IsConflict(err), "%v", err)
			conflicts++
		}
		stale.refresh(t)
		w.playInstallers()
		w.clock.Step(time.Second)
	}
	ro := w.rollout("r")
	require.Equal(t, v1alpha1.RolloutSucceeded, ro.Status.Phase, ro.Status.Message)
	assert.NotZero(t, conflicts, "the stale reconciler lost some status writes")
	assert.Equal(t, map[string]int{"n1": 1, "n2": 1, "n3": 1}, w.jobsPerNode())
	events, err := w.kube.CoreV1().Nodes().Get(context.Background(), "n2", metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, events.Spec.Unschedulable)
}

// staleClient serves Gets of DriverRollouts from a copy taken at refresh: a process
// whose cache lags behind.
type staleClient struct {
	client.Client
	copy *v1alpha1.DriverRollout
}

func (s *staleClient) refresh(t *testing.T) {
	var ro v1alpha1.DriverRollout
	require.NoError(t, s.Client.Get(context.Background(), client.ObjectKey{Name: "r"}, &ro))
	s.copy = &ro
}

func (s *staleClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if ro, ok := obj.(*v1alpha1.DriverRollout); ok && s.copy != nil {
		s.copy.DeepCopyInto(ro)
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

func TestValidationTimeoutFailsTheNodeAndRetryFailedRunsItAgain(t *testing.T) {
	w := newWorld(t, testRollout("r", 1), "n1", "n2")
	r := w.reconciler()
	for i := 0; i < 20 && w.rollout("r").Status.Phase != v1alpha1.RolloutFailed; i++ {
		w.reconcile(r, "r")
		w.playInstallers("n1") // n1's driver never reports
		w.clock.Step(20 * time.Second)
	}
	ro := w.rollout("r")
	require.Equal(t, v1alpha1.RolloutFailed, ro.Status.Phase)
	assert.Equal(t, "failed", ro.Status.Nodes[0].State)
	assert.Equal(t, `failed in validate: validation timed out after 1m0s: the node's driver-version label reads "1.0", want "2.0" (labels huawei.com/driver.version, nvidia.com/cuda.driver-version.full, runwhere.ai/driver-version)`,
		ro.Status.Nodes[0].Message)
	assert.Equal(t, "upgrade-required", ro.Status.Nodes[1].State, "nothing starts after a failure")
	assert.Equal(t, 1, w.unschedulable(), "the failed node stays cordoned")
	assert.Contains(t, ro.Status.Message, "fix it, then `kubectl litepool upgrade resume r --retry-failed`")
	assert.Zero(t, w.reconcile(r, "r"), "a failed rollout waits for a spec change")

	// The operator fixes the node and asks for a retry by raising spec.retryFailed.
	ro.Spec.RetryFailed = 1
	ro.Generation = 2
	require.NoError(t, w.c.Update(context.Background(), ro))
	for i := 0; i < 40 && w.rollout("r").Status.Phase != v1alpha1.RolloutSucceeded; i++ {
		w.reconcile(r, "r")
		w.playInstallers()
		w.clock.Step(time.Second)
	}
	ro = w.rollout("r")
	require.Equal(t, v1alpha1.RolloutSucceeded, ro.Status.Phase, ro.Status.Message)
	assert.Equal(t, int32(2), ro.Status.Nodes[0].Attempt)
	assert.Equal(t, int32(1), ro.Status.RetriedFailed)
	assert.Equal(t, map[string]int{"n1": 2, "n2": 1}, w.jobsPerNode(), "the retry ran the installer afresh, once")
}

func TestPauseAndAbortAreSpecChanges(t *testing.T) {
	ro := testRollout("r", 1)
	ro.Spec.Paused = true
	w := newWorld(t, ro, "n1", "n2", "n3")
	r := w.reconciler()
	assert.Zero(t, w.reconcile(r, "r"))
	got := w.rollout("r")
	assert.Equal(t, v1alpha1.RolloutPaused, got.Status.Phase)
	assert.Zero(t, w.unschedulable(), "a paused rollout starts nothing")

	got.Spec.Paused = false
	require.NoError(t, w.c.Update(context.Background(), got))
	w.reconcile(r, "r")
	assert.Equal(t, 1, w.unschedulable())

	got = w.rollout("r")
	got.Spec.Abort = true
	require.NoError(t, w.c.Update(context.Background(), got))
	for i := 0; i < 20 && w.rollout("r").Status.Phase != v1alpha1.RolloutAborted; i++ {
		w.reconcile(r, "r")
		w.playInstallers()
		w.clock.Step(time.Second)
	}
	got = w.rollout("r")
	require.Equal(t, v1alpha1.RolloutAborted, got.Status.Phase)
	assert.Equal(t, []string{"done", "aborted", "aborted"}, states(got), "the started node finished; the others left")
	assert.Equal(t, "1/1", got.Status.Progress)
	assert.Zero(t, w.unschedulable())
	n3, _ := w.kube.CoreV1().Nodes().Get(context.Background(), "n3", metav1.GetOptions{})
	assert.NotContains(t, n3.Annotations, policy.AnnotationUpgradeState)
}

func states(ro *v1alpha1.DriverRollout) []string {
	var out []string
	for _, n := range ro.Status.Nodes {
		out = append(out, n.State)
	}
	return out
}

func TestARolloutThatCannotStartSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		edit func(*v1alpha1.DriverRollout)
		want string
	}{
		{func(ro *v1alpha1.DriverRollout) { ro.Spec.Pool = "nope" }, `pool "nope" has no nodes (no node carries runwhere.ai/pool=nope)`},
		{func(ro *v1alpha1.DriverRollout) { ro.Spec.Canary = "n9" }, `canary "n9" is not a node of pool "p" that needs the upgrade (nodes to upgrade: n1)`},
		{func(ro *v1alpha1.DriverRollout) { ro.Spec.MaxUnavailable = ptrIntStr(intstr.FromString("0%")) }, "[U2] invalid --max-unavailable \"0%\": a percentage must be 1%-100%"},
	} {
		ro := testRollout("r", 1)
		tc.edit(ro)
		w := newWorld(t, ro, "n1")
		assert.Zero(t, w.reconcile(w.reconciler(), "r"))
		got := w.rollout("r")
		assert.Equal(t, v1alpha1.RolloutFailed, got.Status.Phase)
		assert.Equal(t, tc.want, got.Status.Message)
	}
}

func ptrIntStr(v intstr.IntOrString) *intstr.IntOrString { return &v }

// One node, one rollout (rule U4): a second rollout over a node the first holds does not start.
func TestASecondRolloutOverTheSameNodeIsRefused(t *testing.T) {
	first := testRollout("first", 1)
	w := newWorld(t, first, "n1")
	w.reconcile(w.reconciler(), "first")
	second := testRollout("second", 1)
	second.ResourceVersion = ""
	require.NoError(t, w.c.Create(context.Background(), second))
	w.reconcile(w.reconciler(), "second")
	got := w.rollout("second")
	assert.Equal(t, v1alpha1.RolloutFailed, got.Status.Phase)
	assert.Equal(t, `[U4] node "n1" is already in driver rollout first (state install): finish it with `+"`kubectl litepool upgrade resume first`"+` or stop it with `+"`kubectl litepool upgrade abort first`"+` first`, got.Status.Message)
	assert.Equal(t, map[string]int{"n1": 1}, w.jobsPerNode())
}

func TestInstallerJobIsNamedByRolloutNodeAndAttempt(t *testing.T) {
	ro := testRollout("r", 1)
	other := testRollout("r", 1)
	other.UID = "uid-other"
	assert.Equal(t, InstallerJobName(ro, "n1", 1), InstallerJobName(ro, "n1", 1))
	assert.NotEqual(t, InstallerJobName(ro, "n1", 1), InstallerJobName(ro, "n1", 2))
	assert.NotEqual(t, InstallerJobName(ro, "n1", 1), InstallerJobName(other, "n1", 1), "a new rollout of the same name makes its own Job")
	long := InstallerJobName(ro, fmt.Sprintf("%070d", 1), 1)
	assert.LessOrEqual(t, len(long), 63)

	job := InstallerJob(ro, ns, "n1", 1, 30*time.Minute)
	assert.Equal(t, ns, job.Namespace)
	assert.Equal(t, "n1", job.Spec.Template.Spec.NodeName)
	assert.Equal(t, int64(1800), *job.Spec.ActiveDeadlineSeconds)
	assert.Equal(t, "DriverRollout", job.OwnerReferences[0].Kind)

	// A Job of that name that is not this rollout's is never taken for its result.
	w := newWorld(t, ro, "n1")
	foreign := InstallerJob(other, ns, "n1", 1, 0)
	foreign.Name = InstallerJobName(ro, "n1", 1)
	_, err := w.kube.BatchV1().Jobs(ns).Create(context.Background(), foreign, metav1.CreateOptions{})
	require.NoError(t, err)
	out, err := (&Stepper{Kube: w.kube, Namespace: ns}).Step(context.Background(), ro, testNode("n1"),
		&v1alpha1.DriverRolloutNode{Name: "n1", State: "install", Attempt: 1}, w.clock.Now())
	require.NoError(t, err)
	assert.True(t, out.Failed)
	assert.Contains(t, out.Message, "exists and belongs to DriverRollout r (uid uid-other)")
}

// An installer Job the Job controller makes no pod for (refused by Pod Security, say)
// is not reported as running: the node's message says it has no pod and where to look.
func TestAnInstallerJobWithoutAPodSaysSo(t *testing.T) {
	w := newWorld(t, testRollout("r", 1), "n1")
	r := w.reconciler()
	for i := 0; i < 10; i++ {
		if nodes := w.rollout("r").Status.Nodes; len(nodes) == 1 && nodes[0].Job != "" {
			break
		}
		w.reconcile(r, "r")
	}
	require.Len(t, w.rollout("r").Status.Nodes, 1)
	n := w.rollout("r").Status.Nodes[0]
	require.Equal(t, string(policy.UpgradeInstall), n.State)
	assert.Equal(t, fmt.Sprintf("installer job %s/%s has no pod yet (image inst:2): `kubectl -n %s describe job %s` says why if it stays so", ns, n.Job, ns, n.Job), n.Message)

	ctx := context.Background()
	j, err := w.kube.BatchV1().Jobs(ns).Get(ctx, n.Job, metav1.GetOptions{})
	require.NoError(t, err)
	j.Status.Active = 1
	_, err = w.kube.BatchV1().Jobs(ns).UpdateStatus(ctx, j, metav1.UpdateOptions{})
	require.NoError(t, err)
	w.reconcile(r, "r")
	assert.Equal(t, fmt.Sprintf("installer job %s/%s running (image inst:2)", ns, n.Job), w.rollout("r").Status.Nodes[0].Message)
}

// A node is busy with a tenant's pod even when that pod copies an installer's labels
// and names a Job as its controller: only pods in litepool's namespace are node work.
func TestBusyNodesTrustTheNamespaceNotTheLabels(t *testing.T) {
	ro := testRollout("r", 1)
	w := newWorld(t, ro, "n1", "n2")
	job := InstallerJob(ro, ns, "n1", 1, time.Minute)
	job.UID = "job-uid"
	pod := func(namespace, name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: job.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	ctx := context.Background()
	for _, p := range []*corev1.Pod{pod(ns, "installer", "n1"), pod("tenant", "looks-like-an-installer", "n2")} {
		_, err := w.kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	nodes := map[string]bool{"n1": true, "n2": true}
	busy, err := w.reconciler().busyNodes(ctx, nodes)
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"n2": true}, busy, "the stand-in, from the API server")
	r := w.reconciler()
	r.Pods = startIndex(t, w.kube)
	busy, err = r.busyNodes(ctx, nodes)
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"n2": true}, busy, "the controller, from its pod index")
}

// startIndex is the controller's pod index over kube, listed.
func startIndex(t *testing.T, kube *kubefake.Clientset) *podindex.Index {
	t.Helper()
	idx, err := podindex.NewFor(kube, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = idx.Start(ctx) }()
	require.True(t, toolscache.WaitForCacheSync(ctx.Done(), idx.HasSynced))
	return idx
}

// requests counts what a pass asks of the API server by "verb resource", and how many
// pods the server sends back. client-go's fake ignores field selectors; the reactor
// applies them as the API server does, or a per-node list would count every pod.
type requests struct {
	byVerb     map[string]int
	podsListed int
}

func countRequests(kube *kubefake.Clientset) *requests {
	c := &requests{byVerb: map[string]int{}}
	kube.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c.byVerb[a.GetVerb()+" "+a.GetResource().Resource]++
		return false, nil, nil
	})
	kube.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		// Counted here: the reactor above does not see what this one handles.
		sel := a.(k8stesting.ListAction).GetListRestrictions().Fields
		switch _, onNode := sel.RequiresExactMatch("spec.nodeName"); {
		case a.GetNamespace() != "":
			c.byVerb["list pods in "+a.GetNamespace()]++
		case onNode:
			c.byVerb["list pods on a node"]++
		default:
			c.byVerb["list pods of the cluster"]++
		}
		obj, err := kube.Tracker().List(a.GetResource(), corev1.SchemeGroupVersion.WithKind("Pod"), a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		list := obj.(*corev1.PodList)
		var kept []corev1.Pod
		for _, p := range list.Items {
			if sel == nil || sel.Matches(fields.Set{"spec.nodeName": p.Spec.NodeName, "status.phase": string(p.Status.Phase)}) {
				kept = append(kept, p)
			}
		}
		list.Items = kept
		c.podsListed += len(kept)
		return true, list, nil
	})
	return c
}

// The rollout reconciler's second pass over a 250-node pool, all nodes pending, in a
// cluster of podsPerNode pods on each of the pool's nodes and other pods elsewhere; in
// the controller (with its pod index) or the plugin's stand-in.
func passRequests(t *testing.T, podsPerNode, elsewhere int, indexed bool) *requests {
	const size = 250 // nodes: the fake clientset builds a REST mapper per node write
	ro := testRollout("r", 1)
	names := make([]string, size)
	for i := range names {
		names[i] = fmt.Sprintf("n%04d", i)
	}
	w := newWorld(t, ro, names...)
	add := func(name, node string) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant"}, Spec: corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		// Into the tracker: the fake's Create builds a REST mapper per call, which
		// made seeding thousands of pods take a minute.
		require.NoError(t, w.kube.Tracker().Add(p))
	}
	// Half the pool is busy: the planner must tell idle nodes from busy ones.
	for i := 0; i < size; i += 2 {
		for j := 0; j < podsPerNode; j++ {
			add(fmt.Sprintf("w-%d-%d", i, j), names[i])
		}
	}
	for j := 0; j < elsewhere; j++ {
		add(fmt.Sprintf("other-%d", j), fmt.Sprintf("other-node-%d", j%100))
	}
	r := w.reconciler()
	if indexed {
		r.Pods = startIndex(t, w.kube)
	}
	// The first pass fixes the rollout's nodes (and annotates all 250); count the
	// next, the one repeated every Recheck while nodes are pending.
	w.reconcile(r, "r")
	c := countRequests(w.kube)
	w.reconcile(r, "r")
	st := w.rollout("r").Status
	require.Len(t, st.Nodes, size)
	require.Equal(t, []string{names[1] + " (install)"}, inProgress(w.rollout("r")), "an idle node goes first")
	t.Logf("250 nodes, %d pods (indexed %v): requests %v, pods sent %d", size/2*podsPerNode+elsewhere, indexed, c.byVerb, c.podsListed)
	return c
}

// Issue 32: in the controller a pass reads busy nodes from the pod index, so it asks the
// API server the same whatever the cluster's pod count: no cluster-wide pod list (the
// installer's outcome lists its pods in litepool's namespace, the drain the pods of the
// node it drains).
func TestARolloutPassDoesNotListTheClustersPods(t *testing.T) {
	small := passRequests(t, 1, 0, true)
	big := passRequests(t, 10, 5000, true)
	assert.Zero(t, small.byVerb["list pods of the cluster"]+big.byVerb["list pods of the cluster"], "no live cluster-wide pod list in the controller")
	assert.Zero(t, big.podsListed)
	assert.Equal(t, small.byVerb, big.byVerb, "the requests of a pass do not grow with the cluster's pods")
}

// A watched rollout (the controller: its Jobs, nodes and pods wake it) asks to run again
// only when time is what it waits for: the first timeout of a node's present state, or
// an eviction a disruption budget refused. The plugin's stand-in, which watches
// nothing, looks again after Recheck.
func TestAWatchedRolloutAsksAgainOnlyForTime(t *testing.T) {
	ro := testRollout("r", 1)
	ro.Spec.WaitTimeout = &metav1.Duration{Duration: 0}
	w := newWorld(t, ro, "n1")
	r := w.reconciler()
	r.Watched = true
	// The first pass cordons n1, drains nothing, makes its installer Job and waits for it.
	res := w.reconcile(r, "r")
	got := w.rollout("r")
	require.Equal(t, string(policy.UpgradeInstall), got.Status.Nodes[0].State, got.Status.Nodes[0].Message)
	assert.Equal(t, DefaultInstallTimeout+installGrace+time.Second, res.RequeueAfter,
		"a running installer Job wakes the rollout when it ends: the only timer is the install timeout")
	w.clock.Step(10 * time.Minute)
	res = w.reconcile(r, "r")
	assert.Equal(t, DefaultInstallTimeout+installGrace-10*time.Minute+time.Second, res.RequeueAfter)

	r.Watched = false
	assert.Equal(t, 2*time.Second, w.reconcile(r, "r").RequeueAfter, "the stand-in watches nothing: it looks again")

	// Validation waits for the driver label (a node event) with its timeout.
	r.Watched = true
	w.playInstallers()
	res = w.reconcile(r, "r")
	assert.Equal(t, string(policy.UpgradeDone), w.rollout("r").Status.Nodes[0].State)
	assert.Zero(t, res.RequeueAfter, "done: nothing to wait for")
}

// A drain whose eviction a disruption budget refuses (429) waits for time, not for an
// object's change: a watched rollout still asks again soon.
func TestARefusedEvictionIsAskedAgain(t *testing.T) {
	ro := testRollout("r", 1)
	ro.Spec.WaitTimeout = &metav1.Duration{Duration: 0}
	ro.Spec.ForceDrain = true // a bare pod: kubectl's drain asks for --force
	w := newWorld(t, ro, "n1")
	ctx := context.Background()
	_, err := w.kube.CoreV1().Pods("tenant").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "tenant"},
		Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}, metav1.CreateOptions{})
	require.NoError(t, err)
	w.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		return true, nil, apierrors.NewTooManyRequests("the disruption budget allows none", 10)
	})
	r := w.reconciler()
	r.Watched = true
	res := w.reconcile(r, "r")
	n := w.rollout("r").Status.Nodes[0]
	require.Equal(t, string(policy.UpgradeDrain), n.State, n.Message)
	assert.Contains(t, n.Message, "a disruption budget refuses tenant/train")
	assert.Equal(t, 2*time.Second, res.RequeueAfter)
}

// A rollout's drain is litepool's one drain: a re-check pod of the health loop on the
// node (litepool's node work) keeps running, a tenant's pod is evicted.
func TestARolloutDrainLeavesLitepoolsNodeWork(t *testing.T) {
	ro := testRollout("r", 1)
	ro.Spec.WaitTimeout = &metav1.Duration{Duration: 0}
	w := newWorld(t, ro, "n1")
	ctx := context.Background()
	rs := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs", Controller: ptr.To(true)}}
	run := []metav1.OwnerReference{{APIVersion: "runwhere.ai/v1alpha1", Kind: "StressRun", Name: "health-n1", UID: "run", Controller: ptr.To(true)}}
	for _, p := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "tenant", OwnerReferences: rs}},
		{ObjectMeta: metav1.ObjectMeta{Name: "recheck", Namespace: ns, OwnerReferences: run,
			Labels: map[string]string{nodejob.LabelManagedBy: nodejob.ManagedBy}}},
	} {
		p.Spec.NodeName, p.Status.Phase = "n1", corev1.PodRunning
		_, err := w.kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	w.reconcile(w.reconciler(), "r")
	var evicted []string
	for _, a := range w.kube.Actions() {
		if c, ok := a.(k8stesting.CreateAction); ok && a.GetSubresource() == "eviction" {
			evicted = append(evicted, c.GetNamespace()+"/"+c.GetObject().(metav1.Object).GetName())
		}
	}
	assert.Equal(t, []string{"tenant/train"}, evicted)
}
