package realnode

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// hostState is what a real node changes on the host and teardown must give back.
type hostState struct {
	Processes []string          // processes of the node: containerd, shims, kubelet, containers
	Mounts    []string          // every mount point
	Chains    []string          // iptables and ip6tables: chains and rules, without counters
	Links     []string          // network interfaces
	Cgroups   []string          // the kubelet's and containerd's cgroups
	Sysctls   map[string]string // what the kubelet and the bridge plugin set
}

// The sysctls hack/realnode.sh saves and restores.
var sysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward"}

// nodePrograms are the programs a real node runs; their processes must all be gone.
var nodePrograms = map[string]bool{"containerd": true, "containerd-shim-runc-v2": true, "kubelet": true, "runc": true, "testbin": true, "litepool-webhook": true}

func snapshotHost() (hostState, error) {
	var s hostState
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		exe, err := os.Readlink(p + "/exe")
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(p + "/cmdline")
		args := strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " ")
		// litepool-webhook also runs as local processes of other e2e packages: only
		// those in a container (a child of a shim) belong to the node; any process
		// naming the node's state directory does.
		name := filepath.Base(strings.TrimSuffix(exe, " (deleted)"))
		mine := strings.Contains(args, filepath.Join(framework.Root, "_output", "realnode"))
		if nodePrograms[name] && (name != "litepool-webhook" || parentIsShim(p)) {
			mine = true
		}
		if mine {
			s.Processes = append(s.Processes, fmt.Sprintf("%s %s", filepath.Base(p), args))
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return s, err
	}
	for _, l := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(l); len(f) > 4 {
			s.Mounts = append(s.Mounts, f[4])
		}
	}
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(save).Output()
		if err != nil {
			return s, fmt.Errorf("%s: %w", save, err)
		}
		s.Chains = append(s.Chains, iptablesState(save, out)...)
	}
	links, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return s, err
	}
	for _, l := range links {
		s.Links = append(s.Links, l.Name())
	}
	for _, pattern := range []string{"/sys/fs/cgroup/*/kubepods*", "/sys/fs/cgroup/*/k8s.io"} {
		m, _ := filepath.Glob(pattern)
		s.Cgroups = append(s.Cgroups, m...)
	}
	s.Sysctls = map[string]string{}
	for _, k := range sysctls {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			return s, err
		}
		s.Sysctls[k] = strings.TrimSpace(string(b))
	}
	for _, l := range [][]string{s.Processes, s.Mounts, s.Chains, s.Links, s.Cgroups} {
		sort.Strings(l)
	}
	return s, nil
}

func parentIsShim(proc string) bool {
	stat, err := os.ReadFile(proc + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ppid ...
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 2 {
		return false
	}
	comm, _ := os.ReadFile("/proc/" + f[1] + "/comm")
	return strings.HasPrefix(strings.TrimSpace(string(comm)), "containerd-shim")
}

// iptablesState is every chain and rule of an iptables-save dump, without packet
// counters. A built-in chain with the ACCEPT policy and no rules is left out: a table
// iptables creates on first use holds only those, and behaves as no table at all.
func iptablesState(tool string, dump []byte) []string {
	var out []string
	table := ""
	sc := bufio.NewScanner(bytes.NewReader(dump))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
		case strings.HasPrefix(l, ":"):
			f := strings.Fields(l[1:])
			if len(f) >= 2 && f[1] != "ACCEPT" {
				out = append(out, fmt.Sprintf("%s %s chain %s %s", tool, table, f[0], f[1]))
			}
		case strings.HasPrefix(l, "-A "):
			out = append(out, fmt.Sprintf("%s %s %s", tool, table, l))
		}
	}
	return out
}

// testTeardown stops the cluster and its real node and compares the host with what it
// was before the package started.
func testTeardown(t *testing.T) {
	if os.Getenv("LITEPOOL_E2E_KEEP") != "" {
		t.Skip("LITEPOOL_E2E_KEEP is set: the cluster and its real node are kept to look at")
	}
	during, err := snapshotHost()
	require.NoError(t, err)
	assert.NotEmpty(t, during.Processes, "the node ran processes (the snapshot sees them)")
	assert.Contains(t, during.Links, "litepool0", "the node's bridge (the snapshot sees links)")
	assert.Contains(t, strings.Join(during.Chains, "\n"), "LITEPOOL-REALNODE", "the DNAT chain (the snapshot sees chains)")

	require.NoError(t, framework.C.Stop())
	after, err := snapshotHost()
	require.NoError(t, err)
	assert.Equal(t, hostBefore.Processes, after.Processes, "processes")
	assert.Equal(t, hostBefore.Mounts, after.Mounts, "mounts")
	assert.Equal(t, hostBefore.Chains, after.Chains, "iptables chains and rules")
	assert.Equal(t, hostBefore.Links, after.Links, "network links")
	assert.Equal(t, hostBefore.Cgroups, after.Cgroups, "cgroups")
	assert.Equal(t, hostBefore.Sysctls, after.Sysctls, "sysctls")
}
