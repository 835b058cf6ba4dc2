package attack

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// forgedBackup is a "saved" rollout and stress run that never ran, finished with
// made-up results, as kubectl get -o yaml would print them.
const forgedBackup = `apiVersion: v1
kind: List
items:
- apiVersion: runwhere.ai/v1alpha1
  kind: DriverRollout
  metadata: {name: at-restore-ro, uid: old-1, resourceVersion: "7", annotations: {runwhere.ai/force: "attack: forged history"}}
  spec: {nodes: [a100-node-1], version: "550.1", installer: {image: registry.example.com/installer:550.1}}
  status: {phase: Succeeded, progress: 1/1, total: 1, done: 1, message: every node runs 550.1}
- apiVersion: runwhere.ai/v1alpha1
  kind: StressRun
  metadata: {name: at-restore-sr, uid: old-2, resourceVersion: "8"}
  spec: {pool: train-a100, image: registry.example.com/gpu-stress:1.0, tests: [npu]}
  status: {phase: Succeeded, total: 2, passed: 2}
`

// A litepool-operator (exactly the role's rules) runs restore with a forged backup: it
// may create rollouts and runs, but not read the controller's Lease nor write status, so
// restore refuses before it creates anything.
func attackOperatorRestoresForgedStatus(t *testing.T) {
	const user = "attack-restore-operator"
	grant(t, user,
		rbacv1.PolicyRule{APIGroups: []string{"runwhere.ai"}, Resources: []string{"driverrollouts", "stressruns"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{"runwhere.ai"}, Resources: []string{"driverrollouts/status", "stressruns/status", "pools"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}})
	file := filepath.Join(t.TempDir(), "forged.yaml")
	require.NoError(t, os.WriteFile(file, []byte(forgedBackup), 0o600))
	res := framework.C.Litepool(t, "restore", "-f", file, "--as", user)
	assert.NotZero(t, res.ExitCode, "restore as a litepool-operator: %s", res.Stdout)
	assert.Contains(t, res.Stderr, "you may not read its Lease")
	for _, r := range []struct{ kind, name string }{{"driverrollouts", "at-restore-ro"}, {"stressruns", "at-restore-sr"}} {
		_, err := framework.C.Dynamic.Resource(v1alpha1.GroupVersion.WithResource(r.kind)).Get(ctx, r.name, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "%s/%s was not created: %v", r.kind, r.name, err)
	}
}
