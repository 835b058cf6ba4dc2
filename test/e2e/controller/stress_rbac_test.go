package controller

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// The old protocol's shapes of runwhere.ai/stress-run: a run naming kube-system, the
// writer's own image and command, in every state the old controller acted on.
var oldStressRunAnnotations = []string{
	`{"id":"evil-1","image":"evil.example/root:1","command":["sh","-c","cat /host/etc/shadow"],"tests":["npu"],"namespace":"kube-system","timeout":"1m","state":"Pending"}`,
	`{"id":"evil-2","image":"evil.example/root:1","command":["sh"],"tests":["npu"],"namespace":"kube-system","timeout":"1m"}`,
	`{"id":"evil-3","image":"evil.example/root:1","tests":["npu","hccs"],"namespace":"default","timeout":"1m","state":"Running","keepPods":true}`,
}

// A user who may only patch Pools writes every shape the old stress-run annotation
// took (kube-system, their own image and command): the controller reconciles the Pool
// and no pod is created anywhere, no StressRun either. The same user may not create a
// StressRun.
func TestPoolAnnotationsStartNoStressPods(t *testing.T) {
	certs, err := localwebhook.NewCerts(t.TempDir())
	require.NoError(t, err)
	r := startReplica(t, certs)
	stressLeader(t, r)
	stressPool(t, "ctl-rbac", 2)
	const user = "e2e-pool-patcher"
	grant(t, user, []rbacv1.PolicyRule{{APIGroups: []string{"runwhere.ai"}, Resources: []string{"pools"}, Verbs: []string{"get", "patch"}}})
	created := watchNewPods(t)

	for i, shape := range oldStressRunAnnotations {
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"annotations": map[string]string{"runwhere.ai/stress-run": shape}},
			// A spec change too, so that the controller's reconcile of this very patch
			// is observable (status.observedGeneration).
			"spec": map[string]any{"description": "patched " + string(rune('a'+i))},
		})
		require.NoError(t, err)
		res := framework.C.Kubectl(t, "", "--as", user, "patch", "pool", "ctl-rbac", "--type", "merge", "-p", string(patch))
		require.Equal(t, 0, res.ExitCode, "the user may patch pools: %s", res.Stderr)
		waitPoolObserved(t, "ctl-rbac", r)
	}
	assert.Empty(t, created(), "no pod was created anywhere")
	runs, err := framework.C.Dynamic.Resource(v1alpha1.StressRunResource).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, u := range runs.Items {
		assert.NotEqual(t, "ctl-rbac", u.Object["spec"].(map[string]any)["pool"], "no StressRun was made from an annotation")
	}
	pool, err := poolclient.New(framework.C.Dynamic).Get(context.Background(), "ctl-rbac")
	require.NoError(t, err)
	assert.Equal(t, oldStressRunAnnotations[len(oldStressRunAnnotations)-1], pool.Annotations["runwhere.ai/stress-run"], "the annotation is nobody's order: left as written")

	res := framework.C.Kubectl(t, stressRunYAML("ctl-rbac-x", "ctl-rbac"), "--as", user, "create", "-f", "-")
	assert.NotEqual(t, 0, res.ExitCode)
	assert.Contains(t, res.Stderr, `stressruns.runwhere.ai is forbidden: User "e2e-pool-patcher" cannot create resource "stressruns"`)
}

// A user bound to the operator role creates a StressRun with plain kubectl; the
// controller completes it, and `kubectl get stressruns` shows its progress.
func TestOperatorStartsAStressRunAndKubectlGetShowsIt(t *testing.T) {
	certs, err := localwebhook.NewCerts(t.TempDir())
	require.NoError(t, err)
	r := startReplica(t, certs)
	stressLeader(t, r)
	nodes := stressPool(t, "ctl-sop", 2)
	const user = "e2e-stress-operator"
	bindOperator(t, user)
	var release atomic.Bool
	stopAgent := playStress(t, "ctl-sop-", map[string]string{}, &release)
	defer stopAgent()

	res := framework.C.Kubectl(t, stressRunYAML("ctl-sop-run", "ctl-sop"), "--as", user, "create", "-f", "-")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	assert.Equal(t, "stressrun.runwhere.ai/ctl-sop-run created\n", res.Stdout)

	get := func() [][]string {
		res := framework.C.Kubectl(t, "", "--as", user, "get", "stressruns", "ctl-sop-run")
		require.Equal(t, 0, res.ExitCode, res.Stderr)
		var rows [][]string
		for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
			rows = append(rows, strings.Fields(line))
		}
		return rows
	}
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		return len(stressPods(t, "ctl-sop-")) == len(nodes), nil
	}), r.Logs.String())
	rows := get()
	require.Len(t, rows, 2)
	require.Len(t, rows[1], 7, "every column has a value: %q", rows[1])
	assert.Equal(t, []string{"NAME", "POOL", "PHASE", "PASSED", "FAILED", "TOTAL", "AGE"}, rows[0])
	assert.Equal(t, []string{"ctl-sop-run", "ctl-sop", "Running", "0", "0", "2"}, rows[1][:6])

	release.Store(true)
	waitStressRun(t, "ctl-sop-run", v1alpha1.StressRunSucceeded, r)
	rows = get()
	assert.Equal(t, []string{"ctl-sop-run", "ctl-sop", "Succeeded", "2", "0", "2"}, rows[1][:6])
	assertNoStressPodsOutside(t)
}

func stressRunYAML(name, pool string) string {
	return `apiVersion: runwhere.ai/v1alpha1
kind: StressRun
metadata:
  name: ` + name + `
spec:
  pool: ` + pool + `
  tests: [npu]
  image: ` + stressImage + `
  timeout: 2m
`
}

// grant binds user to a ClusterRole of rules made for the test.
func grant(t *testing.T, user string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	rbac := framework.C.Kube.RbacV1()
	_, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}, metav1.CreateOptions{})
	require.NoError(t, err)
	bind(t, user, user)
	framework.WaitGranted(t, "", user, rules)
	t.Cleanup(func() { _ = rbac.ClusterRoles().Delete(ctx, user, metav1.DeleteOptions{}) })
}

func bind(t *testing.T, user, role string) {
	t.Helper()
	ctx := context.Background()
	rbac := framework.C.Kube.RbacV1()
	_, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rbac.ClusterRoleBindings().Delete(ctx, user, metav1.DeleteOptions{}) })
}

// bindOperator binds user to litepool-operator: deploy/webhook/rbac-operations.yaml's
// when this tree has it, else a role with the stress-run rule it grants.
func bindOperator(t *testing.T, user string) {
	t.Helper()
	file := filepath.Join(framework.Root, "deploy", "webhook", "rbac-operations.yaml")
	if _, err := os.Stat(file); err == nil {
		res := framework.C.Kubectl(t, "", "apply", "-f", file)
		require.Equal(t, 0, res.ExitCode, res.Stderr)
	} else {
		_, err := framework.C.Kube.RbacV1().ClusterRoles().Create(context.Background(), &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "litepool-operator"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"runwhere.ai"}, Resources: []string{"stressruns"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
				{APIGroups: []string{"runwhere.ai"}, Resources: []string{"pools"}, Verbs: []string{"get", "list", "watch"}},
			}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	bind(t, user, "litepool-operator")
	framework.WaitAuthorized(t, user, nil, "create", "runwhere.ai", "stressruns")
}

// watchNewPods watches pods in every namespace from now on and returns the ones
// created since.
func watchNewPods(t *testing.T) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	list, err := framework.C.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1})
	require.NoError(t, err)
	w, err := framework.C.Kube.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	var mu sync.Mutex
	var out []string
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Added {
				mu.Lock()
				out = append(out, p.Namespace+"/"+p.Name)
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(cancel)
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), out...)
	}
}

// waitPoolObserved waits until the controller has reconciled the pool's current spec.
func waitPoolObserved(t *testing.T, name string, r *replica) {
	t.Helper()
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), waitInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := poolclient.New(framework.C.Dynamic).Get(ctx, name)
		if err != nil {
			return false, err
		}
		return p.Status.ObservedGeneration == p.Generation, nil
	}), "the controller never reconciled pool %s:\n%s", name, r.Logs.String())
}
