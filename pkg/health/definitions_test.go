package health

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
