package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// settle is how long a test waits for something that must not happen.
const settle = 5 * time.Second

// A user who may only patch nodes writes every shape of the old protocol's orders
// (runwhere.ai/upgrade-run with inCluster, a user's image and kube-system; each upgrade
// state; even the id of a live rollout) on a node. The controller is running and
// observably reconciling; nothing runs: no Job and no pod is created anywhere, and the
// node is not cordoned.
func TestNodeAnnotationsStartNothing(t *testing.T) {
	ctx := context.Background()
	certs, err := localwebhook.NewCerts(t.TempDir())
	require.NoError(t, err)
	r := startReplica(t, certs)
	waitLeader(t, r)
	victim := makePool(t, "ctl-evil", 1)[0]
	makePool(t, "ctl-sent", 1)

	// eve: get and patch nodes, nothing else.
	bindClusterRole(t, "e2e-node-patcher", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch"}}},
		rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "e2e-node-patchers"})
	framework.WaitAuthorized(t, "eve", []string{"e2e-node-patchers"}, "patch", "", "nodes")
	eve := impersonate(t, "eve", "e2e-node-patchers")
	can := framework.C.Kubectl(t, "", "auth", "can-i", "create", "jobs", "-n", "kube-system", "--as=eve", "--as-group=e2e-node-patchers")
	assert.Equal(t, "no\n", can.Stdout)

	// A live rollout (paused, so it only reconciles) whose name eve's annotation borrows.
	sentinel := &v1alpha1.DriverRollout{ObjectMeta: metav1.ObjectMeta{Name: "ctl-sentinel"},
		Spec: v1alpha1.DriverRolloutSpec{Pool: "ctl-sent", Version: target, Installer: v1alpha1.DriverInstaller{Image: installer}, Paused: true}}
	rc := rolloutClient(t, framework.C.Config)
	require.NoError(t, rc.Create(ctx, sentinel))
	t.Cleanup(func() { _ = rc.Delete(context.Background(), sentinel) })

	before := time.Now()
	shapes := []map[string]string{}
	for _, id := range []string{"evil-1", "ctl-sentinel"} {
		run := fmt.Sprintf(`{"id":%q,"pool":"ctl-evil","target":"9.9.9","installerImage":"evil.example.com/root:1","installerCommand":["/bin/sh","-c","chroot /host"],"namespace":"kube-system","inCluster":true}`, id)
		for _, state := range policy.UpgradeStates() {
			shapes = append(shapes, map[string]string{policy.AnnotationUpgradeRun: run, policy.AnnotationUpgradeState: string(state),
				policy.AnnotationUpgradeTarget: "9.9.9"})
		}
	}
	shapes = append(shapes, map[string]string{policy.AnnotationUpgradeRun: "ctl-sentinel", policy.AnnotationUpgradeState: string(policy.UpgradeInstall)})
	for _, ann := range shapes {
		data, err := jsonMerge(ann)
		require.NoError(t, err)
		_, err = eve.CoreV1().Nodes().Patch(ctx, victim, types.MergePatchType, data, metav1.PatchOptions{})
		require.NoError(t, err, "eve may patch nodes")
	}

	// The controller reconciles: it has acted on the sentinel's spec.
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		var ro v1alpha1.DriverRollout
		err := rc.Get(ctx, client.ObjectKeyFromObject(sentinel), &ro)
		return err == nil && ro.Status.ObservedGeneration == ro.Generation && ro.Status.Phase == v1alpha1.RolloutPaused, nil
	}), "the controller never reconciled:\n%s", r.Logs.String())
	// Make it reconcile again after the annotations, and let a settle period pass.
	require.NoError(t, rc.Patch(ctx, sentinel, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"canary":"ctl-sent-1"}}`))))
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		var ro v1alpha1.DriverRollout
		err := rc.Get(ctx, client.ObjectKeyFromObject(sentinel), &ro)
		return err == nil && ro.Status.ObservedGeneration == 2, nil
	}))
	time.Sleep(settle)

	jobs, err := framework.C.Kube.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, j := range jobs.Items {
		assert.False(t, j.CreationTimestamp.After(before.Add(-time.Second)), "job %s/%s was created", j.Namespace, j.Name)
	}
	pods, err := framework.C.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range pods.Items {
		assert.NotEqual(t, victim, p.Spec.NodeName, "pod %s/%s on the node", p.Namespace, p.Name)
		for _, c := range p.Spec.Containers {
			assert.NotContains(t, c.Image, "evil.example.com", "pod %s/%s", p.Namespace, p.Name)
		}
	}
	assert.False(t, framework.Node(t, victim).Spec.Unschedulable, "nothing cordoned the node")
	assert.Equal(t, oldDriver, framework.Node(t, victim).Labels[framework.DriverLabel])
}

// A user bound to the shipped litepool-operator ClusterRole starts a rollout by creating
// the object; the controller runs it to the end, and plain `kubectl get driverrollouts`
// shows its progress. The operator cannot create Jobs or pods.
func TestOperatorStartsARolloutWithKubectl(t *testing.T) {
	ctx := context.Background()
	certs, err := localwebhook.NewCerts(t.TempDir())
	require.NoError(t, err)
	r := startReplica(t, certs)
	waitLeader(t, r)
	nodes := makePool(t, "ctl-op", 2)
	stopAgent := playDriver(t, 2*time.Second)
	defer stopAgent()

	apply := framework.C.Kubectl(t, "", "apply", "-n", localwebhook.Namespace, "-f", filepath.Join(framework.Root, "deploy", "webhook", "rbac-operations.yaml"))
	require.Equal(t, 0, apply.ExitCode, apply.Stderr)
	bind := framework.C.Kubectl(t, "", "create", "clusterrolebinding", "e2e-olga-operator", "--clusterrole=litepool-operator", "--user=olga")
	require.Equal(t, 0, bind.ExitCode, bind.Stderr)
	t.Cleanup(func() { framework.C.Kubectl(t, "", "delete", "clusterrolebinding", "e2e-olga-operator") })
	for _, what := range []string{"jobs", "pods"} {
		can := framework.C.Kubectl(t, "", "auth", "can-i", "create", what, "-n", localwebhook.Namespace, "--as=olga")
		assert.Equal(t, "no\n", can.Stdout, "olga may create %s", what)
	}

	manifest := filepath.Join(t.TempDir(), "rollout.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(`apiVersion: runwhere.ai/v1alpha1
kind: DriverRollout
metadata:
  name: ctl-op-24
spec:
  pool: ctl-op
  version: "`+target+`"
  installer:
    image: `+installer+`
  maxUnavailable: 1
`), 0o600))
	created := framework.C.Kubectl(t, "", "create", "--as=olga", "-f", manifest)
	require.Equal(t, 0, created.ExitCode, created.Stderr)
	assert.Equal(t, "driverrollout.runwhere.ai/ctl-op-24 created\n", created.Stdout)

	seen := map[string]bool{}
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*waitTimeout, true, func(context.Context) (bool, error) {
		got := framework.C.Kubectl(t, "", "get", "driverrollouts", "ctl-op-24", "--as=olga")
		if got.ExitCode != 0 {
			return false, fmt.Errorf("kubectl get: %s", got.Stderr)
		}
		rows := strings.Split(strings.TrimSpace(got.Stdout), "\n")
		require.Len(t, rows, 2, got.Stdout)
		assert.Equal(t, []string{"NAME", "POOL", "VERSION", "PHASE", "DONE", "FAILED", "AGE"}, strings.Fields(rows[0]))
		f := strings.Fields(rows[1])
		if len(f) == 7 {
			seen[strings.Join(f[:6], " ")] = true
			return f[3] == "Succeeded", nil
		}
		return false, nil
	}), "seen %v\n%s", seen, r.Logs.String())
	assert.True(t, seen["ctl-op-24 ctl-op 24.1.0.3 Succeeded 2/2 0"], "%v", seen)
	assert.True(t, seen["ctl-op-24 ctl-op 24.1.0.3 Progressing 0/2 0"] || seen["ctl-op-24 ctl-op 24.1.0.3 Progressing 1/2 0"],
		"kubectl get showed the rollout under way: %v", seen)
	for _, n := range nodes {
		assert.Equal(t, target, framework.Node(t, n).Labels[framework.DriverLabel])
		assert.False(t, framework.Node(t, n).Spec.Unschedulable)
		assert.Equal(t, 1, installerJobs(t)[n], n)
	}
	wide := framework.C.Kubectl(t, "", "get", "driverrollouts", "ctl-op-24", "-o", "wide")
	assert.Equal(t, []string{"NAME", "POOL", "NODES", "VERSION", "PHASE", "DONE", "FAILED", "MESSAGE", "AGE"}, strings.Fields(strings.Split(wide.Stdout, "\n")[0]))
}

func bindClusterRole(t *testing.T, name string, rules []rbacv1.PolicyRule, subject rbacv1.Subject) {
	t.Helper()
	ctx := context.Background()
	_, err := framework.C.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = framework.C.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}, Subjects: []rbacv1.Subject{subject}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = framework.C.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = framework.C.Kube.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func impersonate(t *testing.T, user string, groups ...string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(framework.C.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return kube
}

func rolloutClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: kit.Scheme})
	require.NoError(t, err)
	return c
}

func jsonMerge(ann map[string]string) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
}

// eventMessages are the messages of a node's events of one reason.
func eventMessages(t *testing.T, node, reason string) []string {
	t.Helper()
	list, err := framework.C.Kube.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node + ",reason=" + reason,
	})
	require.NoError(t, err)
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Message)
	}
	return out
}
