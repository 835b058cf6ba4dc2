package plugin

import (
	"k8s.io/client-go/kubernetes"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/runwhere-ai/litepool/pkg/poolclient"
)

// clients are what a command talks to the cluster with.
type clients struct {
	kube  kubernetes.Interface
	pools *poolclient.Client
}

// newClients builds the clients from kubectl's flags. Core types travel as protobuf,
// which halves decode time and memory on large lists.
func newClients(f cmdutil.Factory) (*clients, error) {
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest(cfg)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := f.DynamicClient()
	if err != nil {
		return nil, err
	}
	return &clients{kube: kube, pools: poolclient.New(dyn)}, nil
}
