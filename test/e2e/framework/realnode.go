package framework

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
)

// RealNode is the node hack/realnode.sh adds: a real kubelet running real containers
// (containerd, runc) beside the nodes kwok plays.
const RealNode = "litepool-realnode"

// InstallRealNodePackages installs what a real node needs from Debian's apt
// (hack/realnode.sh packages: containerd, runc, the CNI plugins, iptables), those not
// installed yet. A fresh machine has none of them; a package that reads the host's state
// calls it first, so that "before" includes what the project installs and keeps.
func InstallRealNodePackages() error {
	cmd := exec.Command(filepath.Join(Root, "hack", "realnode.sh"), "packages")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hack/realnode.sh packages: %v\n%s", err, out.String())
	}
	return nil
}

// StartRealNode is Start for the real-node variant of the cluster (hack/cluster.sh up
// NAME KUBECONFIG --real-node): the sample AI cluster, and RealNode Ready.
func StartRealNode(name string) (*Cluster, error) { return start(name, true, "--real-node") }

// MainRealNode is Main on the real-node variant. The package's tests stop the cluster
// themselves (they check what teardown leaves on the host); this stops it again if
// they did not get there.
func MainRealNode(m *testing.M, name string) {
	runMain(m, name, "the local control plane with a real node", func() (*Cluster, error) { return StartRealNode(name) })
}
