package backup

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	pool      = "bqueue"
	team      = "bq-team"
	gpu       = "nvidia.com/gpu"
	rollout   = "bqueue-driver"
	stressRun = "bqueue-burn"
	timeout   = 2 * time.Minute
)

var (
	ctx           = context.Background()
	clusterQueues = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "clusterqueues"}
	localQueues   = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}
)

// TestBackupAndRestore saves, uninstalls, installs again and restores, as
// docs/backup.md says, and checks what comes back and what does not.
func TestBackupAndRestore(t *testing.T) {
	kube := framework.C.Kube
	c, err := client.New(framework.C.Config, client.Options{Scheme: kit.Scheme})
	require.NoError(t, err)
	require.NoError(t, localwebhook.EnsureNamespace(ctx, kube, team))

	// Before: litepool with its controllers; a pool whose Kueue queue they make.
	w := start(t, "--controllers=true")
	require.NoError(t, c.Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1, Namespaces: []string{team},
			Accelerator: v1alpha1.AcceleratorSpec{ResourceName: gpu},
			Queue:       &v1alpha1.QueueSpec{Scheduler: v1alpha1.QueueKueue}}}))
	framework.CreateReadyNode(t, kube, pool+"-1", pool)
	oldUID := ownedQueues(t, "")
	w.Stop()

	// A finished rollout and a finished stress run, as the controller leaves them.
	w = start(t)
	// Forced past C1 (no compatibility data for this hardware): the annotation is saved
	// and restored with it, so the webhook admits the restored rollout as it did this one.
	ro := &v1alpha1.DriverRollout{ObjectMeta: metav1.ObjectMeta{Name: rollout,
		Annotations: map[string]string{"runwhere.ai/force": "e2e: no compatibility data for kwok nodes"}},
		Spec: v1alpha1.DriverRolloutSpec{Pool: pool, Version: "550.1",
			Installer: v1alpha1.DriverInstaller{Image: "registry.example.com/installer:550.1"}}}
	require.NoError(t, c.Create(ctx, ro))
	ro.Status = v1alpha1.DriverRolloutStatus{ObservedGeneration: ro.Generation, Phase: v1alpha1.RolloutSucceeded,
		Progress: "1/1", Total: 1, Done: 1, Message: "every node runs 550.1"}
	require.NoError(t, c.Status().Update(ctx, ro))
	run := &v1alpha1.StressRun{ObjectMeta: metav1.ObjectMeta{Name: stressRun},
		Spec: v1alpha1.StressRunSpec{Pool: pool, Image: "registry.example.com/gpu-stress:1.0", Tests: []v1alpha1.StressTest{"npu"}}}
	require.NoError(t, c.Create(ctx, run))
	run.Status = v1alpha1.StressRunStatus{ObservedGeneration: run.Generation, Phase: v1alpha1.StressRunSucceeded, Total: 1, Passed: 1}
	require.NoError(t, c.Status().Update(ctx, run))

	// Save, as docs/backup.md says.
	saved := framework.C.Kubectl(t, "", "get", "pools.runwhere.ai,driverrollouts.runwhere.ai,stressruns.runwhere.ai", "-o", "yaml")
	require.Zero(t, saved.ExitCode, saved.Stderr)
	backup := filepath.Join(t.TempDir(), "litepool-backup.yaml")
	require.NoError(t, os.WriteFile(backup, []byte(saved.Stdout), 0o600))
	var pools v1alpha1.PoolList
	require.NoError(t, c.List(ctx, &pools))

	// Uninstall as docs/uninstall.md says: the webhook configurations, the Pools (the
	// garbage collector deletes the Kueue objects they own), then the CRDs. The Pools go
	// first because the garbage collector deletes a dependent only while it can resolve
	// its owner's kind: with the CRD gone first, a Kueue object whose Pool it had not yet
	// seen go stays until a Pool CRD is back (CI saw it stay 2 minutes).
	w.Stop()
	delPools := framework.C.Kubectl(t, "", "delete", "pools", "--all")
	require.Zero(t, delPools.ExitCode, delPools.Stderr)
	poll(t, "the garbage collector deletes the Kueue objects the deleted Pools owned", func() bool {
		_, cqErr := framework.C.Dynamic.Resource(clusterQueues).Get(ctx, pool, metav1.GetOptions{})
		_, lqErr := framework.C.Dynamic.Resource(localQueues).Namespace(team).Get(ctx, pool, metav1.GetOptions{})
		return apierrors.IsNotFound(cqErr) && apierrors.IsNotFound(lqErr)
	})
	del := framework.C.Kubectl(t, "", "delete", "crd", "pools.runwhere.ai", "driverrollouts.runwhere.ai", "stressruns.runwhere.ai")
	require.Zero(t, del.ExitCode, del.Stderr)

	// Install again, the controller not running yet, and restore.
	apply := framework.C.Kubectl(t, "", "apply", "-f", filepath.Join(framework.Root, "deploy", "webhook", "crd"))
	require.Zero(t, apply.ExitCode, apply.Stderr)
	require.NoError(t, framework.WaitCRDsEstablished(ctx, framework.C, "pools.runwhere.ai", "driverrollouts.runwhere.ai", "stressruns.runwhere.ai"))
	w = start(t)
	out := framework.C.MustLitepool(t, "restore", "-f", backup, "--controller-namespace="+localwebhook.Namespace)
	t.Logf("kubectl litepool restore:\n%s", out)
	for _, p := range pools.Items {
		assert.Contains(t, out, "pools/"+p.Name+" created")
	}
	assert.Contains(t, out, "driverrollouts/"+rollout+" created, status restored (phase Succeeded)")
	assert.Contains(t, out, "stressruns/"+stressRun+" created, status restored (phase Succeeded)")
	w.Stop()

	// The controller again: the queue comes back, owned by the new Pool.
	start(t, "--controllers=true")
	newUID := ownedQueues(t, oldUID)
	assert.NotEqual(t, oldUID, newUID, "the restored Pool is a new object")

	t.Run("the finished rollout and stress run stay finished", func(t *testing.T) {
		var got v1alpha1.DriverRollout
		require.NoError(t, c.Get(ctx, types.NamespacedName{Name: rollout}, &got))
		assert.Equal(t, v1alpha1.RolloutSucceeded, got.Status.Phase)
		assert.Equal(t, int32(1), got.Status.Done)
		var gotRun v1alpha1.StressRun
		require.NoError(t, c.Get(ctx, types.NamespacedName{Name: stressRun}, &gotRun))
		assert.Equal(t, v1alpha1.StressRunSucceeded, gotRun.Status.Phase)
		jobs, err := kube.BatchV1().Jobs(localwebhook.Namespace).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Empty(t, jobs.Items, "no installer Job: the rollout did not run again")
		pods, err := kube.CoreV1().Pods(localwebhook.Namespace).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		assert.Empty(t, pods.Items, "no stress pod: the run did not run again")
	})

	t.Run("restored pools serve", func(t *testing.T) {
		got, err := kube.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "after-restore", Labels: map[string]string{policy.LabelPool: "dev-sandbox", policy.LabelWorkloadType: "development"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Equal(t, "dev-sandbox", got.Spec.NodeSelector[policy.LabelPool], "the webhook pins a pod to the restored pool")
		err = c.Delete(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-snt9b"}}, client.DryRunAll)
		require.Error(t, err, "the webhook's pool rules apply to a restored pool")
		assert.Contains(t, err.Error(), "[R2]", "a restored pool whose nodes run work is not deleted")
	})
}

// start runs litepool-webhook (and, with --controllers=true, its controllers) until the
// test ends or it is stopped.
func start(t *testing.T, flags ...string) *framework.Webhook {
	t.Helper()
	w, err := framework.StartWebhook(framework.C, flags...)
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	return w
}

// ownedQueues waits until the pool's ClusterQueue and its LocalQueue in team exist, the
// ClusterQueue with a controller ownerReference to a Pool uid other than not, and
// returns that uid.
func ownedQueues(t *testing.T, not types.UID) types.UID {
	t.Helper()
	var uid types.UID
	poll(t, "the controller makes pool "+pool+"'s ClusterQueue and LocalQueue", func() bool {
		cq, err := framework.C.Dynamic.Resource(clusterQueues).Get(ctx, pool, metav1.GetOptions{})
		if err != nil {
			return false
		}
		if _, err := framework.C.Dynamic.Resource(localQueues).Namespace(team).Get(ctx, pool, metav1.GetOptions{}); err != nil {
			return false
		}
		ref := metav1.GetControllerOf(cq)
		if ref == nil || ref.Kind != "Pool" || ref.UID == not {
			return false
		}
		uid = ref.UID
		return true
	})
	return uid
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil })
	require.NoError(t, err, what)
}
