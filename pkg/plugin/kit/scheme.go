package kit

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// Scheme knows the core types and Pool, for printers and decoders.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	return s
}()

// ObjectClient is a controller-runtime client over kubectl's configuration that knows
// Scheme's types: the commands that read and write litepool's own kinds (StressRun,
// DriverRollout, Pool status) use it.
func ObjectClient(f Factory) (client.Client, error) {
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: Scheme})
}
