package framework

import "testing"

// RealNode is the node hack/realnode.sh adds: a real kubelet running real containers
// (containerd, runc) beside the nodes kwok plays.
const RealNode = "litepool-realnode"

// StartRealNode is Start for the real-node variant of the cluster (hack/cluster.sh up
// NAME KUBECONFIG --real-node): the sample AI cluster, and RealNode Ready.
func StartRealNode(name string) (*Cluster, error) { return start(name, true, "--real-node") }

// MainRealNode is Main on the real-node variant. The package's tests stop the cluster
// themselves (they check what teardown leaves on the host); this stops it again if
// they did not get there.
func MainRealNode(m *testing.M, name string) {
	runMain(m, name, "the local control plane with a real node", func() (*Cluster, error) { return StartRealNode(name) })
}
