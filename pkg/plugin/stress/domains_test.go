package stress

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

var domainArgs = []string{"run", "--pool", "pool-a", "--image", "stress:1", "--tests", "npu,hccs", "--domains"}

// rackPool is pool-a declaring NVIDIA's topology: its domains are NVLink cliques.
func rackPool() *v1alpha1.Pool {
	p := poolA()
	p.Spec.Topology = &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyNVIDIA}
	return p
}

func rackMember(name, rack string) *corev1.Node {
	n := idleNode(name)
	n.Labels["nvidia.com/gpu.clique"] = rack
	return n
}

// rackCluster: racks a (a1, a2) and b (b1, b2), b2 running a training pod.
func rackCluster(t *testing.T, pool *v1alpha1.Pool) *kittest.Factory {
	busy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team"},
		Spec: corev1.PodSpec{NodeName: "b2", Containers: []corev1.Container{{Name: "c"}}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	return kittest.NewFactory(t, pool, rackMember("a1", "a"), rackMember("a2", "a"), rackMember("b1", "b"), rackMember("b2", "b"), busy)
}

// Run here by domain: the busy rack is skipped whole, the idle one tested; a1 fails
// hccs, so a1 is degraded and rack a's result failed, naming it.
func TestStressRunByDomain(t *testing.T) {
	f := rackCluster(t, rackPool())
	runs := withRuns(t, false, rackPool())
	f.Kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		p.Status.Phase = corev1.PodSucceeded
		if p.Spec.NodeName == "a1" && p.Name == "pool-a-20261122-120000-a1-hccs" {
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "hccs link 3 down"}}}}
		}
		return false, nil, nil
	})
	r := stressCmd(f, append(domainArgs, "--controller-wait=10ms")...)
	require.EqualError(t, r.Err, "[T2] 1 node(s) failed the stress test and are now runwhere.ai/health=degraded: a1; 1 domain(s) failed: a")
	assert.Equal(t, "stressrun/pool-a-20261122-120000 created\n"+domainRunTables, r.Out)
	assert.Contains(t, r.ErrOut, "pool pool-a: 1 passed, 1 failed, 2 skipped; domains: 0 passed, 1 failed, 1 skipped\n")
	var run v1alpha1.StressRun
	require.NoError(t, runs.Get(t.Context(), client.ObjectKey{Name: "pool-a-20261122-120000"}, &run))
	assert.True(t, run.Spec.Domains)
	assert.Equal(t, policy.HealthDegraded, f.Node(t, "a1").Labels[policy.LabelHealth])
	assert.Equal(t, policy.HealthHealthy, f.Node(t, "a2").Labels[policy.LabelHealth])
	assert.NotContains(t, f.Node(t, "b1").Labels, policy.LabelHealth)

	// stress status shows the same, read from the run.
	r = stressCmd(f, "status", "--pool", "pool-a")
	require.NoError(t, r.Err)
	assert.Equal(t, "stress run pool-a-20261122-120000: failed\n"+domainRunTables+"pool pool-a: 1 passed, 1 failed, 2 skipped; domains: 0 passed, 1 failed, 1 skipped\n", r.Out)
}

func TestStressRunByDomainDryRun(t *testing.T) {
	f := rackCluster(t, rackPool())
	runs := withRuns(t, false, rackPool())
	r := stressCmd(f, "run", "--pool", "pool-a", "--image", "stress:1", "--tests", "npu", "--domains", "--dry-run=client")
	require.NoError(t, r.Err)
	assert.Equal(t, `NODE   TEST     RESULT       DETAIL
a1     npu      would test   <none>
a2     npu      would test   <none>
b1     <none>   skipped      domain b not idle: b2 busy: 1 workload pod(s): team/train
b2     <none>   skipped      domain b not idle: b2 busy: 1 workload pod(s): team/train

DOMAIN   MEMBERS   RESULT       DETAIL
a        a1,a2     would test   <none>
b        b1,b2     skipped      not idle: b2 busy: 1 workload pod(s): team/train
`, r.Out)
	var list v1alpha1.StressRunList
	require.NoError(t, runs.List(t.Context(), &list))
	assert.Empty(t, list.Items)
}

// --domains on a pool without a topology is refused before anything is written (T4,
// the webhook's rule), and so is --domains with --nodes.
func TestStressRunByDomainRefusals(t *testing.T) {
	const noTopology = `[T4] spec.domains tests a pool by unit domain, and pool "pool-a" has no topology (no spec.topology): run without --domains (spec.domains) to test node by node, or declare the pool's topology first`
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{"no topology", domainArgs, noTopology},
		{"no topology, dry run", append(domainArgs, "--dry-run=client"), noTopology},
		{"with --nodes", append(domainArgs, "--nodes", "a1"), "--nodes and --domains: a run by domain tests whole domains; give one of them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := rackCluster(t, poolA())
			runs := withRuns(t, false, poolA())
			r := stressCmd(f, append(tc.args, "--controller-wait=10ms")...)
			require.EqualError(t, r.Err, tc.err)
			assert.Empty(t, r.Out)
			var list v1alpha1.StressRunList
			require.NoError(t, runs.List(t.Context(), &list))
			assert.Empty(t, list.Items, "no run created")
			assert.Equal(t, []string{"team/train"}, stressPods(t, f), "no pod but the training one")
		})
	}
}

// stress schedule --domains: each firing runs by domain; a pool without a topology is
// refused and nothing is written.
func TestStressScheduleByDomain(t *testing.T) {
	f := rackCluster(t, rackPool())
	r := stressCmd(f, append(schedule, "--domains")...)
	require.NoError(t, r.Err)
	cj, err := f.Kube.BatchV1().CronJobs(kittest.Namespace).Get(context.Background(), "litepool-stress-pool-a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"kubectl-litepool", "stress", "run", "--pool", "pool-a", "--in-cluster=true", "--tests", "npu", "--image", "img", "--timeout", "30m0s", "--domains"},
		cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Command)

	f = rackCluster(t, poolA())
	r = stressCmd(f, append(schedule, "--domains")...)
	require.EqualError(t, r.Err, `[T4] spec.domains tests a pool by unit domain, and pool "pool-a" has no topology (no spec.topology): run without --domains (spec.domains) to test node by node, or declare the pool's topology first`)
	assert.Equal(t, [4]int{0, 0, 0, 0}, scheduleObjects(t, f))
	assert.Nil(t, f.Pool(t, "pool-a").Spec.StressTest, "the pool is not written")
}

func TestStressStatusNeedsARunOrAPool(t *testing.T) {
	f := kittest.NewFactory(t, poolA())
	withRuns(t, false)
	for _, args := range [][]string{{"status"}, {"status", "r1", "--pool", "pool-a"}} {
		r := stressCmd(f, args...)
		require.EqualError(t, r.Err, "name a stress run, or give --pool for the pool's newest run (kubectl get stressruns lists them)")
	}
	r := stressCmd(f, "status", "--pool", "pool-a")
	require.EqualError(t, r.Err, "pool pool-a has no stress run (kubectl litepool stress run --pool pool-a starts one)")
}

// stress schedule's CronJob may not list nodes (its ClusterRole starts runs and nothing
// more): its run by domain is created, and the webhook judges T4 on it.
func TestStressRunByDomainWithoutNodeRightsLeavesT4ToTheWebhook(t *testing.T) {
	f := rackCluster(t, poolA())
	runs := withRuns(t, true, poolA())
	f.Kube.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("nodes"), "", assert.AnError)
	})
	r := stressCmd(f, append(domainArgs, "--in-cluster=true")...)
	require.NoError(t, r.Err)
	var run v1alpha1.StressRun
	require.NoError(t, runs.Get(t.Context(), client.ObjectKey{Name: "pool-a-20261122-120000"}, &run))
	assert.True(t, run.Spec.Domains)
}

// domainRunTables are the node and domain tables of the run by domain, as `stress run`
// prints them and `stress status` prints them again from the run.
const domainRunTables = `NODE   TEST     RESULT    DETAIL
a1     npu      passed    exit 0
a1     hccs     failed    exit 1: hccs link 3 down
a2     npu      passed    exit 0
a2     hccs     passed    exit 0
b1     <none>   skipped   domain b not idle: b2 busy: 1 workload pod(s): team/train
b2     <none>   skipped   domain b not idle: b2 busy: 1 workload pod(s): team/train

DOMAIN   MEMBERS   RESULT    DETAIL
a        a1,a2     failed    1 of 2 member(s) failed: a1
b        b1,b2     skipped   not idle: b2 busy: 1 workload pod(s): team/train
`
