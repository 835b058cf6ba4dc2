package stress

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
)

var schedule = []string{"schedule", "--pool", "pool-a", "--cron", "0 2 * * 0", "--image", "img", "--tests", "npu", "--plugin-image", "litepool:test"}

const configured = `serviceaccount/litepool-stress-pool-a configured
clusterrole/litepool-stress configured
clusterrolebinding/litepool-stress-pool-a configured
cronjob/litepool-stress-pool-a configured
`

func stressCmd(f *kittest.Factory, args ...string) kittest.Result {
	return kittest.Run(f, NewCmdStress, "", args...)
}

func poolA() *v1alpha1.Pool {
	return &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "pool-a", UID: "uid-a"}}
}

// scheduleObjects counts what a schedule leaves: ServiceAccounts, ClusterRoles,
// ClusterRoleBindings, CronJobs.
func scheduleObjects(t *testing.T, f *kittest.Factory) [4]int {
	t.Helper()
	ctx := context.Background()
	sas, err := f.Kube.CoreV1().ServiceAccounts(kittest.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	roles, err := f.Kube.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	bindings, err := f.Kube.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	cjs, err := f.Kube.BatchV1().CronJobs(kittest.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	return [4]int{len(sas.Items), len(roles.Items), len(bindings.Items), len(cjs.Items)}
}

func TestStressSchedule(t *testing.T) {
	f := kittest.NewFactory(t, poolA())
	r := stressCmd(f, schedule...)
	require.NoError(t, r.Err)
	assert.Equal(t, configured+"pool/pool-a spec.stressTest: image img, tests npu (the schedule is cronjob/litepool-stress-pool-a's)\n", r.Out)
	assert.Empty(t, r.ErrOut)
	assert.Equal(t, [4]int{1, 1, 1, 1}, scheduleObjects(t, f))
	st := f.Pool(t, "pool-a").Spec.StressTest
	require.NotNil(t, st)
	assert.Empty(t, st.Schedule, "the schedule is the CronJob's alone") //nolint:staticcheck // SA1019: the deprecated field must be left empty
	assert.Equal(t, "img", st.Image)
	assert.Equal(t, []string{`StressTestScheduled: stress tests npu scheduled "0 2 * * 0" with image img`}, f.Events(t))

	// Again: the objects exist and are updated; nothing new is created.
	r = stressCmd(f, append(schedule[:4:4], "@daily", "--image", "img:2")...)
	require.NoError(t, r.Err)
	assert.Equal(t, [4]int{1, 1, 1, 1}, scheduleObjects(t, f))
	cj, err := f.Kube.BatchV1().CronJobs(kittest.Namespace).Get(context.Background(), "litepool-stress-pool-a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "@daily", cj.Spec.Schedule)
}

func TestStressScheduleDryRunAndOutput(t *testing.T) {
	for _, tc := range []struct {
		name        string
		args        []string
		out, errOut string
		events      int
	}{
		{"client dry run: the objects as YAML, as always", []string{"--dry-run=client"}, "", "", 0},
		{"server dry run", []string{"--dry-run=server"},
			strings.ReplaceAll(configured, "configured", "configured (server dry run)") + "pool/pool-a spec.stressTest: image img, tests npu (the schedule is cronjob/litepool-stress-pool-a's)\n", "", 0},
		{"-o name: the objects' names, what is said on stderr", []string{"--dry-run=client", "-o", "name"},
			"serviceaccount/litepool-stress-pool-a\nclusterrole.rbac.authorization.k8s.io/litepool-stress\nclusterrolebinding.rbac.authorization.k8s.io/litepool-stress-pool-a\ncronjob.batch/litepool-stress-pool-a\npool.runwhere.ai/pool-a\n",
			"pool/pool-a spec.stressTest: image img, tests npu (the schedule is cronjob/litepool-stress-pool-a's)\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := kittest.NewFactory(t, poolA())
			r := stressCmd(f, append(schedule, tc.args...)...)
			require.NoError(t, r.Err)
			if tc.out == "" {
				assert.Equal(t, 4, strings.Count(r.Out, "\n---\n")+1)
				assert.Contains(t, r.Out, "kind: CronJob\n")
			} else {
				assert.Equal(t, tc.out, r.Out)
			}
			assert.Equal(t, tc.errOut, r.ErrOut)
			assert.Equal(t, [4]int{}, scheduleObjects(t, f), "a dry run creates nothing")
			assert.Nil(t, f.Pool(t, "pool-a").Spec.StressTest)
			assert.Empty(t, f.Events(t))
		})
	}
}

// Under a client dry run, -o prints the Pool as the schedule would leave it.
func TestStressScheduleClientDryRunPrintsThePoolAsItWouldBe(t *testing.T) {
	f := kittest.NewFactory(t, poolA())
	r := stressCmd(f, append(schedule, "--dry-run=client", "-o", "jsonpath={.kind}/{.metadata.name}{.spec.stressTest} ")...)
	require.NoError(t, r.Err)
	assert.Equal(t, "ServiceAccount/litepool-stress-pool-a ClusterRole/litepool-stress ClusterRoleBinding/litepool-stress-pool-a CronJob/litepool-stress-pool-a "+
		`Pool/pool-a{"image":"img","tests":["npu"]} `, r.Out)
	assert.Nil(t, f.Pool(t, "pool-a").Spec.StressTest)
}

// A schedule the API server refuses leaves nothing behind: the ServiceAccount and RBAC
// created before the CronJob are removed again.
func TestStressScheduleRollsBackWhatItCreated(t *testing.T) {
	f := kittest.NewFactory(t, poolA())
	f.Kube.PrependReactor("create", "cronjobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "CronJob"}, "litepool-stress-pool-a", nil)
	})
	r := stressCmd(f, schedule...)
	require.EqualError(t, r.Err, `cronjob/litepool-stress-pool-a: CronJob.batch "litepool-stress-pool-a" is invalid; the 3 object(s) created before it were removed`)
	assert.Equal(t, strings.Join(strings.Split(configured, "\n")[:3], "\n")+"\n", r.Out)
	assert.Empty(t, r.ErrOut)
	assert.Equal(t, [4]int{}, scheduleObjects(t, f))
	assert.Nil(t, f.Pool(t, "pool-a").Spec.StressTest, "the pool is not touched")
	assert.Empty(t, f.Events(t))
}

// Objects that existed before the schedule stay when it is rolled back.
func TestStressScheduleRollBackKeepsWhatExisted(t *testing.T) {
	existing := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "litepool-stress-pool-a", Namespace: kittest.Namespace}}
	f := kittest.NewFactory(t, poolA(), existing)
	f.Kube.PrependReactor("create", "clusterrolebindings", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}, "litepool-stress-pool-a", nil)
	})
	r := stressCmd(f, schedule...)
	require.Error(t, r.Err)
	assert.True(t, strings.HasPrefix(r.Err.Error(), "clusterrolebinding/litepool-stress-pool-a: "), r.Err.Error())
	assert.True(t, strings.HasSuffix(r.Err.Error(), "; the 1 object(s) created before it were removed"), r.Err.Error())
	assert.Equal(t, [4]int{1, 0, 0, 0}, scheduleObjects(t, f))
}

func TestStressScheduleValidate(t *testing.T) {
	o := &StressScheduleOptions{Pool: "train-snt9b", Cron: "0 2 * * 0", Image: "s:1", Tests: []string{"npu"}, Timeout: time.Minute}
	assert.NoError(t, o.Validate())
	for cron, msg := range map[string]string{
		"0 2 * *":    `[T1] invalid --cron "0 2 * *": expected exactly 5 fields, found 4: [0 2 * *]`,
		"0 25 * * *": `[T1] invalid --cron "0 25 * * *": end of range (25) above maximum (23): 25`,
		"@fortnight": `[T1] invalid --cron "@fortnight": unrecognized descriptor: @fortnight`,
	} {
		o.Cron = cron
		err := o.Validate()
		if assert.Error(t, err, cron) {
			assert.True(t, strings.HasPrefix(err.Error(), msg), "%s: %v", cron, err)
		}
	}
}

func TestStressScheduleTimeZoneGoesToSpecTimeZone(t *testing.T) {
	o := &StressScheduleOptions{Pool: "pool-a", Cron: "CRON_TZ=Asia/Shanghai 0 2 * * 0", Image: "img", Tests: []string{"npu"}, Timeout: time.Minute, namespace: "ops"}
	require.NoError(t, o.Validate())
	_, _, _, cj := o.objects()
	assert.Equal(t, "0 2 * * 0", cj.Spec.Schedule)
	require.NotNil(t, cj.Spec.TimeZone)
	assert.Equal(t, "Asia/Shanghai", *cj.Spec.TimeZone)
}

// spec.stressTest.schedule was written here and read by nothing: the CronJob is the
// schedule. A pool that still carries one has it cleared; the image and tests, which
// stress run reads, are kept.
func TestStressScheduleClearsTheDeprecatedPoolSchedule(t *testing.T) {
	pool := poolA()
	pool.Spec.StressTest = &v1alpha1.StressTestSpec{Schedule: "@hourly", Image: "old", Tests: []v1alpha1.StressTest{"hccs"}} //nolint:staticcheck // SA1019: a pool written before the deprecation
	f := kittest.NewFactory(t, pool)
	r := stressCmd(f, schedule...)
	require.NoError(t, r.Err)
	assert.Equal(t, &v1alpha1.StressTestSpec{Image: "img", Tests: []v1alpha1.StressTest{"npu"}}, f.Pool(t, "pool-a").Spec.StressTest)
	cj, err := f.Kube.BatchV1().CronJobs(kittest.Namespace).Get(t.Context(), "litepool-stress-pool-a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "0 2 * * 0", cj.Spec.Schedule)
}
