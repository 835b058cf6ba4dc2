package upgrade

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/stress"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// stressPodNodes watches litepool's namespace and collects the node of every stress pod
// ever created there on a node named prefix*: the cluster's own account of where tests
// ran (passed tests' pods are deleted once recorded).
func stressPodNodes(t *testing.T, prefix string) func() map[string]int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := framework.C.Kube.CoreV1().Pods(stress.DefaultNamespace).Watch(ctx, metav1.ListOptions{LabelSelector: stress.LabelComponent + "=" + stress.Component})
	require.NoError(t, err)
	var mu sync.Mutex
	seen, out := map[string]bool{}, map[string]int{}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || !strings.HasPrefix(p.Spec.NodeName, prefix) || seen[string(p.UID)] {
				continue
			}
			mu.Lock()
			seen[string(p.UID)] = true
			out[p.Spec.NodeName]++
			mu.Unlock()
		}
	}()
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		cp := make(map[string]int, len(out))
		for k, v := range out {
			cp[k] = v
		}
		return cp
	}
}

// A pool of 2 super pods × 3 nodes, run by domain with the plugin (no controller in
// this cluster: it runs the reconciler itself). sp-2 has one busy member: it is skipped
// whole and no test pod lands on any of its nodes. sp-1 is tested, its members running
// each test together; its second member fails hccs: that node is degraded and sp-1's
// result is failed, naming it.
func TestStressRunByDomainTestsOnlyIdleDomains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	require.NoError(t, localwebhook.EnsureNamespace(ctx, framework.C.Kube, stress.DefaultNamespace))
	nodes, _ := superPodPool(t, "str-dom", 2, 3)
	framework.WaitInService(t, framework.C.Kube, nodes...)
	busy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "str-dom-busy-job", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: nodes[4], Containers: []corev1.Container{{Name: "c", Image: "train:1"}}}}
	_, err := framework.C.Kube.CoreV1().Pods("default").Create(ctx, busy, metav1.CreateOptions{})
	require.NoError(t, err)
	created := stressPodNodes(t, "str-dom-")
	fail := map[string]string{nodes[1]: "hccs link 3 down"}
	for _, n := range nodes {
		if n != nodes[1] {
			fail[n+"?"] = ""
		}
	}
	stressAgent(t, fail)

	r := framework.C.Litepool(t, "stress", "run", "--pool", "str-dom", "--tests", "npu,hccs", "--domains", "--image", "registry.example.com/npu-stress:1.0",
		"--timeout", "2m", "--controller-wait", "2s")
	assert.Equal(t, 1, r.ExitCode, r.Stdout+r.Stderr)
	skip := "domain sp-2 not idle: str-dom-5 busy: 1 workload pod(s): default/str-dom-busy-job"
	assert.Equal(t, `NODE        TEST     RESULT    DETAIL
str-dom-1   npu      passed    exit 0
str-dom-1   hccs     passed    exit 0
str-dom-2   npu      passed    exit 0
str-dom-2   hccs     failed    exit 1 (Error): hccs link 3 down
str-dom-3   npu      passed    exit 0
str-dom-3   hccs     passed    exit 0
str-dom-4   <none>   skipped   `+skip+`
str-dom-5   <none>   skipped   `+skip+`
str-dom-6   <none>   skipped   `+skip+`

DOMAIN   MEMBERS                         RESULT    DETAIL
sp-1     str-dom-1,str-dom-2,str-dom-3   failed    1 of 3 member(s) failed: str-dom-2
sp-2     str-dom-4,str-dom-5,str-dom-6   skipped   not idle: str-dom-5 busy: 1 workload pod(s): default/str-dom-busy-job
`, r.Stdout[strings.Index(r.Stdout, "NODE"):])
	assert.True(t, strings.HasSuffix(r.Stderr, "\npool str-dom: 2 passed, 1 failed, 3 skipped; domains: 0 passed, 1 failed, 1 skipped\n"+
		"error: [T2] 1 node(s) failed the stress test and are now runwhere.ai/health=degraded: str-dom-2; 1 domain(s) failed: sp-1\n"), r.Stderr)

	assert.Equal(t, map[string]int{nodes[0]: 2, nodes[1]: 2, nodes[2]: 2}, created(), "two tests on each member of sp-1, none on sp-2")
	assert.Equal(t, policy.HealthDegraded, framework.Node(t, nodes[1]).Labels[policy.LabelHealth])
	assert.Equal(t, policy.HealthHealthy, framework.Node(t, nodes[0]).Labels[policy.LabelHealth])
	assert.Equal(t, policy.HealthHealthy, framework.Node(t, nodes[2]).Labels[policy.LabelHealth])
	for _, n := range nodes[3:] {
		assert.NotContains(t, framework.Node(t, n).Labels, policy.LabelHealth, "%s was not tested", n)
	}

	// The run's status: sp-1's hccs started on no member before npu ended on all.
	run := newestRun(t, "str-dom")
	require.Len(t, run.Status.Domains, 2)
	assert.Equal(t, v1alpha1.StressDomainResult{Domain: "sp-1", Members: nodes[:3], Outcome: v1alpha1.StressOutcomeFailed,
		FailedMembers: []string{nodes[1]}, Message: "1 of 3 member(s) failed: " + nodes[1]}, run.Status.Domains[0])
	var npuEnd, hccsStart []metav1.Time
	for _, res := range run.Status.Results {
		switch {
		case res.Test == "npu" && res.FinishTime != nil:
			npuEnd = append(npuEnd, *res.FinishTime)
		case res.Test == "hccs" && res.StartTime != nil:
			hccsStart = append(hccsStart, *res.StartTime)
		}
	}
	require.Len(t, npuEnd, 3)
	require.Len(t, hccsStart, 3)
	for _, s := range hccsStart {
		for _, e := range npuEnd {
			assert.False(t, s.Before(&e), "an hccs test started at %s, before a member's npu ended at %s", s, e)
		}
	}

	// stress status shows the same domains, read from the run.
	out := framework.C.MustLitepool(t, "stress", "status", "--pool", "str-dom")
	assert.Contains(t, out, "sp-1     str-dom-1,str-dom-2,str-dom-3   failed    1 of 3 member(s) failed: str-dom-2\n")
	assert.True(t, strings.HasSuffix(out, "pool str-dom: 2 passed, 1 failed, 3 skipped; domains: 0 passed, 1 failed, 1 skipped\n"), out)
}

// --domains on a pool without a topology is refused before anything is written (T4),
// by stress run and stress schedule alike: no StressRun, no pod, no CronJob.
func TestStressByDomainOnAPoolWithoutTopologyIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	framework.AscendPool(t, "str-flat", 2, target, software)
	created := stressPodNodes(t, "str-flat-")
	want := `error: [T4] spec.domains tests a pool by unit domain, and pool "str-flat" has no topology (no spec.topology): run without --domains (spec.domains) to test node by node, or declare the pool's topology first` + "\n"
	r := framework.C.Litepool(t, "stress", "run", "--pool", "str-flat", "--tests", "npu", "--domains", "--image", "registry.example.com/npu-stress:1.0", "--controller-wait", "1s")
	assert.Equal(t, 1, r.ExitCode)
	assert.Equal(t, want, r.Stderr)
	assert.Empty(t, r.Stdout)
	r = framework.C.Litepool(t, "stress", "schedule", "--pool", "str-flat", "--cron", "0 2 * * 0", "--image", "npu-stress:1.0", "--domains", "-n", "default")
	assert.Equal(t, 1, r.ExitCode)
	assert.Equal(t, want, r.Stderr)

	assert.Nil(t, newestRunOrNil(t, "str-flat"), "no StressRun created")
	_, err := framework.C.Kube.BatchV1().CronJobs("default").Get(ctx, "litepool-stress-str-flat", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no CronJob: %v", err)
	assert.Empty(t, created())
	var pool v1alpha1.Pool
	require.NoError(t, runsClient(t).Get(ctx, client.ObjectKey{Name: "str-flat"}, &pool))
	assert.Nil(t, pool.Spec.StressTest, "the pool is not written")
}

func runsClient(t *testing.T) client.Client {
	c, err := client.New(framework.C.Config, client.Options{Scheme: kit.Scheme})
	require.NoError(t, err)
	return c
}

func newestRunOrNil(t *testing.T, pool string) *v1alpha1.StressRun {
	var list v1alpha1.StressRunList
	require.NoError(t, runsClient(t).List(context.Background(), &list))
	var newest *v1alpha1.StressRun
	for i := range list.Items {
		if r := &list.Items[i]; r.Spec.Pool == pool && (newest == nil || newest.CreationTimestamp.Before(&r.CreationTimestamp)) {
			newest = r
		}
	}
	return newest
}

func newestRun(t *testing.T, pool string) *v1alpha1.StressRun {
	run := newestRunOrNil(t, pool)
	require.NotNil(t, run, fmt.Sprintf("no stress run of pool %s", pool))
	return run
}

// stress schedule --domains: the CronJob runs stress run --domains under the schedule's
// own ServiceAccount, which may start runs and read pools, not nodes. Run as that
// ServiceAccount, the command creates the run by domain (T4 is the webhook's then; no
// controller here takes it) rather than failing on the nodes it may not read.
func TestStressScheduleByDomainRunsAsItsServiceAccount(t *testing.T) {
	t.Parallel()
	superPodPool(t, "str-dsch", 2, 1)
	out := framework.C.MustLitepool(t, "stress", "schedule", "--pool", "str-dsch", "--cron", "0 2 * * 0", "--image", "npu-stress:1.0",
		"--tests", "npu", "--domains", "--plugin-image", "litepool:test", "-n", "default")
	assert.Contains(t, out, "cronjob/litepool-stress-str-dsch configured\n")
	cj, err := framework.C.Kube.BatchV1().CronJobs("default").Get(context.Background(), "litepool-stress-str-dsch", metav1.GetOptions{})
	require.NoError(t, err)
	command := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Command
	assert.Equal(t, "--domains", command[len(command)-1])

	r := framework.C.Kubectl(t, "", append([]string{"litepool", "--as", "system:serviceaccount:default:litepool-stress-str-dsch"},
		append(command[1:], "--controller-timeout", "1s")...)...)
	assert.Equal(t, 1, r.ExitCode)
	assert.Contains(t, r.Stderr, "--in-cluster: no litepool controller took stress run str-dsch-", "the run was created, not refused:\n"+r.Stderr)
	run := newestRun(t, "str-dsch")
	assert.True(t, run.Spec.Domains)
	require.NoError(t, runsClient(t).Delete(context.Background(), run))
}
