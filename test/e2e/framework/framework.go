// Package framework runs e2e tests against the local control plane: it starts a kwok
// cluster through hack/cluster.sh (the same script `make cluster` uses), loads the sample
// AI cluster, and runs the built plugin through real kubectl plugin discovery.
//
// A test package calls Main from its TestMain with a cluster name of its own, so that
// packages run side by side. If the control plane cannot start, Main fails the run
// loudly: e2e tests never skip.
package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/runwhere-ai/litepool/internal/repo"
)

// Root is the repository root.
var Root = repo.Root()

// BinDir holds the built plugin, webhook and control plane.
var BinDir = filepath.Join(Root, "_output", "bin")

// Cluster is a running local control plane.
type Cluster struct {
	Name       string
	Kubeconfig string
	Config     *rest.Config
	Kube       kubernetes.Interface
	Dynamic    dynamic.Interface
}

// C is the package's cluster, set by Main.
var C *Cluster

// Main starts the cluster NAME with the sample fixtures, runs the tests and stops the
// cluster (unless LITEPOOL_E2E_KEEP is set, to look at it afterwards).
func Main(m *testing.M, name string) {
	runMain(m, name, "the local control plane", func() (*Cluster, error) { return Start(name, true) })
}

// MainWith is Main with more to start once the cluster runs (cert-manager, ...):
// setup's error fails the run as a cluster that did not start does, and what it returns
// is stopped after the tests.
func MainWith(m *testing.M, name, what string, setup func(*Cluster) (stop func(), err error)) {
	var stop func()
	runMain(m, name, "the local control plane and "+what, func() (*Cluster, error) {
		c, err := Start(name, true)
		if err == nil {
			stop, err = setup(c)
		}
		return c, err
	}, func() { stop() })
}

// runMain is Main with the cluster start given: a cluster that did not start is
// deleted again (a half-started one holds ports and, with a real node, host state).
func runMain(m *testing.M, name, what string, start func() (*Cluster, error), after ...func()) {
	c, err := start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FATAL: e2e: %s did not start: %v\n", what, err)
		_ = script("down", name)
		os.Exit(1)
	}
	C = c
	code := m.Run()
	for _, f := range after {
		f()
	}
	if os.Getenv("LITEPOOL_E2E_KEEP") == "" {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: stopping cluster %s: %v\n", name, err)
		}
	} else {
		fmt.Fprintf(os.Stderr, "e2e: cluster %s kept; kubeconfig %s\n", name, c.Kubeconfig)
	}
	os.Exit(code)
}

// Start brings up cluster NAME (fresh: an earlier one of that name is deleted first)
// and, with fixtures, loads the sample AI cluster.
func Start(name string, fixtures bool) (*Cluster, error) { return start(name, fixtures) }

// start is Start with extra flags for `hack/cluster.sh up` (--real-node).
func start(name string, fixtures bool, upFlags ...string) (*Cluster, error) {
	kubeconfig := filepath.Join(Root, "_output", "e2e", name, "kubeconfig")
	_ = script("down", name)
	if err := script(append([]string{"up", name, kubeconfig}, upFlags...)...); err != nil {
		return nil, err
	}
	if fixtures {
		if err := script("fixtures", kubeconfig); err != nil {
			return nil, err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 100, 200
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Cluster{Name: name, Kubeconfig: kubeconfig, Config: cfg, Kube: kube, Dynamic: dyn}, nil
}

// Stop deletes the cluster and every process it started.
func (c *Cluster) Stop() error { return script("down", c.Name) }

func script(args ...string) error {
	cmd := exec.Command(filepath.Join(Root, "hack", "cluster.sh"), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hack/cluster.sh %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return nil
}

// Result is what a command printed.
type Result struct {
	Stdout, Stderr string
	ExitCode       int
}

// Kubectl runs kubectl against the cluster (KUBECONFIG in its environment) with the
// plugin directory first on PATH, so `kubectl litepool ...` goes through kubectl's own
// plugin discovery.
func (c *Cluster) Kubectl(t testing.TB, stdin string, args ...string) Result {
	t.Helper()
	return c.KubectlEnv(t, []string{"KUBECONFIG=" + c.Kubeconfig}, stdin, args...)
}

// KubectlEnv is Kubectl with extra environment variables (later ones win).
func (c *Cluster) KubectlEnv(t testing.TB, env []string, stdin string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	cmd.Env = append(os.Environ(), "PATH="+BinDir+string(os.PathListSeparator)+os.Getenv("PATH"), "NO_COLOR=1")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	if err != nil {
		exit, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("running kubectl %v: %v", args, err)
		}
		res.ExitCode = exit.ExitCode()
	}
	return res
}

// Litepool runs `kubectl litepool ARGS...` and returns what it printed.
func (c *Cluster) Litepool(t testing.TB, args ...string) Result {
	t.Helper()
	return c.Kubectl(t, "", append([]string{"litepool"}, args...)...)
}

// MustLitepool runs `kubectl litepool ARGS...` and fails the test on a non-zero exit.
func (c *Cluster) MustLitepool(t testing.TB, args ...string) string {
	t.Helper()
	r := c.Litepool(t, args...)
	if r.ExitCode != 0 {
		t.Fatalf("kubectl litepool %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.ExitCode, r.Stdout, r.Stderr)
	}
	return r.Stdout
}
