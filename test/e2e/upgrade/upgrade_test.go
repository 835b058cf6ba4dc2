package upgrade

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	oldDriver = "23.0.6"
	target    = "24.1.0.3"
	installer = "registry.example.com/ascend-installer:24.1.0.3"
)

// The pools start at driver 23.0.6 with CANN 8.2.RC1, which the matrix says do not go
// together; 24.1.0.3 is published with CANN 8.2.RC1 for Snt9B.
var software = v1alpha1.SoftwareSpec{CANN: "8.2.RC1"}

func TestPoolRolloutInWavesOfMaxUnavailable(t *testing.T) {
	t.Parallel()
	nodes := framework.AscendPool(t, "upg-six", 6, oldDriver, software)
	ag := startAgent(0, false, nodes...)
	w := watchUnschedulable(t, "upg-six")

	// The dry run shows the waves and changes nothing.
	out := framework.C.MustLitepool(t, "upgrade", "driver", "--pool", "upg-six", "--version", target, "--max-unavailable", "2",
		"--installer-image", installer, "--dry-run=client")
	assert.Contains(t, out, "would upgrade 6 node(s) to 24.1.0.3 with installer "+installer+" running its image's entrypoint (max unavailable 2):\n"+
		"  wave 1: upg-six-1, upg-six-2\n  wave 2: upg-six-3, upg-six-4\n  wave 3: upg-six-5, upg-six-6\n(dry run: nothing changed)\n")
	for _, n := range nodes {
		assert.Empty(t, framework.UpgradeState(t, n), n)
	}

	// Without --yes and with no "yes" on stdin, nothing happens.
	r := framework.C.Kubectl(t, "no\n", "litepool", "upgrade", "driver", "--pool", "upg-six", "--version", target, "--max-unavailable", "2",
		"--installer-image", installer)
	assert.Equal(t, 1, r.ExitCode)
	assert.Contains(t, r.Stderr, "Risk: high: driver upgrade to 24.1.0.3\n  Impact: 6 node(s) of pool upg-six will be cordoned, drained and have the driver reinstalled by installer "+installer+" running its image's entrypoint, at most 2 unavailable at a time; workload pods still running after 10m0s are evicted\n")
	assert.Contains(t, r.Stderr, "\nerror: driver upgrade to 24.1.0.3: not confirmed (typed \"no\", expected \"yes\"); nothing was changed\n")
	assert.Empty(t, framework.UpgradeState(t, nodes[0]))

	// Confirmed on stdin, with the installer command after "--". No controller runs
	// here: the command says so and drives the rollout itself.
	r = framework.C.Kubectl(t, "yes\n", "litepool", "upgrade", "driver", "--pool", "upg-six", "--version", target, "--max-unavailable", "2",
		"--installer-image", installer, "-w", "--", "/install.sh", "--quiet")
	require.Equal(t, 0, r.ExitCode, "stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
	assert.Regexp(t, `driverrollout/upg-six-24\.1\.0\.3-\d{8}-\d{6} created: 6 node\(s\) to driver 24.1.0.3\n`, r.Stdout)
	assert.Contains(t, r.Stderr, noController)
	assert.Contains(t, r.Stdout, "node/upg-six-6: done\n", "-w prints the moves")
	assert.Regexp(t, `driverrollout \S+ \(pool upg-six → 24.1.0.3\): Progressing: 2/6 done \(33%\), 2 in progress, 2 pending, 0 failed\n`, r.Stdout)
	assert.Regexp(t, `driverrollout \S+: Succeeded: 6/6 nodes at 24.1.0.3\n$`, r.Stdout)

	// The cluster's own account: never more than 2 unschedulable at once, and 2 were.
	most, cordons := w.snapshot()
	assert.Equal(t, 2, most)
	for _, n := range nodes {
		got := framework.Node(t, n)
		assert.Equal(t, target, got.Labels[framework.DriverLabel], n)
		assert.Equal(t, "done", got.Annotations[policy.AnnotationUpgradeState], n)
		assert.False(t, got.Spec.Unschedulable, n)
		assert.NotContains(t, got.Annotations, policy.AnnotationWasCordoned, n)
		assert.NotContains(t, got.Annotations, policy.CordonUpgrade.Annotation(), n)
		assert.Equal(t, 1, cordons[n], "cordons of %s", n)
		assert.Equal(t, 1, ag.InstallerPods(n), "installer pods of %s", n)
		assert.Equal(t, 1, eventsFor(t, n, "DriverUpgraded"), n)
		assert.Equal(t, 6, eventsFor(t, n, "DriverUpgrade"), n) // one per step, uncordon → done is DriverUpgraded
	}
	ro := rolloutOf(t, "upg-six")
	assert.Equal(t, v1alpha1.RolloutSucceeded, ro.Status.Phase)
	assert.Equal(t, "6/6", ro.Status.Progress)
	assert.Equal(t, ro.Name, framework.Node(t, "upg-six-1").Annotations[policy.AnnotationUpgradeRun], "the node says which rollout upgraded it")
	job, err := framework.C.Kube.BatchV1().Jobs(localwebhook.Namespace).Get(context.Background(), upgrade.InstallerJobName(ro, "upg-six-1", 1), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "upg-six-1", job.Spec.Template.Spec.NodeName)
	assert.Equal(t, []string{"/install.sh", "--quiet"}, job.Spec.Template.Spec.Containers[0].Command)
	assert.Equal(t, installer, job.Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, int32(1), job.Status.Succeeded)

	status := framework.C.MustLitepool(t, "upgrade", "status", "--pool", "upg-six")
	assert.Equal(t, "NODE        POOL      STATE   TARGET     DRIVER     CORDONED   MESSAGE", lines(status)[0])
	assert.Equal(t, "upg-six-1   upg-six   done    24.1.0.3   24.1.0.3   false      <none>", lines(status)[1])
	assert.Regexp(t, `driverrollout \S+ \(pool upg-six → 24.1.0.3\): Succeeded: 6/6 done \(100%\), 0 in progress, 0 pending, 0 failed`, lines(status)[7])

	// Plain kubectl shows the rollout.
	got := framework.C.Kubectl(t, "", "get", "driverrollouts", ro.Name)
	require.Equal(t, 0, got.ExitCode, got.Stderr)
	assert.Equal(t, []string{"NAME", "POOL", "VERSION", "PHASE", "DONE", "FAILED", "AGE"}, strings.Fields(lines(got.Stdout)[0]))
	assert.Equal(t, []string{ro.Name, "upg-six", "24.1.0.3", "Succeeded", "6/6", "0"}, strings.Fields(lines(got.Stdout)[1])[:6])

	var st struct {
		Nodes    []struct{ Node, State, Driver string }
		Rollouts []struct {
			Pool, Target, Phase string
			Total, Done         int
		}
	}
	require.NoError(t, json.Unmarshal([]byte(framework.C.MustLitepool(t, "upgrade", "status", "--pool", "upg-six", "-o", "json")), &st))
	assert.Len(t, st.Nodes, 6)
	require.Len(t, st.Rollouts, 1)
	assert.Equal(t, "upg-six", st.Rollouts[0].Pool)
	assert.Equal(t, "Succeeded", st.Rollouts[0].Phase)
	assert.Equal(t, [2]int{6, 6}, [2]int{st.Rollouts[0].Done, st.Rollouts[0].Total})

	// Every node is at the target now: nothing to do.
	out = framework.C.MustLitepool(t, "upgrade", "driver", "--pool", "upg-six", "--version", target, "--installer-image", installer, "--yes")
	assert.Contains(t, out, "nothing to upgrade: every node is at 24.1.0.3\n")
}

func TestNodeCordonedBeforeStaysCordoned(t *testing.T) {
	t.Parallel()
	nodes := framework.AscendPool(t, "upg-one", 2, oldDriver, software)
	startAgent(0, false, nodes...)
	framework.C.Kubectl(t, "", "cordon", nodes[0])
	r := framework.C.Litepool(t, "upgrade", "driver", "--node", nodes[0], "--version", target, "--installer-image", installer, "-w", "--yes")
	require.Equal(t, 0, r.ExitCode, "stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
	assert.Contains(t, r.Stdout, "node/upg-one-1: done: stays cordoned: it was cordoned before the upgrade\n")
	got := framework.Node(t, nodes[0])
	assert.True(t, got.Spec.Unschedulable)
	assert.Equal(t, "done", got.Annotations[policy.AnnotationUpgradeState])
	assert.Equal(t, target, got.Labels[framework.DriverLabel])
	assert.NotContains(t, got.Annotations, policy.AnnotationWasCordoned)
	assert.NotContains(t, got.Annotations, policy.CordonUpgrade.Annotation())
	// The other node of the pool was not touched.
	assert.Empty(t, framework.UpgradeState(t, nodes[1]))
	assert.Equal(t, oldDriver, framework.Node(t, nodes[1]).Labels[framework.DriverLabel])
}

func TestValidationTimeoutStopsTheRollout(t *testing.T) {
	t.Parallel()
	nodes := framework.AscendPool(t, "upg-fail", 3, oldDriver, software)
	startAgent(0, false, nodes[0], nodes[2])
	startAgent(0, true, nodes[1]) // its driver label never changes
	r := framework.C.Litepool(t, "upgrade", "driver", "--pool", "upg-fail", "--version", target, "--installer-image", installer,
		"--validate-timeout", "4s", "--yes")
	assert.Equal(t, 1, r.ExitCode, r.Stdout)
	assert.Regexp(t, "error: driverrollout \\S+ failed: stopped, 1/3 done: node upg-fail-2 failed in validate: validation timed out after 4s: the node's driver-version label reads \"23.0.6\", want \"24.1.0.3\"", r.Stderr)

	failed := framework.Node(t, nodes[1])
	assert.Equal(t, "failed", failed.Annotations[policy.AnnotationUpgradeState])
	assert.True(t, failed.Spec.Unschedulable, "a failed node stays cordoned")
	assert.Equal(t, `failed in validate: validation timed out after 4s: the node's driver-version label reads "23.0.6", want "24.1.0.3" (labels huawei.com/driver.version, nvidia.com/cuda.driver-version.full, runwhere.ai/driver-version)`,
		failed.Annotations[policy.AnnotationUpgradeMessage])
	assert.Equal(t, 1, eventsFor(t, nodes[1], "DriverUpgradeFailed"))
	assert.Equal(t, "done", framework.UpgradeState(t, nodes[0]))
	assert.Equal(t, "upgrade-required", framework.UpgradeState(t, nodes[2]), "nothing starts after a failure")
	assert.False(t, framework.Node(t, nodes[2]).Spec.Unschedulable)

	status := framework.C.MustLitepool(t, "upgrade", "status", "--pool", "upg-fail")
	assert.Regexp(t, `driverrollout \S+ \(pool upg-fail → 24.1.0.3\): Failed: 1/3 done \(33%\), 0 in progress, 1 pending, 1 failed`, status)

	// Resume refuses until the failed node is retried explicitly.
	r = framework.C.Litepool(t, "upgrade", "resume", "--pool", "upg-fail")
	assert.Equal(t, 1, r.ExitCode)
	assert.Regexp(t, `error: \[U4\] driverrollout \S+ stopped on failed node\(s\) upg-fail-2 \(failed in validate: .*\): fix them, then resume with --retry-failed`, r.Stderr)

	// Once "fixed" (the agent now reports the version), --retry-failed finishes it.
	startAgent(0, false, nodes[1])
	dry := framework.C.MustLitepool(t, "upgrade", "resume", "--pool", "upg-fail", "--retry-failed", "--dry-run=server")
	assert.Contains(t, dry, "would retry: node/upg-fail-2: failed → upgrade-required (retry) (server dry run)\n")
	assert.Contains(t, dry, "  wave 1: upg-fail-2\n  wave 2: upg-fail-3\n(dry run: nothing changed)\n")
	assert.Equal(t, "failed", framework.UpgradeState(t, nodes[1]))
	r = framework.C.Litepool(t, "upgrade", "resume", "--pool", "upg-fail", "--retry-failed")
	require.Equal(t, 0, r.ExitCode, "stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
	assert.Contains(t, r.Stdout, "node/upg-fail-2: failed → upgrade-required (retry)\n")
	assert.Regexp(t, `driverrollout \S+: Succeeded: 3/3 nodes at 24.1.0.3\n$`, r.Stdout)
	for _, n := range nodes {
		assert.Equal(t, "done", framework.UpgradeState(t, n))
		assert.False(t, framework.Node(t, n).Spec.Unschedulable)
	}
	assert.Equal(t, int32(2), rolloutOf(t, "upg-fail").Status.Nodes[1].Attempt)
	assert.Equal(t, 4, jobsFor(t, nodes), "the retry ran the installer of the failed node afresh")
}

func TestKilledRolloutResumesWithoutRedoingDoneNodes(t *testing.T) {
	t.Parallel()
	nodes := framework.AscendPool(t, "upg-kill", 4, oldDriver, software)
	ag := startAgent(2*time.Second, false, nodes...)
	w := watchUnschedulable(t, "upg-kill")

	// The built plugin as a subprocess, killed in the middle of the rollout.
	cmd := exec.Command(filepath.Join(framework.BinDir, "kubectl-litepool"), "--kubeconfig", framework.C.Kubeconfig,
		"upgrade", "driver", "--pool", "upg-kill", "--version", target, "--installer-image", installer, "--controller-timeout", "1s", "--yes")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	var inFlight string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		if framework.UpgradeState(t, nodes[0]) != "done" {
			return false, nil
		}
		// Kill while the installer runs or the driver is being validated.
		if s := policy.UpgradeState(framework.UpgradeState(t, nodes[1])); s == policy.UpgradeInstall || s == policy.UpgradeValidate {
			inFlight = string(s)
			return true, nil
		}
		return false, nil
	})
	require.NoError(t, err, out.String())
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	t.Logf("killed the plugin with %s done and %s in state %s", nodes[0], nodes[1], inFlight)
	assert.True(t, framework.Node(t, nodes[1]).Spec.Unschedulable, "the interrupted node is still cordoned")
	doneEvents := eventsFor(t, nodes[0], "DriverUpgrade")

	// What resume would do, changing nothing.
	dry := framework.C.MustLitepool(t, "upgrade", "resume", "--pool", "upg-kill", "--dry-run=client")
	assert.Regexp(t, `^would resume driverrollout \S+ \(→ 24.1.0.3\), max unavailable 1:
  wave 1: upg-kill-2 \(from (install|validate|uncordon)\)
  wave 2: upg-kill-3
  wave 3: upg-kill-4
\(dry run: nothing changed\)
$`, dry)

	r := framework.C.Litepool(t, "upgrade", "resume", "--pool", "upg-kill", "--controller-timeout", "1s")
	require.Equal(t, 0, r.ExitCode, "stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
	assert.Regexp(t, `driverrollout/\S+ resumed\n`, r.Stdout)
	assert.Regexp(t, `driverrollout \S+: Succeeded: 4/4 nodes at 24.1.0.3\n$`, r.Stdout)

	most, cordons := w.snapshot()
	assert.Equal(t, 1, most)
	for _, n := range nodes {
		assert.Equal(t, "done", framework.UpgradeState(t, n), n)
		assert.Equal(t, target, framework.Node(t, n).Labels[framework.DriverLabel], n)
		assert.False(t, framework.Node(t, n).Spec.Unschedulable, n)
		assert.Equal(t, 1, cordons[n], "cordons of %s", n)
		assert.Equal(t, 1, ag.InstallerPods(n), "installer pods of %s", n)
	}
	assert.Equal(t, doneEvents, eventsFor(t, nodes[0], "DriverUpgrade"), "resume did not touch the finished node")
	assert.Equal(t, 4, jobsFor(t, nodes))
	assert.Equal(t, "nothing to resume in pool upg-kill: no unfinished driver rollout\n", framework.C.MustLitepool(t, "upgrade", "resume", "--pool", "upg-kill"))
}

func TestIncompatibleTargetIsRefused(t *testing.T) {
	t.Parallel()
	nodes := framework.AscendPool(t, "upg-bad", 2, oldDriver, software)
	r := framework.C.Litepool(t, "upgrade", "driver", "--pool", "upg-bad", "--version", "23.0.rc3", "--installer-image", installer, "--yes")
	assert.Equal(t, 1, r.ExitCode)
	assert.Equal(t, "error: pre-flight refused the upgrade (pass --force to override): [C1] version chain is incompatible: cann 8.2.RC1 incompatible: driver 23.0.rc3 is published with CANN 7.0.RC1, and no CANN/HDK statement pairs CANN 8.2.RC1 with it\n", r.Stderr)
	assert.Contains(t, r.Stdout, "cann        8.2.RC1    incompatible   driver 23.0.rc3 is published with CANN 7.0.RC1")

	r = framework.C.Litepool(t, "upgrade", "driver", "--pool", "upg-bad", "--version", "99.0.1", "--installer-image", installer, "--yes")
	assert.Equal(t, 1, r.ExitCode)
	assert.Contains(t, r.Stderr, "error: pre-flight refused the upgrade (pass --force to override): [C1] version chain is unknown: driver 99.0.1 unknown: driver not listed for Snt9B")
	for _, n := range nodes {
		assert.Empty(t, framework.UpgradeState(t, n), "a refused upgrade changes nothing")
		assert.False(t, framework.Node(t, n).Spec.Unschedulable)
	}

	// --force overrides, loudly; here as a dry run.
	r = framework.C.Litepool(t, "upgrade", "driver", "--pool", "upg-bad", "--version", "23.0.rc3", "--installer-image", installer, "--force", "--dry-run=server")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.Contains(t, r.Stderr, "warning: --force: upgrading despite the pre-flight: [C1] version chain is incompatible")
	assert.Contains(t, r.Stdout, "(dry run: nothing changed)")
	assert.Empty(t, framework.UpgradeState(t, nodes[0]))

	// Bad flags: clear errors, nothing changed.
	for args, msg := range map[string][]string{
		"error: [U2] invalid --max-unavailable \"0\": want a node count of at least 1 or a percentage such as 25%\n": {"--pool", "upg-bad", "--version", target, "--max-unavailable", "0"},
		"error: give exactly one of --pool POOL or --node NODE\n":                                                    {"--version", target},
		"error: no installer image: give --installer-image, or set spec.upgrade.installerImage on the pool\n":        {"--pool", "upg-bad", "--version", target},
	} {
		r := framework.C.Litepool(t, append([]string{"upgrade", "driver", "--yes"}, msg...)...)
		assert.Equal(t, 1, r.ExitCode)
		assert.Equal(t, args, r.Stderr)
	}
}

func TestCheckCompat(t *testing.T) {
	t.Parallel()
	framework.AscendPool(t, "upg-chk", 1, oldDriver, software)
	r := framework.C.Litepool(t, "check", "compat", "--pool", "upg-chk")
	assert.Equal(t, 1, r.ExitCode)
	assert.Equal(t, `pool upg-chk (nodes upg-chk-1): huawei-ascend, matrix embedded
LINK        VERSION   VERDICT        REASON
hardware    Snt9B     compatible     known Ascend model: Snt9B
driver      23.0.6    compatible     published for Snt9B: allowed (Lite Cluster / Standard only, ModelArts 7.3.0)
firmware    -         not-declared   not declared
cann        8.2.RC1   incompatible   driver 23.0.6 is published with CANN 7.0.1.5, 8.0.RC2, and no CANN/HDK statement pairs CANN 8.2.RC1 with it
torch_npu   -         not-declared   not declared
image       -         not-declared   not declared
verdict: incompatible
`, r.Stdout)
	assert.Equal(t, "error: pool upg-chk: [C1] version chain is incompatible: cann 8.2.RC1 incompatible: driver 23.0.6 is published with CANN 7.0.1.5, 8.0.RC2, and no CANN/HDK statement pairs CANN 8.2.RC1 with it\n", r.Stderr)

	// What if the pool ran 24.1.0.3?
	out := framework.C.MustLitepool(t, "check", "compat", "--pool", "upg-chk", "--driver", target, "--firmware", "7.5.0.5.220")
	assert.Contains(t, out, "firmware    7.5.0.5.220   compatible     published with driver 24.1.0.3\n")
	assert.Contains(t, out, "verdict: compatible\n")

	// An NVIDIA pool of the shared fixture (read only): GPU and driver from the nodes'
	// feature-discovery labels.
	r = framework.C.Litepool(t, "check", "compat", "--pool", "train-a100", "--cuda", "12.2", "--pytorch", "2.3.1")
	assert.Equal(t, 1, r.ExitCode)
	assert.Equal(t, `pool train-a100 (nodes a100-node-1, a100-node-2, a100-node-3): nvidia, matrix embedded
LINK       VERSION      VERDICT        REASON
hardware   A100-80G     compatible     NVIDIA A100 (Ampere, compute capability 8.0), needs CUDA >= 11.0
driver     535.104.05   compatible     driver branch R535 (Long Term Support Branch, EOL June 2026)
cuda       12.2         compatible     driver 535.104.05 >= 535.54.03, every CUDA 12.2 feature
pytorch    2.3.1        incompatible   PyTorch 2.3 is built for CUDA 11.8, 12.1, not 12.2
image      -            not-declared   not declared
verdict: incompatible
`, r.Stdout)

	// A site's own matrix from a ConfigMap.
	_, err := framework.C.Kube.CoreV1().ConfigMaps("default").Create(context.Background(), configMap("site-matrix", `schema_version: 1
vendors:
  huawei-ascend:
    hardware:
    - model: Lab9
      releases:
      - driver: 1.0.0
        cann: [2.0.0]
        source: site qualification 2026-10
`), metav1.CreateOptions{})
	require.NoError(t, err)
	out = framework.C.MustLitepool(t, "check", "compat", "--compat-configmap", "default/site-matrix", "--hardware", "Lab9", "--driver", "1.0.0", "--cann", "2.0.0", "-o", "wide")
	assert.Contains(t, out, "versions given: huawei-ascend, matrix configmap default/site-matrix\n")
	assert.Contains(t, out, "cann        2.0.0     compatible     listed with driver 1.0.0 for Lab9   site qualification 2026-10\n")
	r = framework.C.Litepool(t, "check", "compat", "--compat-configmap", "default/nope", "--hardware", "Lab9")
	assert.Equal(t, "error: reading --compat-configmap default/nope: configmaps \"nope\" not found\n", r.Stderr)
}

func TestFailedCanaryStopsThePool(t *testing.T) {
	t.Parallel()
	nodes := framework.AscendPool(t, "upg-canary", 3, oldDriver, software)
	startAgent(0, false, nodes[0], nodes[1])
	startAgent(0, true, nodes[2]) // the canary's driver never reports the target
	r := framework.C.Litepool(t, "upgrade", "driver", "--pool", "upg-canary", "--version", target, "--installer-image", installer,
		"--max-unavailable", "2", "--canary", nodes[2], "--validate-timeout", "3s", "--yes")
	assert.Equal(t, 1, r.ExitCode, r.Stdout)
	assert.Contains(t, r.Stderr, "node upg-canary-3 failed in validate")
	assert.Equal(t, "failed", framework.UpgradeState(t, nodes[2]))
	for _, n := range nodes[:2] {
		assert.Equal(t, "upgrade-required", framework.UpgradeState(t, n), "no node starts after the canary failed")
		assert.False(t, framework.Node(t, n).Spec.Unschedulable, n)
	}

	r = framework.C.Litepool(t, "upgrade", "driver", "--pool", "upg-canary", "--version", target, "--installer-image", installer, "--canary", "upg-six-1", "--yes")
	assert.Equal(t, "error: --canary \"upg-six-1\" is not a node of pool \"upg-canary\" that needs the upgrade (nodes to upgrade: upg-canary-1, upg-canary-2, upg-canary-3)\n", r.Stderr)

	// One node, one unfinished rollout (U4).
	r = framework.C.Litepool(t, "upgrade", "driver", "--node", nodes[2], "--version", target, "--installer-image", installer, "--yes")
	assert.Equal(t, 1, r.ExitCode)
	assert.Regexp(t, `error: \[U4\] node "upg-canary-3" is already in driver rollout \S+ \(state failed\)`, r.Stderr)

	// Abort: the nodes that had not started leave the rollout; the failed one stays.
	out := framework.C.MustLitepool(t, "upgrade", "abort", "--pool", "upg-canary", "--controller-timeout", "1s")
	assert.Contains(t, out, " aborted: 2 node(s) leave the rollout: upg-canary-1, upg-canary-2\nfailed, left cordoned for inspection: upg-canary-3\n")
	assert.Regexp(t, `driverrollout \S+: Aborted: aborted: 0/1 done, 2 left the rollout, 1 failed\n$`, out)
	assert.Empty(t, framework.UpgradeState(t, nodes[0]))
	assert.Equal(t, "failed", framework.UpgradeState(t, nodes[2]))
	assert.Equal(t, v1alpha1.RolloutAborted, rolloutOf(t, "upg-canary").Status.Phase)
	res := framework.C.Kubectl(t, "", "patch", "driverrollout", rolloutOf(t, "upg-canary").Name, "--type=merge", "-p", `{"spec":{"abort":false}}`)
	assert.Contains(t, res.Stderr, "spec.abort cannot be undone: start another rollout")
}

// gpu-operator#688: nodes someone else made unavailable must not stall a rollout
// silently. The rollout stops with the reason; resume with a larger budget goes on.
func TestBudgetTakenByOthersIsReportedAndResumable(t *testing.T) {
	t.Parallel()
	nodes := framework.AscendPool(t, "upg-budget", 3, oldDriver, software)
	startAgent(0, false, nodes...)
	// upg-budget-3 is already at the target, and cordoned by someone else.
	_, err := framework.C.Kube.CoreV1().Nodes().Patch(context.Background(), nodes[2], types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"huawei.com/driver.version":"24.1.0.3"}},"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	r := framework.C.Litepool(t, "upgrade", "driver", "--pool", "upg-budget", "--version", target, "--installer-image", installer, "--yes")
	assert.Equal(t, 1, r.ExitCode, r.Stdout)
	assert.Regexp(t, "error: \\[U2\\] rollout \\S+ cannot start more nodes: max unavailable 1 is taken by 1 unavailable node\\(s\\) of the pool \\(upg-budget-3\\); 0/2 done; bring them back or raise it: `kubectl litepool upgrade resume \\S+ --max-unavailable N`\n", r.Stderr)
	assert.Equal(t, "upgrade-required", framework.UpgradeState(t, nodes[0]))

	r = framework.C.Litepool(t, "upgrade", "resume", "--pool", "upg-budget", "--max-unavailable", "2", "--controller-timeout", "1s")
	require.Equal(t, 0, r.ExitCode, "stdout:\n%s\nstderr:\n%s", r.Stdout, r.Stderr)
	assert.Regexp(t, `driverrollout \S+: Succeeded: 2/2 nodes at 24.1.0.3\n$`, r.Stdout)
	assert.Equal(t, "2", rolloutOf(t, "upg-budget").Spec.MaxUnavailable.String())
	assert.Equal(t, "done", framework.UpgradeState(t, nodes[1]))
	assert.True(t, framework.Node(t, nodes[2]).Spec.Unschedulable, "the foreign cordon is left alone")
}
