// Package demo tests what `make demo` runs against a cluster of its own: hack/localwebhook
// start and stop (the webhook as a detached local process, registered by URL) and
// hack/demo.sh.
package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

func TestMain(m *testing.M) { framework.Main(m, "e2e-demo") }

var ctx = context.Background()

// run runs a program from the repository root, as make does, and returns its stdout
// and stderr; a non-zero exit fails the test.
func run(t *testing.T, name string, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = framework.Root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "%s %s\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), stdout.String(), stderr.String())
	return stdout.String(), stderr.String()
}

// buildLocalWebhook builds hack/localwebhook once; `make demo` runs the same package
// with go run.
func buildLocalWebhook(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "localwebhook")
	run(t, "go", "build", "-o", bin, "./hack/localwebhook")
	return bin
}

// webhookPIDs are the litepool-webhook processes serving from dir, as pgrep sees them.
func webhookPIDs(t *testing.T, dir string) []int {
	t.Helper()
	out, err := exec.Command("pgrep", "-f", regexp.QuoteMeta("litepool-webhook")+".*"+regexp.QuoteMeta("--cert-dir="+filepath.Join(dir, "certs"))).Output()
	if exit, ok := err.(*exec.ExitError); ok && exit.ExitCode() == 1 {
		return nil // none
	}
	require.NoError(t, err)
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	return pids
}

func poolPod(name, pool string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"runwhere.ai/pool": pool, "runwhere.ai/workload-type": "training"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
}

var started = regexp.MustCompile(`^litepool-webhook started \(pid (\d+)\) at https://127\.0\.0\.1:(\d+); log (.+)\n$`)

// start runs `localwebhook start` and returns the pid and port it reports.
func start(t *testing.T, bin, dir string) (int, string) {
	t.Helper()
	out, _ := run(t, bin, "start", "--kubeconfig", framework.C.Kubeconfig, "--dir", dir)
	m := started.FindStringSubmatch(out)
	require.NotNil(t, m, "start printed %q", out)
	assert.Equal(t, filepath.Join(dir, "webhook.log"), m[3])
	pid, _ := strconv.Atoi(m[1])
	return pid, m[2]
}

// TestLocalWebhook: start runs the webhook in the background and registers it by URL;
// a second start keeps it; a crashed webhook is replaced; hack/demo.sh shows the pod
// pinned and the denial; stop removes the configurations and leaves no process.
func TestLocalWebhook(t *testing.T) {
	kube := framework.C.Kube
	adm := kube.AdmissionregistrationV1()
	bin := buildLocalWebhook(t)
	dir := t.TempDir()
	t.Cleanup(func() { // whatever failed, leave no webhook running and the cluster usable
		_ = exec.Command(bin, "stop", "--kubeconfig", framework.C.Kubeconfig, "--dir", dir).Run()
	})

	pid, port := start(t, bin, dir)
	assert.Equal(t, []int{pid}, webhookPIDs(t, dir))
	pidFile, err := os.ReadFile(filepath.Join(dir, "webhook.pid"))
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("%d\n", pid), string(pidFile))
	ca, err := os.ReadFile(filepath.Join(dir, "certs", "ca.crt"))
	require.NoError(t, err)
	mut, err := adm.MutatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
	require.NoError(t, err)
	val, err := adm.ValidatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
	require.NoError(t, err)
	var urls []string
	for _, w := range mut.Webhooks {
		urls = append(urls, *w.ClientConfig.URL)
		assert.Equal(t, string(ca), string(w.ClientConfig.CABundle), w.Name)
	}
	for _, w := range val.Webhooks {
		urls = append(urls, *w.ClientConfig.URL)
		assert.Equal(t, string(ca), string(w.ClientConfig.CABundle), w.Name)
	}
	base := "https://127.0.0.1:" + port
	assert.Equal(t, []string{base + "/mutate-pods", base + "/mutate-pods", base + "/mutate-pods", base + "/mutate-pods", base + "/mutate-jobs", base + "/validate-nodes", base + "/validate-nodes", base + "/validate-pod-placement", base + "/validate-pod-placement", base + "/validate-pod-placement", base + "/validate-pod-placement", base + "/validate-pools", base + "/validate-volcano-queue", base + "/validate-operations"}, urls)

	t.Run("a pool pod gets the pool's nodeSelector", func(t *testing.T) {
		got, err := kube.CoreV1().Pods("ai-team").Create(ctx, poolPod("snt9b-job", "train-snt9b"), metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"runwhere.ai/pool": "train-snt9b"}, got.Spec.NodeSelector)
	})

	t.Run("start again keeps the running webhook", func(t *testing.T) {
		out, _ := run(t, bin, "start", "--kubeconfig", framework.C.Kubeconfig, "--dir", dir)
		assert.Equal(t, fmt.Sprintf("litepool-webhook is already running (pid %d) at https://127.0.0.1:%s\n", pid, port), out)
		assert.Equal(t, []int{pid}, webhookPIDs(t, dir))
	})

	t.Run("start replaces a webhook that died", func(t *testing.T) {
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return len(webhookPIDs(t, dir)) == 0, nil
		}))
		var newPort string
		pid, newPort = start(t, bin, dir)
		assert.Equal(t, []int{pid}, webhookPIDs(t, dir))
		mut, err := adm.MutatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "https://127.0.0.1:"+newPort+"/mutate-pods", *mut.Webhooks[0].ClientConfig.URL, "registered again at the new port")
		got, err := kube.CoreV1().Pods("ai-team").Create(ctx, poolPod("a100-job", "train-a100"), metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"runwhere.ai/pool": "train-a100"}, got.Spec.NodeSelector)
	})

	t.Run("hack/demo.sh shows the pools, a pinned pod and a denial", func(t *testing.T) {
		out, _ := run(t, filepath.Join(framework.Root, "hack", "demo.sh"), framework.C.Kubeconfig)
		for _, want := range []string{
			"$ kubectl litepool get pools\n" +
				"POOL NAME     STATUS     GPU TOTAL   GPU USED   GPU FREE   NODE COUNT\n" +
				"dev-sandbox   Empty      0           0          0          0\n" +
				"infer-a10     Degraded   8           2          2          2\n" +
				"train-a100    Running    24          12         12         3\n" +
				"train-snt9b   Degraded   24          8          8          3\n" +
				"default       Running    8           0          8          3\n",
			"pod/demo-trainer created\n",
			"demo-trainer   map[runwhere.ai/pool:train-a100]   a100-node-",
			`Error from server (Forbidden): admission webhook "pods.runwhere.ai" denied the request: [P2] pool "train-h100" (label runwhere.ai/pool) does not exist: ask for a pool that exists (kubectl litepool get pools) or remove the label` + "\n",
			"Stop both with: make cluster-down\n",
		} {
			assert.Contains(t, out, want)
		}
		// Plain kubectl shows the status the controller keeps (printer columns).
		assert.Regexp(t, `\$ kubectl get pools\nNAME +TYPE +ACCELERATOR +STATUS +NODES +TOTAL +USED +FREE +MIN NODES`, out)
		assert.Regexp(t, `\ndev-sandbox +Development +A10-24G +Empty +0 +0 +0 +0 +1 `, out)
		assert.Regexp(t, `\ntrain-a100 +Training +A100-80G +Running +3 +24 +12 +12 +2 `, out)
		_, err := kube.CoreV1().Pods("ai-team").Get(ctx, "demo-h100", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "the denied pod does not exist: %v", err)
		again, _ := run(t, filepath.Join(framework.Root, "hack", "demo.sh"), framework.C.Kubeconfig)
		assert.Contains(t, again, "pod/demo-trainer created\n", "demo.sh runs again on the same cluster")
	})

	t.Run("stop deletes the configurations and leaves no process", func(t *testing.T) {
		out, _ := run(t, bin, "stop", "--kubeconfig", framework.C.Kubeconfig, "--dir", dir)
		assert.Equal(t, fmt.Sprintf("litepool-webhook stopped (pid %d)\n", pid), out)
		assert.Empty(t, webhookPIDs(t, dir))
		_, err := adm.MutatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "mutating configuration deleted: %v", err)
		_, err = adm.ValidatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "validating configuration deleted: %v", err)
		for _, f := range []string{"webhook.pid", "webhook.json"} {
			_, err := os.Stat(filepath.Join(dir, f))
			assert.True(t, os.IsNotExist(err), "%s removed: %v", f, err)
		}
		// The API server drops the configurations asynchronously; then a pool pod is
		// admitted without the webhook (its failure policy, Fail, no longer applies).
		var got *corev1.Pod
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			got, err = kube.CoreV1().Pods("ai-team").Create(ctx, poolPod("after-stop", "train-a100"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err == nil, nil
		}), "pool pods still go to the stopped webhook: %v", err)
		assert.Empty(t, got.Spec.NodeSelector)

		out, _ = run(t, bin, "stop", "--kubeconfig", framework.C.Kubeconfig, "--dir", dir)
		assert.Equal(t, "litepool-webhook is not running\n", out)
	})

	t.Run("stop leaves an in-cluster deployment's configurations alone", func(t *testing.T) {
		cfgs, err := localwebhook.LoadConfigurations(filepath.Join(framework.Root, "deploy", "webhook", "webhooks.yaml"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = cfgs.Unregister(ctx, kube) })
		require.NoError(t, cfgs.Register(ctx, kube)) // as shipped: called through the Service
		out, stderr := run(t, bin, "stop", "--kubeconfig", framework.C.Kubeconfig, "--dir", dir)
		assert.Equal(t, "litepool-webhook is not running\n", out)
		assert.Equal(t, "localwebhook stop: webhook configurations left in place: MutatingWebhookConfiguration litepool-webhook calls a Service (an in-cluster deployment's), not a local webhook\n", stderr)
		_, err = adm.MutatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
		assert.NoError(t, err)
	})
}
