package kit

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/utils/clock"

	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/spf13/pflag"
)

// Clients are what a command talks to the cluster with, and the accelerator set it
// counts with (--accelerator-resources: the same flag, and so the same set, as the
// cluster's litepool-webhook).
type Clients struct {
	Kube         kubernetes.Interface
	Pools        *poolclient.Client
	Accelerators policy.Accelerators
	// Dynamic reads other systems' objects litepool writes (Volcano's HyperNodes); nil
	// in tests that read none.
	Dynamic dynamic.Interface
}

// Factory is the one seam between a command and the world: its clients, its clock and
// kubectl's configuration (context, namespace). The real one reads kubectl's flags;
// unit tests pass kittest.NewFactory, backed by fake clientsets and a fake clock.
type Factory interface {
	genericclioptions.RESTClientGetter
	// Clients builds the clients (once the flags are parsed).
	Clients() (*Clients, error)
	// Clock is the time commands read: rollout ids, lease freshness, event ages.
	Clock() clock.PassiveClock
	// DynamicClient reaches litepool's other kinds (DriverRollouts, StressRuns) as
	// unstructured objects.
	DynamicClient() (dynamic.Interface, error)
}

// NewFactory is the Factory of a real run, over kubectl's flags; accelerators is the
// value of --accelerator-resources (AddAcceleratorsFlag), read when the clients are
// built.
func NewFactory(f cmdutil.Factory, accelerators *string) Factory {
	return &factory{Factory: f, accelerators: accelerators}
}

type factory struct {
	cmdutil.Factory
	accelerators *string
	clients      *Clients
}

// AddAcceleratorsFlag adds --accelerator-resources, the webhook's flag of the same name.
func AddAcceleratorsFlag(flags *pflag.FlagSet) *string {
	return flags.String(policy.AcceleratorResourcesFlag, "",
		"Extra extended resources that count as accelerators, comma-separated (e.g. vendor.example/xpu); give the cluster's litepool-webhook the same list")
}

// Clients builds the clients from kubectl's flags. Core types travel as protobuf,
// which halves decode time and memory on large lists.
func (f *factory) Clients() (*Clients, error) {
	if f.clients != nil {
		return f.clients, nil
	}
	var accel policy.Accelerators
	if f.accelerators != nil {
		var err error
		if accel, err = policy.ParseAccelerators(*f.accelerators); err != nil {
			return nil, err
		}
	}
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(RESTConfig(cfg))
	if err != nil {
		return nil, err
	}
	dyn, err := f.DynamicClient()
	if err != nil {
		return nil, err
	}
	f.clients = &Clients{Kube: kube, Pools: poolclient.New(dyn), Accelerators: accel, Dynamic: dyn}
	return f.clients, nil
}

func (f *factory) Clock() clock.PassiveClock { return clock.RealClock{} }

// RESTConfig returns a copy of cfg that speaks protobuf for built-in types, and a
// higher client-side rate limit than client-go's default 5 QPS, which would throttle
// paged lists of large clusters.
func RESTConfig(cfg *restclient.Config) *restclient.Config {
	cfg = restclient.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	if cfg.QPS < 50 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	return cfg
}
