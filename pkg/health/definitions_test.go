package health

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

var digest = "registry.example.com/reset@sha256:" + strings.Repeat("b", 64)

func TestParseDefinition(t *testing.T) {
	name, d, err := ParseDefinition(`reset={"image": "` + digest + `", "command": ["/reset", "--all"], "timeout": "5m"}`)
	require.NoError(t, err)
	assert.Equal(t, "reset", name)
	assert.Equal(t, Definition{Image: digest, Command: []string{"/reset", "--all"}, Timeout: &metav1.Duration{Duration: 300e9}}, d)
	for _, bad := range []string{`reset`, `={"image":"a:1"}`, `reset={"image":""}`, `reset={"image":"a:1","cmd":["x"]}`, `reset={"image":"UPPER/x:1"}`} {
		_, _, err := ParseDefinition(bad)
		assert.Error(t, err, bad)
	}
}

// Issue 28 item 4: a Pool's editor names a definition; the image and command of a
// privileged Job are the operator's. A pool that gives its own, or names one the
// operator did not define, holds its node out and runs nothing.
func TestRemediationRunsOnlyTheOperatorsDefinition(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spec   v1alpha1.RemediationSpec
		reason string
		msg    string
	}{
		{name: "the pool's own command", spec: v1alpha1.RemediationSpec{Image: "registry.example.com/reset:1", Command: []string{"/bin/sh", "-c", "chroot /host"}},
			reason: ReasonNoDefinition,
			msg:    `the pool's spec.health.remediation names no operator definition (it gives image "registry.example.com/reset:1", command ["/bin/sh" "-c" "chroot /host"]: a Pool no longer chooses what runs on its nodes): set spec.health.remediation.definition to one of reset: held out until released by hand`},
		{name: "an undefined name", spec: v1alpha1.RemediationSpec{Definition: "miner"}, reason: ReasonNoDefinition,
			msg: `the remediation definition "miner" (spec.health.remediation.definition) is not among the operator's (--health-definition of Deployment litepool-controller): choose one of reset: held out until released by hand`},
		{name: "the operator's definition", spec: v1alpha1.RemediationSpec{Definition: "reset", Image: "evil.example/ignored:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, kube := setup(t, []string{"registry.example.com/"}, member("n1", "7"), member("n2", "8"), member("n3", "8"), member("n4", "8"))
			r.Definitions = map[string]Definition{"reset": {Image: digest, Command: []string{"/reset"}}}
			ctx := context.Background()
			var pool v1alpha1.Pool
			require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
			pool.Spec.Health.Remediation = &tc.spec
			require.NoError(t, r.Client.Update(ctx, &pool))
			_, err := r.Reconcile(ctx, poolP1)
			require.NoError(t, err)
			require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
			e := pool.Status.NodeHealth[0]
			jobs, err := kube.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			if tc.reason != "" {
				assert.Equal(t, v1alpha1.NodeHealthHeldOut, e.State)
				assert.Equal(t, tc.reason, e.Reason)
				assert.Equal(t, tc.msg, e.Message)
				assert.Empty(t, jobs.Items, "nothing runs")
				return
			}
			assert.Equal(t, v1alpha1.NodeHealthRemediating, e.State)
			require.Len(t, jobs.Items, 1)
			c := jobs.Items[0].Spec.Template.Spec.Containers[0]
			assert.Equal(t, digest, c.Image, "the digest runs as given")
			assert.Equal(t, []string{"/reset"}, c.Command)
			assert.Equal(t, policy.SignalDeviceUnhealthy, e.Reason)
		})
	}
}

// Issue 39 bug 1: a pool that names only a re-check definition (no stress image at
// all) is re-checked by the definition's run, and a Holding entry is checked against
// that run; with neither a definition nor an image the node returns after the hold
// time, not re-checked. Before the fix the definition-only pool was never re-checked.
func TestARecheckDefinitionAloneIsEnough(t *testing.T) {
	for _, tc := range []struct {
		name    string
		recheck *v1alpha1.RecheckSpec
		wantRun bool
	}{
		{name: "a definition alone", recheck: &v1alpha1.RecheckSpec{Definition: "check"}, wantRun: true},
		{name: "neither a definition nor an image", wantRun: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No approved images: the definition is the only thing that may run.
			r, _ := setup(t, nil, member("n1", "8"), member("n2", "8"), member("n3", "8"), member("n4", "8"))
			r.Definitions = map[string]Definition{"check": {Image: digest, Command: []string{"/check"}}}
			ctx := context.Background()
			var pool v1alpha1.Pool
			require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
			pool.Spec.StressTest = nil
			pool.Spec.Health.Recheck = tc.recheck
			require.NoError(t, r.Client.Update(ctx, &pool))
			n1 := member("n1", "8")
			n1.Spec.Taints = []corev1.Taint{policy.QuarantineTaint(policy.SignalDeviceUnhealthy)}
			require.NoError(t, r.Client.Update(ctx, n1.DeepCopy()))
			_, err := r.Kube.CoreV1().Nodes().Update(ctx, n1, metav1.UpdateOptions{})
			require.NoError(t, err)
			pool.Status.NodeHealth = []v1alpha1.NodeHealthStatus{{Node: "n1", State: v1alpha1.NodeHealthQuarantined,
				Reason: policy.SignalDeviceUnhealthy, Since: metav1.Time{Time: now}, FaultedAt: &metav1.Time{Time: now}}}
			require.NoError(t, r.Client.Status().Update(ctx, &pool))

			_, err = r.Reconcile(ctx, poolP1)
			require.NoError(t, err)
			require.NoError(t, r.Client.Get(ctx, client.ObjectKey{Name: "p1"}, &pool))
			e := pool.Status.NodeHealth[0]
			var runs v1alpha1.StressRunList
			require.NoError(t, r.Client.List(ctx, &runs))
			if !tc.wantRun {
				assert.Equal(t, v1alpha1.NodeHealthHolding, e.State)
				assert.Contains(t, e.Message, "not re-checked")
				assert.Empty(t, runs.Items)
				return
			}
			assert.Equal(t, v1alpha1.NodeHealthRechecking, e.State, e.Message)
			require.Len(t, runs.Items, 1)
			assert.Equal(t, e.StressRun, runs.Items[0].Name)
			assert.Equal(t, digest, runs.Items[0].Spec.Image, "the definition's image")
			assert.Equal(t, []string{"/check"}, runs.Items[0].Spec.Command)
		})
	}
}
