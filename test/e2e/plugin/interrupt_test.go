package plugin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	fw "github.com/runwhere-ai/litepool/test/e2e/framework"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// plugin is kubectl-litepool started directly (not through kubectl), so that a signal
// sent to it reaches the plugin itself.
type plugin struct {
	cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
	done           chan struct{}
}

func startPlugin(t *testing.T, args ...string) *plugin {
	t.Helper()
	p := &plugin{cmd: exec.Command(filepath.Join(fw.BinDir, "kubectl-litepool"), args...),
		stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "KUBECONFIG="+fw.C.Kubeconfig)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	require.NoError(t, p.cmd.Start())
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// exitCode waits for the process to end.
func (p *plugin) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("kubectl-litepool did not exit\nstdout:\n%s\nstderr:\n%s", p.stdout, p.stderr)
	}
	return p.cmd.ProcessState.ExitCode()
}

// waitDraining waits until the node carries runwhere.ai/draining and the plugin has
// printed its first eviction: the drain has started and is blocked (a PDB refuses the
// eviction). The mark is written before the first eviction, so a signal sent on the
// mark alone could come before the eviction line.
func waitDraining(t *testing.T, p *plugin, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx(), waitInterval, waitTimeout, true, func(c context.Context) (bool, error) {
		n, err := fw.C.Kube.CoreV1().Nodes().Get(c, name, metav1.GetOptions{})
		return err == nil && n.Annotations["runwhere.ai/draining"] != "" && strings.Contains(p.stdout.String(), "evicting pod "), err
	})
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", p.stdout, p.stderr)
}

// A scale-down interrupted with SIGINT in the middle of a drain a PDB blocks runs its
// put-back: the node stays in the pool, uncordoned, with no scale-down mark, no
// draining mark and no cordon memory left.
func TestScaleDownInterruptedMidDrainPutsBack(t *testing.T) {
	restoreAfter(t)
	guarded := deployOn(t, "guarded", "a100-node-3", true)
	before := snapshot(t)

	p := startPlugin(t, "scale", "train-a100", "--remove", "a100-node-3", "--timeout=5m", "--yes")
	waitDraining(t, p, "a100-node-3")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	assert.Equal(t, 1, p.exitCode(t), p.stderr.String())

	assert.Equal(t, "node/a100-node-3 cordoned\nevicting pod ai-team/"+guarded+"\n", p.stdout.String())
	assert.Contains(t, p.stderr.String(), "interrupted: stopping and putting back what this command changed; press Ctrl-C again to exit at once\n")
	assert.Contains(t, p.stderr.String(), "error: scale-down of pool \"train-a100\" stopped: interrupted (SIGINT/SIGTERM)\nno node left the pool; put back: a100-node-3 (uncordoned)\n")
	assertUnchanged(t, before)
}

// An interrupted drain puts its node back (uncordoned: the drain had cordoned it), with
// no draining mark left; its pod keeps running.
func TestDrainInterruptedPutsBack(t *testing.T) {
	restoreAfter(t)
	deployOn(t, "guarded", "a100-node-3", true)
	before := snapshot(t)

	p := startPlugin(t, "drain", "a100-node-3", "--ignore-daemonsets")
	waitDraining(t, p, "a100-node-3")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 1, p.exitCode(t), p.stderr.String())
	assert.Contains(t, p.stdout.String(), "node/a100-node-3 uncordoned\n")
	assert.Contains(t, p.stderr.String(), "error: drain of node \"a100-node-3\" interrupted (SIGINT/SIGTERM); the node was put back (uncordoned)")
	assertUnchanged(t, before)
}

// A second signal exits at once (130), skipping the put-back, and prints what was left
// with the commands that put it back; those commands, run as printed, leave the node as
// it was. (SIGTERM then SIGINT are sent together: two different signals are never
// merged by the kernel, so the plugin sees both before its put-back could finish.)
func TestScaleDownSecondSignalExitsAtOnceWithThePutBackCommands(t *testing.T) {
	restoreAfter(t)
	deployOn(t, "guarded", "a100-node-3", true)
	before := snapshot(t)

	p := startPlugin(t, "scale", "train-a100", "--remove", "a100-node-3", "--timeout=5m", "--yes")
	waitDraining(t, p, "a100-node-3")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	require.Equal(t, 130, p.exitCode(t), p.stderr.String())

	stderr := p.stderr.String()
	assert.Contains(t, stderr, "interrupted again: exiting at once.\n"+
		"scale-down of pool train-a100 left node(s) a100-node-3 cordoned and marked runwhere.ai/scale-down=train-a100.\n"+
		"Resume it (it picks the marked nodes first):\n  kubectl litepool scale train-a100 --remove a100-node-3 --timeout=5m --yes\n"+
		"Or put them back:\n  kubectl annotate node a100-node-3 runwhere.ai/scale-down- runwhere.ai/draining- runwhere.ai/was-cordoned-by-scale-down-\n  kubectl uncordon a100-node-3\n")

	_, back, found := strings.Cut(stderr, "Or put them back:\n")
	require.True(t, found, stderr)
	for _, line := range strings.Split(strings.TrimRight(back, "\n"), "\n") {
		args := strings.Fields(line)
		require.Equal(t, "kubectl", args[0], line)
		r := fw.C.Kubectl(t, "", args[1:]...)
		require.Equal(t, 0, r.ExitCode, "%s: %s", line, r.Stderr)
	}
	assertUnchanged(t, before)
}

// A deletion interrupted half-way (SIGINT after the first node's labels went) keeps its
// Pool object and says to run it again; run again, it finishes: every node released,
// no override and no exclusive taint left, the Pool object gone.
func TestDeletePoolInterruptedHalfWayFinishesWhenRunAgain(t *testing.T) {
	restoreAfter(t)
	var nodes []string
	for i := 1; i <= 8; i++ {
		name := fmt.Sprintf("wide-node-%d", i)
		addKwokNode(t, name, map[string]string{"runwhere.ai/gpu-type": "A100-80G", "runwhere.ai/pool": "wide-pool"})
		changeNode(t, name, func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "runwhere.ai/pool", Value: "wide-pool", Effect: corev1.TaintEffectNoSchedule})
		})
		nodes = append(nodes, name)
	}
	_, err := pools().Create(ctx(), &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "wide-pool"}, Spec: v1alpha1.PoolSpec{
		Type: "Training", Accelerator: v1alpha1.AcceleratorSpec{Type: "A100-80G"}, MinNodes: 4, Exclusive: true}}, metav1.CreateOptions{})
	require.NoError(t, err)

	p := startPlugin(t, "delete", "pool", "wide-pool", "--yes")
	err = wait.PollUntilContextTimeout(ctx(), 5*time.Millisecond, waitTimeout, true, func(c context.Context) (bool, error) {
		n, err := fw.C.Kube.CoreV1().Nodes().Get(c, nodes[0], metav1.GetOptions{})
		return err == nil && n.Labels["runwhere.ai/pool"] == "", err
	})
	require.NoError(t, err)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	require.Equal(t, 1, p.exitCode(t), "stdout:\n%s\nstderr:\n%s", p.stdout, p.stderr)
	assert.Regexp(t, `error: pool "wide-pool": deletion interrupted \(SIGINT/SIGTERM\) while releasing node "wide-node-\d"; the Pool object is kept: run the command again to release the rest and delete it\n$`, p.stderr.String())
	_, err = pools().Get(ctx(), "wide-pool")
	require.NoError(t, err, "the Pool object is kept until every node is released")
	members, err := fw.C.Kube.CoreV1().Nodes().List(ctx(), metav1.ListOptions{LabelSelector: "runwhere.ai/pool=wide-pool"})
	require.NoError(t, err)
	assert.NotEmpty(t, members.Items, "stopped half-way: some nodes are still members")

	r := run(t, "", "delete", "pool", "wide-pool", "--yes")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.True(t, strings.HasSuffix(r.Stdout, "pool.runwhere.ai/wide-pool deleted\n"), r.Stdout)
	_, err = pools().Get(ctx(), "wide-pool")
	assert.True(t, isNotFound(err), "the Pool object is gone")
	for _, name := range nodes {
		st := stateOf(node(t, name))
		assert.Equal(t, nodeState{Labels: st.Labels, Annotations: map[string]string{}}, st, "%s: no override, no taint left", name)
		assert.NotContains(t, st.Labels, "runwhere.ai/pool", name)
	}
}
