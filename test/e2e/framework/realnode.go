package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// RealNode is the node hack/realnode.sh adds: a real kubelet running real containers
// (containerd, runc) beside the nodes kwok plays.
const RealNode = "litepool-realnode"

// StartRealNode is Start for the real-node variant of the cluster (hack/cluster.sh up
// NAME KUBECONFIG --real-node): the sample AI cluster, and RealNode Ready.
func StartRealNode(name string) (*Cluster, error) {
	kubeconfig := filepath.Join(Root, "_output", "e2e", name, "kubeconfig")
	_ = script("down", name)
	if err := script("up", name, kubeconfig, "--real-node"); err != nil {
		return nil, err
	}
	if err := script("fixtures", kubeconfig); err != nil {
		return nil, err
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

// MainRealNode is Main on the real-node variant. The package's tests stop the cluster
// themselves (they check what teardown leaves on the host); this stops it again if
// they did not get there.
func MainRealNode(m *testing.M, name string) {
	c, err := StartRealNode(name)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FATAL: e2e: the local control plane with a real node did not start: %v\n", err)
		_ = script("down", name)
		os.Exit(1)
	}
	C = c
	code := m.Run()
	if os.Getenv("LITEPOOL_E2E_KEEP") == "" {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: stopping cluster %s: %v\n", name, err)
		}
	} else {
		fmt.Fprintf(os.Stderr, "e2e: cluster %s kept; kubeconfig %s\n", name, c.Kubeconfig)
	}
	os.Exit(code)
}
