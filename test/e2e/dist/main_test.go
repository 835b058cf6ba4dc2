// Package dist is the first hour of a user, against the local control plane: the
// linux/amd64 release archive that `make dist` builds, unpacked onto PATH, gives a
// working `kubectl litepool`; shell completion returns the cluster's pool names, both
// from the plugin and through kubectl's own completion with the shipped
// kubectl_complete-litepool script; a pool printed as YAML can be applied back.
package dist

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const version = "v0.1.0-e2e"

var (
	// installDir holds the unpacked archive: kubectl-litepool, kubectl_complete-litepool
	// and LICENSE, as a user who downloads a release has them.
	installDir string
	// pluginOnlyDir holds only kubectl-litepool, as krew installs it.
	pluginOnlyDir string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "litepool-e2e-dist-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := install(dir); err != nil {
		fmt.Fprintf(os.Stderr, "FATAL: e2e dist: %v\n", err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	framework.Main(m, "e2e-dist")
}

// install builds the linux/amd64 archive with hack/dist.sh and unpacks it the way the
// install docs say: tar xzf into a directory that goes first on PATH.
func install(dir string) error {
	out := filepath.Join(dir, "dist")
	build := exec.Command(filepath.Join(framework.Root, "hack", "dist.sh"), version, out)
	build.Env = append(os.Environ(), "DIST_PLATFORMS=linux/amd64")
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("hack/dist.sh: %v\n%s", err, b)
	}
	installDir = filepath.Join(dir, "bin")
	pluginOnlyDir = filepath.Join(dir, "krew-bin")
	for _, d := range []string{installDir, pluginOnlyDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	archive := filepath.Join(out, "kubectl-litepool_"+version+"_linux_amd64.tar.gz")
	if b, err := exec.Command("tar", "-xzf", archive, "-C", installDir).CombinedOutput(); err != nil {
		return fmt.Errorf("tar: %v\n%s", err, b)
	}
	return os.Symlink(filepath.Join(installDir, "kubectl-litepool"), filepath.Join(pluginOnlyDir, "kubectl-litepool"))
}

// pathWith is PATH with dir first and without the repository's _output/bin, so that
// kubectl finds the released plugin and nothing else of ours.
func pathWith(dir string) string {
	keep := []string{dir}
	for _, p := range filepath.SplitList(os.Getenv("PATH")) {
		if filepath.Clean(p) != filepath.Clean(framework.BinDir) {
			keep = append(keep, p)
		}
	}
	return "PATH=" + strings.Join(keep, string(os.PathListSeparator))
}

// kubectl runs kubectl against the e2e cluster with dir first on PATH.
func kubectl(t *testing.T, dir, stdin string, args ...string) framework.Result {
	t.Helper()
	return framework.C.KubectlEnv(t, []string{"KUBECONFIG=" + framework.C.Kubeconfig, pathWith(dir)}, stdin, args...)
}
