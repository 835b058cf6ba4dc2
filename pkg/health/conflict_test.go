package health

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// One lost status write (the status controller wrote the Pool meanwhile) makes no
// second remediation Job or re-check run, and once the node is back in service
// nothing of its episode is left.
func TestOneConflictLeavesOneRunAndNothingAfterReturn(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	pool := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "p1", UID: "pool-uid"}, Spec: v1alpha1.PoolSpec{
		Health:     &v1alpha1.HealthPolicy{Remediation: &v1alpha1.RemediationSpec{Definition: "reset"}},
		StressTest: &v1alpha1.StressTestSpec{Image: "registry.example.com/stress:1"}}}
	objs := []client.Object{pool}
	var kobjs []runtime.Object
	for _, n := range []*corev1.Node{member("n1", "7"), member("n2", "8"), member("n3", "8"), member("n4", "8")} {
		objs = append(objs, n.DeepCopy())
		kobjs = append(kobjs, n.DeepCopy())
	}
	var conflicts atomic.Int32
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&v1alpha1.Pool{}, &corev1.Node{}, &v1alpha1.StressRun{}).
		WithInterceptorFuncs(interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if _, ok := obj.(*v1alpha1.Pool); ok && conflicts.Load() > 0 {
				conflicts.Add(-1)
				return apierrors.NewConflict(schema.GroupResource{Group: "runwhere.ai", Resource: "pools"}, obj.GetName(), nil)
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		}}).Build()
	kube := kubefake.NewClientset(kobjs...)
	clock := now
	r := &Reconciler{Client: c, Kube: kube, Recorder: &events.Recorder{Client: kube}, Namespace: "litepool-system", Images: []string{"registry.example.com/"}, Now: func() time.Time { return clock },
		Definitions: map[string]Definition{"reset": {Image: "registry.example.com/reset@sha256:" + strings.Repeat("a", 64), Command: []string{"/reset"}}}}
	ctx := context.Background()
	pass := func(conflict bool) {
		t.Helper()
		if conflict {
			conflicts.Store(1)
		}
		clock = clock.Add(time.Second)
		_, err := r.Reconcile(ctx, poolP1)
		if conflict {
			require.True(t, apierrors.IsConflict(err), "a lost write is returned for the rate limiter, got %v", err)
		} else {
			require.NoError(t, err)
		}
		assert.Zero(t, conflicts.Load(), "the injected conflict was met")
	}
	told := func() (taint bool, events int) {
		t.Helper()
		n, err := kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		require.NoError(t, err)
		for _, tn := range n.Spec.Taints {
			taint = taint || tn.Key == policy.TaintQuarantine
		}
		for _, a := range kube.Actions() {
			events += map[bool]int{true: 1}[a.GetVerb() == "create" && a.GetResource().Resource == "events"]
		}
		return taint, events
	}
	entry := func() v1alpha1.NodeHealthStatus {
		t.Helper()
		var p v1alpha1.Pool
		require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "p1"}, &p))
		require.Len(t, p.Status.NodeHealth, 1)
		return p.Status.NodeHealth[0]
	}
	jobs := func() []batchv1.Job {
		l, err := kube.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		return l.Items
	}
	jobNames := func() (names []string) {
		for _, j := range jobs() {
			names = append(names, j.Name)
		}
		return names
	}
	runs := func() []v1alpha1.StressRun {
		var l v1alpha1.StressRunList
		require.NoError(t, c.List(ctx, &l))
		return l.Items
	}
	runNames := func() (names []string) {
		for _, r := range runs() {
			names = append(names, r.Name)
		}
		return names
	}

	// Quarantined, and the remediation Job made, with the write of both lost once.
	pass(true)
	taint, events := told()
	assert.False(t, taint, "no taint for an entry not stored")
	assert.Zero(t, events, "no Event for an entry not stored")
	pass(false)
	taint, events = told()
	assert.True(t, taint)
	assert.Equal(t, 1, events, "one Event for the one move stored")
	require.Equal(t, v1alpha1.NodeHealthRemediating, entry().State)
	require.Len(t, jobNames(), 1, "one remediation Job after one lost status write")
	job := jobs()[0]
	assert.Equal(t, entry().Job, job.Name)
	require.NotNil(t, metav1.GetControllerOf(&job), "the Pool owns its remediation Job")
	assert.Equal(t, "pool-uid", string(metav1.GetControllerOf(&job).UID))
	assert.NotNil(t, job.Spec.TTLSecondsAfterFinished)

	// The Job succeeds and the device comes back: the re-check, its write lost once.
	job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	_, err := kube.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, &job, metav1.UpdateOptions{})
	require.NoError(t, err)
	var n1 corev1.Node
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "n1"}, &n1))
	n1.Status.Allocatable["huawei.com/Ascend910"] = resource.MustParse("8")
	require.NoError(t, c.Status().Update(ctx, &n1))
	pass(true)
	pass(false)
	require.Equal(t, v1alpha1.NodeHealthRechecking, entry().State)
	require.Len(t, runNames(), 1, "one re-check run after one lost status write")
	assert.Equal(t, entry().StressRun, runs()[0].Name)

	// The run passes; after the hold time the node returns and nothing is left.
	run := runs()[0]
	run.Status.Phase = v1alpha1.StressRunSucceeded
	run.Status.Results = []v1alpha1.StressNodeResult{{Node: "n1", Outcome: v1alpha1.StressOutcomePassed}}
	require.NoError(t, c.Status().Update(ctx, &run))
	pass(false)
	require.Equal(t, v1alpha1.NodeHealthHolding, entry().State)
	clock = clock.Add(policy.HealthSettingsOf(pool).HoldTime)
	pass(false)
	require.Equal(t, v1alpha1.NodeHealthHealthy, entry().State)
	assert.Empty(t, runNames(), "no re-check run left once the node is back")
	assert.Empty(t, jobNames(), "no remediation Job left once the node is back")
}
