package attack

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// Issue 41's row on jobs.runwhere.ai: the entry writes an exclusive pool's toleration
// into the template of a Kueue Job (the label kueue.x-k8s.io/queue-name is all it
// looks at: any Job creator can set it, and no Kueue runs here). It must give no
// toleration that P1 would not give the Job's pods: the template is judged by the same
// pod rules, P4 included.

const jobTenant = "job-tenant" // create and get jobs in at-foreign, nothing else

func grantJobsIn(t *testing.T, namespace, user string) {
	t.Helper()
	kube := framework.C.Kube
	rules := []rbacv1.PolicyRule{{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create", "get"}}}
	_, err := kube.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "attack-" + user}, Rules: rules}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "attack-" + user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "attack-" + user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.WaitGranted(t, namespace, user, rules)
}

// queuedJobOf is a Job marked as Kueue's, not suspended (no Kueue runs to start it),
// whose development pod asks for 8 GPUs.
func queuedJobOf(name string, podLabels, nodeSelector map[string]string) *batchv1.Job {
	pod := gpuPod("", "8")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.NodeSelector = nodeSelector
	podLabels[policy.LabelWorkloadType] = "development"
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kueue.x-k8s.io/queue-name": exclPool}},
		Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: pod.Spec}}}
}

// failedCreate waits for the Job controller's FailedCreate event on the Job and
// returns its message.
func failedCreate(t *testing.T, job string) string {
	t.Helper()
	var msg string
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := framework.C.Kube.CoreV1().Events(foreignNS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Job,involvedObject.name=" + job + ",reason=FailedCreate"})
		if err != nil || len(evs.Items) == 0 {
			return false, err
		}
		msg = evs.Items[0].Message
		return true, nil
	}), "the Job controller never reported a refused pod of Job %s", job)
	return msg
}

func attackJobTemplateToleration(t *testing.T) {
	grantJobsIn(t, foreignNS, jobTenant)
	w := &framework.Warnings{}
	cfg := asConfig(jobTenant)
	cfg.WarningHandler = w
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	for _, tc := range []struct {
		name               string
		labels, nodeSelect map[string]string
	}{
		{"tol-by-label", map[string]string{policy.LabelPool: exclPool}, nil},
		{"tol-by-selector", map[string]string{}, map[string]string{policy.LabelPool: exclPool}},
	} {
		w.Take() // this Job's warnings only
		_, err := kube.BatchV1().Jobs(foreignNS).Create(ctx, queuedJobOf(tc.name, tc.labels, tc.nodeSelect), metav1.CreateOptions{})
		require.NoError(t, err, "%s: the Job is admitted: its pods meet the pod rules", tc.name)
		t.Cleanup(func() {
			_ = framework.C.Kube.BatchV1().Jobs(foreignNS).Delete(context.Background(), tc.name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		})
		warned := strings.Join(w.Take(), "\n")
		assert.Contains(t, warned, "litepool left the Job's pod template unchanged: its pods will be refused at creation: [P4] ", "%s: the refusal its pods will meet is said at once", tc.name)
		assert.Contains(t, warned, `may not use pool "at-excl"`, tc.name)
		stored, err := framework.C.Kube.BatchV1().Jobs(foreignNS).Get(ctx, tc.name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Empty(t, stored.Spec.Template.Spec.Tolerations, "%s: no toleration of a pool the namespace may not use", tc.name)
		assert.Equal(t, tc.nodeSelect, stored.Spec.Template.Spec.NodeSelector, "%s: the template is unchanged", tc.name)
		msg := failedCreate(t, tc.name)
		t.Logf("%s: %s", tc.name, msg)
		assert.Contains(t, msg, `may not use pool "at-excl"`, "%s: its pods are refused (P4)", tc.name)
		pods, err := framework.C.Kube.CoreV1().Pods(foreignNS).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + tc.name})
		require.NoError(t, err)
		assert.Empty(t, pods.Items, "%s: no pod of the Job was made", tc.name)
	}
	for _, n := range exclNodes {
		assert.Empty(t, podsOn(t, foreignNS, n), "no pod of the namespace on %s", n)
	}

	// The control: the same Job from the namespace the pool admits is given both.
	own := queuedJobOf("tol-admitted", map[string]string{policy.LabelPool: exclPool}, nil)
	own.Spec.Suspend = ptr.To(true) // its pods are not this row's business
	got, err := framework.C.Kube.BatchV1().Jobs(ownNS).Create(ctx, own, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = framework.C.Kube.BatchV1().Jobs(ownNS).Delete(context.Background(), own.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	})
	assert.Equal(t, []corev1.Toleration{policy.ExclusivePoolToleration(exclPool)}, got.Spec.Template.Spec.Tolerations)
	assert.Equal(t, map[string]string{policy.LabelPool: exclPool}, got.Spec.Template.Spec.NodeSelector)
}
