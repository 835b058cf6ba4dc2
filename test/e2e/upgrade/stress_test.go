package upgrade

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/pkg/stress"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// stressAgent plays the stress-test image: kwok keeps plain pods Running, so it ends
// each stress pod in litepool's namespace through the status subresource, Failed
// (exit 1) when the node is in fail and the message starts with the pod's test, and
// Succeeded elsewhere. Only the nodes in fail (failing, or "node?" for passing) are its.
func stressAgent(t *testing.T, fail map[string]string) {
	framework.CompletePods(t, stress.DefaultNamespace, "app.kubernetes.io/component=stress-test", func(p *corev1.Pod) (framework.PodEnd, bool) {
		msg, failing := fail[p.Spec.NodeName]
		if _, ours := fail[p.Spec.NodeName+"?"]; !ours && !failing {
			return framework.PodEnd{}, false // another test's pod
		}
		if failing && strings.HasPrefix(msg, p.Annotations[stress.AnnotationTest]+" ") {
			return framework.PodEnd{Exit: 1, Message: msg}, true
		}
		return framework.PodEnd{}, true
	})
}

// No controller runs in this cluster: the plugin creates the StressRun, sees no
// controller take it, runs the same reconciler itself and says so. The run's pods live
// in litepool's namespace, whatever -n says.
func TestStressRunMarksFailingNodesDegradedAndSkipsBusyOnes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	require.NoError(t, localwebhook.EnsureNamespace(ctx, framework.C.Kube, stress.DefaultNamespace))
	nodes := framework.AscendPool(t, "str-four", 4, target, software)
	// str-four-2 runs a training pod: busy.
	busy := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "str-busy-job", Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: nodes[1], Containers: []corev1.Container{{Name: "c", Image: "train:1"}}},
	}
	_, err := framework.C.Kube.CoreV1().Pods("default").Create(ctx, busy, metav1.CreateOptions{})
	require.NoError(t, err)
	stressAgent(t, map[string]string{nodes[2]: "hccs link 3 down", nodes[0] + "?": "", nodes[3] + "?": ""})

	// A dry run names the nodes it would test and creates nothing.
	r := framework.C.Litepool(t, "stress", "run", "--pool", "str-four", "--tests", "npu,hccs", "--image", "registry.example.com/npu-stress:1.0", "--dry-run=client")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.Contains(t, r.Stdout, "str-four-2   <none>   skipped      busy: 1 workload pod(s): default/str-busy-job\nstr-four-3   npu      would test   <none>\nstr-four-3   hccs     would test   <none>\n")

	r = framework.C.Litepool(t, "stress", "run", "--pool", "str-four", "--tests", "npu,hccs", "--image", "registry.example.com/npu-stress:1.0",
		"--timeout", "2m", "--controller-wait", "2s", "-n", "kube-system")
	assert.Equal(t, 1, r.ExitCode, r.Stdout)
	assert.Contains(t, r.Stdout, `NODE         TEST     RESULT    DETAIL
str-four-1   npu      passed    exit 0
str-four-1   hccs     passed    exit 0
str-four-2   <none>   skipped   busy: 1 workload pod(s): default/str-busy-job
str-four-3   npu      passed    exit 0
str-four-3   hccs     failed    exit 1 (Error): hccs link 3 down
str-four-4   npu      passed    exit 0
str-four-4   hccs     passed    exit 0
`)
	assert.Regexp(t, `^stress run str-four-\S+: no litepool controller took it within 2s: running it in this process; stopping this command leaves it for a controller to finish\n`, r.Stderr)
	assert.True(t, strings.HasSuffix(r.Stderr, "\npool str-four: 2 passed, 1 failed, 1 skipped\nerror: [T2] 1 node(s) failed the stress test and are now runwhere.ai/health=degraded: str-four-3\n"), r.Stderr)

	failed := framework.Node(t, nodes[2])
	assert.Equal(t, policy.HealthDegraded, failed.Labels[policy.LabelHealth])
	assert.Regexp(t, `^npu,hccs failed at \S+ \(stress run str-four-\S+\): hccs: exit 1 \(Error\): hccs link 3 down$`, failed.Annotations[policy.AnnotationStressResult])
	assert.Equal(t, policy.NodeDegraded, policy.StateOfNode(failed))
	assert.Equal(t, 1, eventsFor(t, nodes[2], "StressTestFailed"))
	assert.Equal(t, policy.HealthHealthy, framework.Node(t, nodes[0]).Labels[policy.LabelHealth])
	assert.Equal(t, policy.HealthHealthy, framework.Node(t, nodes[3]).Labels[policy.LabelHealth])
	assert.NotContains(t, framework.Node(t, nodes[1]).Labels, policy.LabelHealth, "a skipped node is not judged")

	// The pool shows the degraded node.
	var pool struct {
		Status struct {
			Phase       string
			FaultyNodes int
		}
	}
	require.NoError(t, json.Unmarshal([]byte(framework.C.MustLitepool(t, "get", "pool", "str-four", "-o", "json")), &pool))
	assert.Equal(t, "Degraded", pool.Status.Phase)
	assert.Equal(t, 1, pool.Status.FaultyNodes)

	// The failing test's pod is kept for its logs; passed tests' pods are gone; none
	// ran outside litepool's namespace.
	pods, err := framework.C.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=stress-test"})
	require.NoError(t, err)
	var left []string
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Spec.NodeName, "str-four-") && p.DeletionTimestamp == nil {
			left = append(left, p.Namespace+"/"+p.Annotations[stress.AnnotationNode]+"/"+p.Annotations[stress.AnnotationTest])
		}
	}
	assert.Equal(t, []string{stress.DefaultNamespace + "/str-four-3/hccs"}, left)
}

func TestStressScheduleCreatesACronJobWithItsOwnRBAC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	framework.AscendPool(t, "str-cron", 1, target, software)
	r := framework.C.Litepool(t, "stress", "schedule", "--pool", "str-cron", "--cron", "61 2 * * 0", "--image", "npu-stress:1.0")
	assert.Equal(t, 1, r.ExitCode)
	assert.Equal(t, `error: [T1] invalid --cron "61 2 * * 0": end of range (61) above maximum (59): 61; want five fields (minute hour day-of-month month day-of-week) such as "0 2 * * 0", or @hourly/@daily/@weekly/@monthly`+"\n", r.Stderr)
	r = framework.C.Litepool(t, "stress", "schedule", "--pool", "str-cron", "--cron", "0 2 * * 0", "--image", "npu-stress:1.0", "--tests", "npu,gpu")
	assert.Equal(t, "error: [T1] unknown stress test \"gpu\": choose from npu, hccs, roce, storage\n", r.Stderr)
	_, err := framework.C.Kube.BatchV1().CronJobs("default").Get(ctx, "litepool-stress-str-cron", metav1.GetOptions{})
	assert.Error(t, err, "refused schedules create nothing")

	// A time zone the API server would refuse in spec.schedule is refused up front...
	r = framework.C.Litepool(t, "stress", "schedule", "--pool", "str-cron", "--cron", "CRON_TZ=Mars/Olympus 0 2 * * 0", "--image", "npu-stress:1.0", "-n", "default")
	assert.Equal(t, `error: [T1] invalid --cron "CRON_TZ=Mars/Olympus 0 2 * * 0": unknown time zone "Mars/Olympus"; use an IANA zone name such as "CRON_TZ=Asia/Shanghai 0 2 * * 0" (it becomes the CronJob's spec.timeZone)`+"\n", r.Stderr)
	// ...and a CronJob the API server refuses takes back what was created before it.
	r = framework.C.Litepool(t, "stress", "schedule", "--pool", "str-cron", "--cron", "0 2 * * 0", "--image", "npu-stress:1.0", "--plugin-image", "", "-n", "default")
	assert.Equal(t, 1, r.ExitCode)
	assert.Contains(t, r.Stderr, "error: cronjob/litepool-stress-str-cron: CronJob.batch \"litepool-stress-str-cron\" is invalid")
	assert.Contains(t, r.Stderr, "object(s) created before it were removed\n")
	_, err = framework.C.Kube.CoreV1().ServiceAccounts("default").Get(ctx, "litepool-stress-str-cron", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the ServiceAccount was rolled back: %v", err)
	_, err = framework.C.Kube.RbacV1().ClusterRoleBindings().Get(ctx, "litepool-stress-str-cron", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the ClusterRoleBinding was rolled back: %v", err)

	out := framework.C.MustLitepool(t, "stress", "schedule", "--pool", "str-cron", "--cron", "0 2 * * 0", "--image", "npu-stress:1.0",
		"--tests", "npu,hccs", "--plugin-image", "litepool:test", "-n", "default")
	assert.Equal(t, `serviceaccount/litepool-stress-str-cron configured
clusterrole/litepool-stress configured
clusterrolebinding/litepool-stress-str-cron configured
cronjob/litepool-stress-str-cron configured
pool/str-cron spec.stressTest: image npu-stress:1.0, tests npu,hccs (the schedule is cronjob/litepool-stress-str-cron's)
`, out)
	cj, err := framework.C.Kube.BatchV1().CronJobs("default").Get(ctx, "litepool-stress-str-cron", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "0 2 * * 0", cj.Spec.Schedule)
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	assert.Equal(t, "litepool-stress-str-cron", pod.ServiceAccountName)
	assert.Equal(t, []string{"kubectl-litepool", "stress", "run", "--pool", "str-cron", "--in-cluster=true", "--tests", "npu,hccs",
		"--image", "npu-stress:1.0", "--timeout", "30m0s"}, pod.Containers[0].Command)

	// The ServiceAccount may start a stress run, and no more than that: litepool's
	// controller runs it.
	sa := "system:serviceaccount:default:litepool-stress-str-cron"
	for _, check := range [][]string{{"create", "stressruns.runwhere.ai", "yes"}, {"get", "pools.runwhere.ai", "yes"},
		{"create", "pods", "no"}, {"patch", "nodes", "no"}, {"delete", "nodes", "no"}} {
		r := framework.C.Kubectl(t, "", "auth", "can-i", check[0], check[1], "--as", sa)
		assert.Equal(t, check[2]+"\n", r.Stdout, "%s %s", check[0], check[1])
	}
	pool, err := poolclient.New(framework.C.Dynamic).Get(ctx, "str-cron")
	require.NoError(t, err)
	require.NotNil(t, pool.Spec.StressTest)
	assert.Empty(t, pool.Spec.StressTest.Schedule, "the schedule is the CronJob's alone") //nolint:staticcheck // SA1019: the deprecated field must be left empty
	assert.Equal(t, "npu-stress:1.0", pool.Spec.StressTest.Image)

	// Scheduling again updates the CronJob.
	framework.C.MustLitepool(t, "stress", "schedule", "--pool", "str-cron", "--cron", "@daily", "--image", "npu-stress:1.1", "-n", "default")
	cj, err = framework.C.Kube.BatchV1().CronJobs("default").Get(ctx, "litepool-stress-str-cron", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "@daily", cj.Spec.Schedule)
	assert.Nil(t, cj.Spec.TimeZone)

	// A CRON_TZ= prefix becomes spec.timeZone, which the API server accepts.
	framework.C.MustLitepool(t, "stress", "schedule", "--pool", "str-cron", "--cron", "CRON_TZ=Asia/Shanghai 0 3 * * *", "--image", "npu-stress:1.1", "-n", "default")
	cj, err = framework.C.Kube.BatchV1().CronJobs("default").Get(ctx, "litepool-stress-str-cron", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "0 3 * * *", cj.Spec.Schedule)
	require.NotNil(t, cj.Spec.TimeZone)
	assert.Equal(t, "Asia/Shanghai", *cj.Spec.TimeZone)
}
