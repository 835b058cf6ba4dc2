package health

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/health"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// componentHealthFlags are the controller's health flags as deploy/webhook's health
// component renders them (kubectl kustomize of the base plus the component).
func componentHealthFlags(t *testing.T) []string {
	t.Helper()
	rendered := framework.RenderWithComponent(t, "health")
	var flags []string
	for _, doc := range strings.Split(rendered, "\n---\n") {
		var d appsv1.Deployment
		if yaml.Unmarshal([]byte(doc), &d) != nil || d.Kind != "Deployment" || d.Name != "litepool-controller" {
			continue
		}
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			if strings.HasPrefix(a, "--health-images=") || strings.HasPrefix(a, "--health-definition=") {
				flags = append(flags, a)
			}
		}
	}
	require.Len(t, flags, 2, "the component sets --health-images and one --health-definition")
	return flags
}

// Issue 28 item 4: a user who may only update Pools sets spec.health.remediation with
// an approved image and a command of their own. Nothing of theirs runs: with no
// definition named, the node is held out and no Job is made; naming the operator's
// definition runs the operator's image and command, whatever else the Pool says. The
// controller runs with the flags the shipped health component sets.
func TestAPoolEditorCannotChooseWhatRunsPrivileged(t *testing.T) {
	flags := componentHealthFlags(t)
	_, def, err := health.ParseDefinition(strings.TrimPrefix(flags[1], "--health-definition="))
	require.NoError(t, err)
	r := startControllerWith(t, flags...)
	nodes := healthPool(t, "hl-def", 4, &v1alpha1.HealthPolicy{MaxQuarantinedPercent: 50})
	ctx := context.Background()

	bindPoolEditor(t)
	cfg := rest.CopyConfig(framework.C.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "mallory", Groups: []string{"e2e-pool-editors"}}
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	mallory := poolclient.New(dyn)
	theirs := []string{"/bin/sh", "-c", "chroot /host sh -c 'id > /tmp/owned'"}
	setRemediation := func(spec v1alpha1.RemediationSpec) {
		t.Helper()
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p, err := mallory.Get(ctx, "hl-def")
			if err != nil {
				return err
			}
			p.Spec.Health.Remediation = &spec
			_, err = mallory.Update(ctx, p, metav1.UpdateOptions{})
			return err
		}), "mallory may update Pools")
	}

	// Their own command, with an image the operator approved (--health-images, for
	// re-checks): held out, nothing runs. Before definitions, this ran privileged.
	setRemediation(v1alpha1.RemediationSpec{Image: stressImage, Command: theirs})
	setCondition(t, nodes[0], "SysLogsXIDError", corev1.ConditionTrue)
	e := waitState(t, r, "hl-def", nodes[0], v1alpha1.NodeHealthHeldOut)
	assert.Equal(t, health.ReasonNoDefinition, e.Reason)
	assert.Contains(t, e.Message, "names no operator definition")
	assert.Contains(t, e.Message, "set spec.health.remediation.definition to one of npu-reset")
	assert.Empty(t, jobsOn(t, nodes[0]), "no Job for the pool editor's command")

	// The operator's definition named, their image and command still in the spec: the
	// Job runs the definition.
	setRemediation(v1alpha1.RemediationSpec{Definition: "npu-reset", Image: "registry.example.com/npu-stress:evil", Command: theirs})
	setCondition(t, nodes[1], "SysLogsXIDError", corev1.ConditionTrue)
	var jobs []string
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		jobs = jobsOn(t, nodes[1])
		return len(jobs) > 0, nil
	}), "no remediation Job:\n%s", r.Logs.String())
	require.Len(t, jobs, 1)
	job, err := framework.C.Kube.BatchV1().Jobs(localwebhook.Namespace).Get(ctx, jobs[0], metav1.GetOptions{})
	require.NoError(t, err)
	c := job.Spec.Template.Spec.Containers[0]
	assert.Equal(t, def.Image, c.Image, "the operator's image, by digest")
	assert.Equal(t, def.Command, c.Command, "the operator's command")
	assert.Equal(t, false, *job.Spec.Template.Spec.AutomountServiceAccountToken)
	assert.Equal(t, "Pool", metav1.GetControllerOf(job).Kind)
	assert.Empty(t, jobsOn(t, nodes[0]))
}

func bindPoolEditor(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	name := "e2e-pool-editor"
	_, err := framework.C.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"pools"}, Verbs: []string{"get", "list", "update", "patch"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = framework.C.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "e2e-pool-editors"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = framework.C.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = framework.C.Kube.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	for _, verb := range []string{"get", "update"} {
		framework.WaitAuthorized(t, "mallory", []string{"e2e-pool-editors"}, verb, v1alpha1.GroupVersion.Group, "pools")
	}
}

// jobsOn are the Jobs in litepool's namespace pinned to node.
func jobsOn(t *testing.T, node string) []string {
	t.Helper()
	list, err := framework.C.Kube.BatchV1().Jobs(localwebhook.Namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, j := range list.Items {
		if j.Spec.Template.Spec.NodeName == node {
			out = append(out, j.Name)
		}
	}
	return out
}

// Issue 39 bug 1: a pool that follows docs/health.md and names only an operator's
// re-check definition (spec.health.recheck.definition, no stress image anywhere) has
// its node re-checked by that definition's run and returned when it passes. Before the
// fix the re-check was skipped for want of a pool image and the node cycled between
// Holding and Rechecking, tainted, with no run ever made.
func TestARecheckByDefinitionAloneRuns(t *testing.T) {
	check := `{"image": "registry.example.com/npu-check@sha256:` + strings.Repeat("c", 64) + `", "command": ["/check", "--quick"]}`
	_, def, err := health.ParseDefinition("npu-check=" + check)
	require.NoError(t, err)
	// No --health-images: only the definition may run.
	r := startControllerWith(t, "--health-definition=npu-check="+check)
	startStressAgent(t)
	nodes := healthPool(t, "hl-recheck-def", 4, &v1alpha1.HealthPolicy{HoldTime: seconds(2), MaxQuarantinedPercent: 50,
		Recheck: &v1alpha1.RecheckSpec{Definition: "npu-check"}})
	pools := poolclient.New(framework.C.Dynamic)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pools.Get(context.Background(), "hl-recheck-def")
		if err != nil {
			return err
		}
		p.Spec.StressTest = nil // the definition alone
		_, err = pools.Update(context.Background(), p, metav1.UpdateOptions{})
		return err
	}))
	n := nodes[0]
	setAllocatable(t, n, 7)
	waitState(t, r, "hl-recheck-def", n, v1alpha1.NodeHealthQuarantined)
	waitTaint(t, n, true)
	setAllocatable(t, n, 8)
	e := waitState(t, r, "hl-recheck-def", n, v1alpha1.NodeHealthHolding)
	require.NotEmpty(t, e.StressRun, "passed a re-check run: %+v", e)
	var run v1alpha1.StressRun
	u, err := framework.C.Dynamic.Resource(v1alpha1.StressRunResource).Get(context.Background(), e.StressRun, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, fromUnstructured(u.Object, &run))
	assert.Equal(t, def.Image, run.Spec.Image, "the definition's image")
	assert.Equal(t, def.Command, run.Spec.Command, "the definition's command")
	assert.Equal(t, []string{n}, run.Spec.Nodes)
	assert.Equal(t, v1alpha1.StressRunSucceeded, run.Status.Phase)
	e = waitState(t, r, "hl-recheck-def", n, v1alpha1.NodeHealthHealthy)
	waitTaint(t, n, false)
	require.NotNil(t, e)
	assert.Equal(t, []v1alpha1.NodeHealthState{"Quarantined", "Rechecking", "Holding", "Healthy"}, states(e.History))
}
