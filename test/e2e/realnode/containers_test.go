package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/pkg/stress"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// realPool is the real node's pool.
const realPool = "rn-real"

// testRealContainers: the plugin drives a stress run and driver upgrades of the real
// node (no controller runs: litepool was uninstalled before, so the plugin runs the
// reconcilers itself), whose kubelet runs the test pods and installer Jobs from the
// images make image built; their exit codes are what litepool reads. What delete -k
// removed comes back as an operator would have it: the CRDs and litepool's namespace
// from deploy/webhook as shipped (its Pod Security level is what lets the privileged
// installers run).
func testRealContainers(t *testing.T) {
	c := framework.C
	kube := c.Kube
	restoreCRDsAndNamespace(t)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, err := poolclient.New(c.Dynamic).Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: realPool},
			Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeDevelopment, Description: "the real node"}}, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), nil
	}))
	_, err := kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(`{"metadata":{"labels":{"runwhere.ai/pool":"`+realPool+`"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)

	// The test installer changes only the host (litepool's node Jobs mount no token);
	// the test plays the node's feature discovery, with its own identity, labelling
	// the node with the version the installer left there.
	stopDiscovery := playFeatureDiscovery(t, node)
	defer stopDiscovery()

	t.Run("a stress test that exits 1 leaves the node degraded", func(t *testing.T) {
		res := c.Litepool(t, "stress", "run", "--pool", realPool, "--image", stressFailing, "--tests", "npu",
			"--timeout", "3m", "--in-cluster=false")
		assert.NotEqual(t, 0, res.ExitCode, "a failed node fails the run:\n%s\n%s", res.Stdout, res.Stderr)
		got := framework.Node(t, node)
		assert.Equal(t, policy.HealthDegraded, got.Labels[policy.LabelHealth], "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
		assert.Contains(t, got.Annotations[policy.AnnotationStressResult], "exit 1 (Error)")
		pod := onlyPod(t, stress.LabelComponent+"="+stress.Component)
		assert.Equal(t, corev1.PodFailed, pod.Status.Phase)
		assertExited(t, pod, 1)
	})

	upgradeNode := func(version, image string) framework.Result {
		return c.Litepool(t, "upgrade", "driver", "--node", node, "--version", version, "--installer-image", image,
			"--wait-timeout", "0", "--install-timeout", "3m", "--validate-timeout", "1m",
			"--force", "--yes", "--controller-timeout", "2s")
	}

	t.Run("an installer that succeeds: the node's driver version reads the target", func(t *testing.T) {
		res := upgradeNode("1.2.3", installerOK)
		require.Equal(t, 0, res.ExitCode, "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
		assert.Contains(t, res.Stderr, "no litepool controller acted on it within 2s: this command drives it", "no controller runs: the plugin drives the rollout")
		got := framework.Node(t, node)
		assert.Equal(t, "1.2.3", policy.DriverVersion(got))
		assert.Equal(t, "1.2.3", got.Labels[policy.LabelDriverVersion], "what the installer container left on the host")
		assert.Equal(t, string(policy.UpgradeDone), got.Annotations[policy.AnnotationUpgradeState])
		assert.False(t, got.Spec.Unschedulable, "uncordoned after the upgrade")
		pod := onlyPod(t, upgrade.LabelComponent+"="+upgrade.Component)
		assert.Equal(t, corev1.PodSucceeded, pod.Status.Phase)
		assertExited(t, pod, 0)
		require.NoError(t, kube.BatchV1().Jobs(system).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationForeground)},
			metav1.ListOptions{LabelSelector: upgrade.LabelComponent + "=" + upgrade.Component}))
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			pods, err := kube.CoreV1().Pods(system).List(ctx, metav1.ListOptions{LabelSelector: upgrade.LabelComponent + "=" + upgrade.Component})
			return err == nil && len(pods.Items) == 0, nil
		}))
	})

	t.Run("an installer that exits non-zero: the node is failed", func(t *testing.T) {
		res := upgradeNode("1.2.4", installerFailing)
		assert.NotEqual(t, 0, res.ExitCode, "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
		got := framework.Node(t, node)
		assert.Equal(t, string(policy.UpgradeFailed), got.Annotations[policy.AnnotationUpgradeState])
		assert.Contains(t, got.Annotations[policy.AnnotationUpgradeMessage], "failed in install")
		assert.Equal(t, "1.2.3", policy.DriverVersion(got), "the driver did not change")
		assert.True(t, got.Spec.Unschedulable, "a failed node stays cordoned")
		pod := onlyPod(t, upgrade.LabelComponent+"="+upgrade.Component)
		assert.Equal(t, corev1.PodFailed, pod.Status.Phase)
		assertExited(t, pod, 3)
	})
}

// restoreCRDsAndNamespace brings back what delete -k removed, as an operator would
// have it: the CRDs and litepool's namespace from deploy/webhook as shipped (its Pod
// Security level is what lets the privileged installers run). Idempotent.
func restoreCRDsAndNamespace(t *testing.T) {
	t.Helper()
	c := framework.C
	res := c.Kubectl(t, "", "apply", "-f", filepath.Join(framework.Root, "deploy", "webhook", "crd"))
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	require.NoError(t, framework.WaitCRDsEstablished(ctx, c, "pools.runwhere.ai", "driverrollouts.runwhere.ai", "stressruns.runwhere.ai"))
	// The namespace may still be terminating if delete -k returned early.
	require.NoError(t, wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(context.Context) (bool, error) {
		res = c.Kubectl(t, "", "apply", "-f", filepath.Join(framework.Root, "deploy", "webhook", "namespace.yaml"))
		return res.ExitCode == 0, nil
	}), "litepool's namespace did not come back: %s", res.Stderr)
}

func ptrTo[T any](v T) *T { return &v }

// onlyPod is the one pod of litepool's namespace matching selector; it must have run on the real node.
func onlyPod(t *testing.T, selector string) corev1.Pod {
	t.Helper()
	pods, err := framework.C.Kube.CoreV1().Pods(system).List(ctx, metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1, selector)
	p := pods.Items[0]
	assert.Equal(t, node, p.Spec.NodeName)
	return p
}

// assertExited: the pod's one container ran in containerd and exited with code.
func assertExited(t *testing.T, p corev1.Pod, code int32) {
	t.Helper()
	require.Len(t, p.Status.ContainerStatuses, 1, p.Name)
	cs := p.Status.ContainerStatuses[0]
	assert.Regexp(t, `^containerd://[0-9a-f]{64}$`, cs.ContainerID, "a real container")
	require.NotNil(t, cs.State.Terminated, "%s: %+v", p.Name, cs.State)
	assert.Equal(t, code, cs.State.Terminated.ExitCode, p.Name)
}

// playFeatureDiscovery labels node with the driver version the test installer wrote
// on this host (testbin's DriverVersionFile), every 200ms until stopped, as a node's
// feature discovery would; stopping removes the file.
func playFeatureDiscovery(t *testing.T, node string) (stop func()) {
	return playFeatureDiscoveryWhen(t, node, func() bool { return true })
}

// playFeatureDiscoveryWhen is playFeatureDiscovery reporting only once ready says so:
// a driver that takes longer to come up after its installer exits.
func playFeatureDiscoveryWhen(t *testing.T, node string, ready func() bool) (stop func()) {
	const file = "/run/litepool-testbin/driver-version"
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			b, err := os.ReadFile(file)
			version := strings.TrimSpace(string(b))
			if err != nil || version == "" || !ready() {
				continue
			}
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, policy.LabelDriverVersion, version)
			if _, err := framework.C.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				// Kept for the next round: a lost patch must not lose the version.
				t.Logf("feature discovery: %v", err)
				continue
			}
			_ = os.Remove(file)
		}
	}()
	return func() {
		close(done)
		_ = os.RemoveAll(filepath.Dir(file))
	}
}
