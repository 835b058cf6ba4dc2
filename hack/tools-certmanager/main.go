// Command certmanager runs cert-manager's own controllers and CA injector, as built from
// the github.com/cert-manager/cert-manager module hack/tools-certmanager pins, for the
// e2e tests of deploy/webhook/components/cert-manager (test/e2e/certmanager).
//
// cert-manager's binaries live in nested modules (cmd/controller, cmd/cainjector) that
// the Go module proxy does not serve; their packages (every controller, the issuers, the
// injector's reconcilers) are in the main module, which it does. This main wires them
// as cert-manager's own mains do, without their flags, leader election, metrics or
// health servers, and with only the issuers litepool's component uses (selfSigned, CA):
//
//	certmanager controller --kubeconfig FILE --cluster-resource-namespace NS
//	certmanager cainjector --kubeconfig FILE
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmapi "github.com/cert-manager/cert-manager/pkg/api"
	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"

	// Each registers its controller with controller.Known (in init).
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	// The issuer kinds the issuers controllers set Ready.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// controllers are cert-manager's controllers for Certificates issued by selfSigned and
// CA issuers (cert-manager's default set, less ACME, Vault, Venafi and the shims).
var controllers = []string{
	"issuers", "clusterissuers",
	"certificates-trigger", "certificates-key-manager", "certificates-request-manager",
	"certificates-readiness", "certificates-issuing", "certificates-revision-manager",
	"certificaterequests-approver", "certificaterequests-issuer-selfsigned", "certificaterequests-issuer-ca",
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: certmanager controller|cainjector --kubeconfig FILE [--cluster-resource-namespace NS]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster")
	namespace := fs.String("cluster-resource-namespace", "cert-manager", "namespace of ClusterIssuers' Secrets")
	_ = fs.Parse(os.Args[2:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, klog.Background(), os.Args[1])
	var err error
	switch os.Args[1] {
	case "controller":
		err = runController(ctx, *kubeconfig, *namespace)
	case "cainjector":
		err = runCAInjector(ctx, *kubeconfig)
	default:
		err = fmt.Errorf("unknown component %q: controller or cainjector", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "certmanager:", err)
		os.Exit(1)
	}
}

// runController builds each controller from one ContextFactory (their informers are
// registered as they are built), starts the shared informer factories, and runs them.
func runController(ctx context.Context, kubeconfig, namespace string) error {
	f, err := controller.NewContextFactory(ctx, controller.ContextOptions{Kubeconfig: kubeconfig,
		IssuerOptions: controller.IssuerOptions{ClusterResourceNamespace: namespace}})
	if err != nil {
		return err
	}
	var loops []controller.Interface
	for _, name := range controllers {
		build, ok := controller.Known()[name]
		if !ok {
			return fmt.Errorf("controller %q is not registered", name)
		}
		c, err := build(f)
		if err != nil {
			return fmt.Errorf("controller %q: %w", name, err)
		}
		loops = append(loops, c)
	}
	c, err := f.Build()
	if err != nil {
		return err
	}
	c.SharedInformerFactory.Start(ctx.Done())
	c.KubeSharedInformerFactory.Start(ctx.Done())
	c.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	var wg sync.WaitGroup
	errs := make(chan error, len(loops))
	for _, l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Run(5, ctx); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// runCAInjector runs cert-manager's CA injector for webhook configurations, APIServices
// and CRDs, with the Certificate data source on (cert-manager.io/inject-ca-from).
func runCAInjector(ctx context.Context, kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	// The injector's field manager is its user agent's prefix, as cert-manager's main
	// sets it: server-side apply refuses an empty one.
	cfg = util.RestConfigWithUserAgent(cfg, "cainjector")
	scheme := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(scheme))
	utilruntime.Must(admissionregistrationv1.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	utilruntime.Must(apiregistrationv1.AddToScheme(scheme))
	utilruntime.Must(cmapi.AddToScheme(scheme))
	ctrl.SetLogger(klog.Background())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return err
	}
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName: true, cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.APIServiceName: true, cainjector.CustomResourceDefinitionName: true,
		},
	}); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
