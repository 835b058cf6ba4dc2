// Command litepool-webhook is litepool's one server binary, run as two identities
// (deploy/webhook, docs/install.md):
//
//   - --webhook (the default) serves litepool's admission rules (P1-P6, N1-N3, R1-R2)
//     as a mutating and a validating webhook, answering from informer caches trimmed to
//     what the rules read. This mode owns the serving certificate and the departure
//     ConfigMaps. Deployment litepool-webhook runs it alone (--controllers=false).
//   - --controllers runs litepool's controllers (pkg/controller: Pool status, per-pool
//     metrics, rollouts, stress runs) on the replica that holds the leader lease
//     (--leader-elect). Deployment litepool-controller runs it alone (--webhook=false):
//     no webhook server, no certificate, no webhook configurations.
//
// Both at once is a single-process local run (the e2e framework, hack/localwebhook).
//
// /metrics is served over HTTPS and answers only callers the API server authenticates
// and authorizes for get on the non-resource URL /metrics (ClusterRole
// litepool-metrics-reader); --metrics-secure=false serves plain HTTP for local runs.
//
// Certificates: by default (--cert-mode=self) the webhook issues its own CA and serving
// certificate into a Secret, mounts it (the Deployment's volume), and patches the CA
// bundle into its webhook configurations (open-policy-agent/cert-controller). With
// --cert-mode=files it serves whatever is in --cert-dir (cert-manager's Secret, or files
// for a local run) and leaves the CA bundle to whoever made them. Either way the
// certificate is reloaded from disk when it changes, without a restart.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/runwhere-ai/litepool/internal/gcpace"
	"github.com/runwhere-ai/litepool/pkg/admission"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/compat"
	"github.com/runwhere-ai/litepool/pkg/controller"
	"github.com/runwhere-ai/litepool/pkg/health"
	"github.com/runwhere-ai/litepool/pkg/podindex"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/version"
)

// options are the webhook's flags.
type options struct {
	host, certDir, certMode           string
	port                              int
	metricsAddr, probeAddr, pprofAddr string
	namespace, serviceName, secret    string
	mutatingConfig, validatingConfig  string
	extraDNSNames                     string
	acceleratorResources              string
	departureTTL                      time.Duration
	enableHTTP2                       bool
	webhook, controllers, leaderElect bool
	leaderElectionNamespace           string
	metricsSecure                     bool
	metricsCertDir                    string
	// shutdownDrain is how long a terminating webhook keeps serving, closing each
	// kept-alive connection with its next answer (drain.go); closing is set meanwhile.
	shutdownDrain time.Duration
	closing       *atomic.Bool
	// compatConfigMap names the ConfigMap in namespace that overrides the embedded
	// compatibility matrix for C1 on DriverRollouts.
	compatConfigMap string
	// agentNamespaces are the operator's namespaces trusted with node agents, beyond
	// kube-system and namespace (--agent-namespace).
	agentNamespaces []string
}

const (
	certModeSelf  = "self"
	certModeFiles = "files"
)

func (o *options) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.host, "host", "", "address the webhook server listens on (empty: all)")
	fs.IntVar(&o.port, "port", 9443, "port the webhook server listens on")
	fs.StringVar(&o.certDir, "cert-dir", "/certs", "directory holding tls.crt and tls.key (reloaded when they change)")
	fs.StringVar(&o.certMode, "cert-mode", certModeSelf, "self: issue and rotate the certificate and patch the CA bundle into the webhook configurations; files: serve the files in --cert-dir as they are (cert-manager, local runs)")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "address of the Prometheus metrics endpoint (0 disables it)")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to callers the API server authenticates (TokenReview) and authorizes for get on /metrics (SubjectAccessReview); false: plain HTTP to anyone, for local runs only")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "directory holding tls.crt and tls.key for /metrics (empty: a self-signed certificate made at start)")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "address of Go's /debug/pprof endpoints (empty: off)")
	fs.StringVar(&o.namespace, "namespace", os.Getenv("POD_NAMESPACE"), "the webhook's namespace: its Service, certificate Secret and the ConfigMaps that reserve node departures (default $POD_NAMESPACE)")
	fs.DurationVar(&o.shutdownDrain, "shutdown-drain", 0, "after SIGTERM, keep serving this long and close kept-alive connections with each answer, so that no admission request in flight is lost (deploy/webhook: 5s, within the pod's grace period)")
	fs.DurationVar(&o.departureTTL, "departure-ttl", admission.DefaultDepartureTTL, "how long a granted node departure counts against its pool's minNodes (longer than the informer caches' lag)")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false, "serve HTTP/2 (off: one HTTP/2 connection would pin all of the API server's calls to one replica, and HTTP/2 rapid reset, CVE-2023-44487)")
	fs.StringVar(&o.compatConfigMap, "compat-configmap", "", "ConfigMap in --namespace whose key "+compat.ConfigMapKey+" overrides the embedded compatibility matrix that C1 judges DriverRollouts by (as the plugin's --compat-configmap; empty: the embedded matrix)")
	fs.StringVar(&o.serviceName, "service-name", "litepool-webhook", "Service the API server calls (the certificate's DNS name)")
	fs.StringVar(&o.secret, "cert-secret", "litepool-webhook-cert", "Secret the self-managed certificate is kept in (cert-mode self)")
	fs.StringVar(&o.mutatingConfig, "mutating-webhook-configuration", "litepool-webhook", "MutatingWebhookConfiguration whose CA bundle is managed (cert-mode self)")
	fs.StringVar(&o.validatingConfig, "validating-webhook-configuration", "litepool-webhook", "ValidatingWebhookConfiguration whose CA bundle is managed (cert-mode self)")
	fs.StringVar(&o.extraDNSNames, "extra-dns-names", "", "comma-separated extra DNS names for the self-managed certificate")
	fs.BoolVar(&o.webhook, "webhook", true, "serve the admission webhook (and, with --cert-mode=self, keep its certificate and CA bundles); false: controllers only (Deployment litepool-controller)")
	fs.BoolVar(&o.controllers, "controllers", false, "run litepool's controllers (Pool status, per-pool metrics, exclusive taints, rollouts, stress runs, the node health loop); with --leader-elect, on the replica that holds the leader Lease only")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader among replicas (a Lease named "+controller.LeaderElectionID+"): controllers run on the leader only; needs --controllers (a webhook serves on every replica and elects nobody)")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader Lease (default --namespace, which is required)")
	fs.Func("health-images", "comma-separated repositories (approving the repository and those below it, at a path boundary) or exact references with a tag or digest that the operator approves for node health re-checks and remediation Jobs (Pool spec.health); another image is not run and its node is held out. Read by the health loop, which runs with --controllers: give it to Deployment litepool-controller", func(v string) error {
		controller.HealthImages = append(controller.HealthImages, strings.Split(v, ",")...)
		return nil
	})
	fs.Func("node-work-image-pull-secret", "a Secret in litepool's namespace (--namespace) that every pod of node work pulls its image with: driver installers, remediations, re-checks and stress tests (repeatable or comma-separated). Chosen here by the operator only: no Pool, DriverRollout or StressRun field names one. Give it to Deployment litepool-controller, which makes that work", func(v string) error {
		return addPullSecrets(v)
	})
	fs.Func("daemonset-controller-user", "an identity the DaemonSet controller creates pods as, beyond "+strings.Join(policy.DaemonSetControllers, " and ")+" (a kube-controller-manager that runs under another user): P6 lets such pods that ask for no device onto exclusive nodes as node agents; repeatable", func(v string) error {
		admission.DaemonSetControllers = append(admission.DaemonSetControllers, v)
		return nil
	})
	fs.Func("agent-namespace", "a namespace whose DaemonSets' device-free pods P6 lets onto exclusive nodes as node agents (the GPU operator's, the node exporter's), beyond kube-system and --namespace; repeatable or comma-separated. Whoever may create pods there is trusted on every exclusive node: list only namespaces that tenants cannot write to", func(v string) error {
		o.agentNamespaces = append(o.agentNamespaces, strings.Split(v, ",")...)
		return nil
	})
	fs.Func("health-definition", `an operator's remediation or re-check, NAME={"image": "REF@sha256:...", "command": [...], "timeout": "30m"} (repeatable): a Pool's spec.health.remediation.definition or spec.health.recheck.definition names one, and only these run (remediation privileged, with the host's root)`, func(v string) error {
		name, d, err := health.ParseDefinition(v)
		if err != nil {
			return err
		}
		if controller.HealthDefinitions == nil {
			controller.HealthDefinitions = map[string]health.Definition{}
		}
		controller.HealthDefinitions[name] = d
		return nil
	})
	fs.StringVar(&o.acceleratorResources, policy.AcceleratorResourcesFlag, "", "comma-separated extra accelerator resources, extended resource names such as vendor.example/xpu (beyond nvidia.com/gpu, nvidia.com/mig-*, huawei.com/Ascend910/310/310P, amd.com/gpu)")
}

func (o *options) validate() error {
	if !o.webhook && !o.controllers {
		return errors.New("--webhook=false and --controllers=false: nothing to run")
	}
	if o.leaderElect && !o.controllers {
		return errors.New("--leader-elect needs --controllers: only the controllers need a leader, the webhook serves on every replica")
	}
	if o.namespace == "" {
		return errors.New("--namespace (or $POD_NAMESPACE) is needed: litepool's namespace holds the webhook's departure ConfigMaps and certificate Secret, and the controllers' leader Lease")
	}
	for _, ns := range o.agentNamespaces {
		if err := policy.ValidateAgentNamespace(ns); err != nil {
			return fmt.Errorf("--agent-namespace: %w", err)
		}
	}
	if o.departureTTL <= 0 {
		return fmt.Errorf("--departure-ttl=%s: must be positive", o.departureTTL)
	}
	switch o.certMode {
	case certModeSelf:
	case certModeFiles:
	default:
		return fmt.Errorf("--cert-mode=%q: must be %s or %s", o.certMode, certModeSelf, certModeFiles)
	}
	return nil
}

// heapBudget is the heap the collector's pace (internal/gcpace) lets the process reach
// before it collects more often than Go's default, unless the environment sets GOGC.
// Both processes keep a live heap that grows with the cluster (the node cache, the pod
// index) and allocate on every request and event: below the budget they pace as Go's
// default (GOGC=100: the webhook's CPU per pod create 0.49 ms instead of 0.68 ms at a
// fixed 25, bench/webhook at 1,000 nodes), above it down to GOGC=25, which held the peak
// at 5,000 nodes and 40,000 pods to 98 MiB (webhook) and 126 MiB (controller) against
// the goals of 128 and 160 (docs/webhook.md, Memory).
const heapBudget = 56 << 20

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		gcpace.Start(heapBudget)
	}
	var o options
	o.bind(flag.CommandLine)
	zopts := zap.Options{Development: false} // JSON logs: one structured line per event
	zopts.BindFlags(flag.CommandLine)
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Printf("litepool-webhook %s (%s)\n", version.Version, version.Commit)
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zopts)))
	ctx, closing := drainingSignalHandler(o.shutdownDrain)
	o.closing = closing
	if err := run(ctx, o); err != nil {
		ctrl.Log.Error(err, "litepool-webhook stopped")
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	log := ctrl.Log.WithName("setup")
	if err := o.validate(); err != nil {
		return err
	}
	// One set for the whole process: the pod rules, the cache trim and the inventory
	// behind Pool status all count the same resources.
	accel, err := policy.ParseAccelerators(o.acceleratorResources)
	if err != nil {
		return err
	}
	log.Info("accelerator resources beyond the known ones", "extra", accel.String())
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	var tlsOpts []func(*tls.Config)
	if !o.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                o.metricsOptions(tlsOpts),
		HealthProbeBindAddress: o.probeAddr,
		PprofBindAddress:       o.pprofAddr,
		Cache:                  o.cacheOptions(accel),
		// Pods are read from the pod index; a read of pods through the manager's client
		// goes to the API server instead of starting an informer of every pod.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Pod{}}}},
		// Every webhook replica answers admission requests from its own cache; only the
		// controllers need a leader.
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              controller.LeaderElectionID,
		LeaderElectionNamespace:       o.leaseNamespace(),
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	// One pod index for both jobs of the process (podindex): the controller's keeps
	// each pod's accelerator requests for Pool status, the webhook's rules never read them.
	var keep *policy.Accelerators
	if o.controllers {
		keep = &accel
	}
	pods, err := podindex.New(cfg, keep)
	if err != nil {
		return err
	}
	if err := mgr.Add(pods); err != nil {
		return err
	}
	if o.controllers {
		if err := controller.SetupIn(mgr, accel, o.namespace, pods); err != nil {
			return fmt.Errorf("setting up the controllers: %w", err)
		}
	}
	if err := admission.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	synced, err := startInformers(ctx, mgr, pods)
	if err != nil {
		return err
	}
	if o.webhook {
		if err := addWebhook(ctx, mgr, o, scheme, accel, tlsOpts, pods); err != nil {
			return err
		}
	}

	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("informers-synced", func(*http.Request) error {
		if !synced.Load() {
			return errors.New("informer caches have not synced yet")
		}
		return nil
	}); err != nil {
		return err
	}
	log.Info("starting litepool-webhook", "version", version.Version, "commit", version.Commit, "webhook", o.webhook,
		"certMode", o.certMode, "controllers", o.controllers, "leaderElect", o.leaderElect, "metricsSecure", o.metricsSecure)
	return mgr.Start(ctx)
}

// metricsOptions serves /metrics over HTTPS behind the API server's authentication and
// authorization (controller-runtime's metrics filters: a TokenReview for the bearer
// token, then a SubjectAccessReview for get on /metrics), or plain HTTP for local runs.
func (o *options) metricsOptions(tlsOpts []func(*tls.Config)) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.metricsAddr}
	if o.metricsSecure {
		m.SecureServing = true
		m.FilterProvider = filters.WithAuthenticationAndAuthorization
		m.CertDir = o.metricsCertDir
		m.TLSOpts = tlsOpts
	}
	return m
}

// cacheOptions are the informer caches: trimmed to what the rules read, widened for the
// controllers' inventory when they run. A webhook without controllers reads nothing
// else, so a read of any other kind fails (ErrResourceNotCached) instead of quietly
// starting a cluster-wide informer, and needing the RBAC, that only the controller has.
func (o *options) cacheOptions(accel policy.Accelerators) cache.Options {
	byObject := admission.CacheByObject()
	if o.controllers {
		byObject = controller.CacheByObject(byObject, accel)
	}
	return cache.Options{
		ByObject:                    byObject,
		DefaultTransform:            cache.TransformStripManagedFields(),
		ReaderFailOnMissingInformer: !o.controllers,
	}
}

// addWebhook adds the admission webhook: its server (started once the certificate is on
// disk), the certificate rotator (--cert-mode=self) and its readiness check.
func addWebhook(ctx context.Context, mgr manager.Manager, o options, scheme *runtime.Scheme, accel policy.Accelerators, tlsOpts []func(*tls.Config), pods *podindex.Index) error {
	log := ctrl.Log.WithName("setup")
	// Departures are read and written live, never through the cache.
	live, err := client.New(mgr.GetConfig(), client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating the API client: %w", err)
	}
	srv := webhook.NewServer(webhook.Options{Host: o.host, Port: o.port, CertDir: o.certDir, TLSOpts: tlsOpts})
	catalog := admission.Catalog{Reader: pods.Reader(mgr.GetCache())}
	admission.AgentNamespaces = policy.TrustedAgentNamespaces(o.namespace, o.agentNamespaces)
	log.Info("node agents are trusted from these namespaces only", "namespaces", admission.AgentNamespaces)
	admission.Register(drainingServer{Server: srv, closing: o.closing}, catalog,
		&admission.Departures{Client: live, Namespace: o.namespace, TTL: o.departureTTL}, accel)
	admission.RegisterOperations(drainingServer{Server: srv, closing: o.closing}, catalog, matrixLoader(live, o.namespace, o.compatConfigMap))

	if err := addCertificateExpiry(mgr, o); err != nil {
		return err
	}
	certReady := make(chan struct{})
	if o.certMode == certModeSelf {
		if err := addRotator(mgr, o, certReady); err != nil {
			return err
		}
	} else {
		close(certReady)
	}
	// The webhook server starts only once the certificate is on disk: until then it
	// could not serve TLS, and /readyz keeps the Service from sending it requests.
	go func() {
		select {
		case <-certReady:
			log.Info("certificate in place; starting the webhook server", "port", o.port, "certDir", o.certDir)
			if err := mgr.Add(srv); err != nil {
				log.Error(err, "adding the webhook server")
			}
		case <-ctx.Done():
		}
	}()
	return mgr.AddReadyzCheck("webhook-serving", srv.StartedChecker())
}

// startInformers creates the informers the rules read before the manager starts (the
// cache would otherwise create them on the first request) and reports when all of them,
// and the pod index, have synced.
func startInformers(ctx context.Context, mgr manager.Manager, pods *podindex.Index) (*atomic.Bool, error) {
	var synced atomic.Bool
	for _, obj := range admission.CachedObjects() {
		if _, err := mgr.GetCache().GetInformer(ctx, obj, cache.BlockUntilSynced(false)); err != nil {
			return nil, fmt.Errorf("informer for %T: %w", obj, err)
		}
	}
	go func() {
		if mgr.GetCache().WaitForCacheSync(ctx) && toolscache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
			synced.Store(true)
			ctrl.Log.WithName("setup").Info("informer caches synced")
		}
	}()
	return &synced, nil
}

// addRotator has cert-controller keep the serving certificate in the Secret (mounted at
// --cert-dir) and the CA bundle in both webhook configurations. Every replica runs it:
// updates race on resourceVersion, and the loser re-reads the winner's certificate. It
// reads only those three objects (byNameTransport), which is all RBAC grants it.
func addRotator(mgr manager.Manager, o options, ready chan struct{}) error {
	dns := fmt.Sprintf("%s.%s.svc", o.serviceName, o.namespace)
	extra := append([]string{o.serviceName + "." + o.namespace, dns + ".cluster.local"}, splitList(o.extraDNSNames)...)
	return rotator.AddRotator(newByNameManager(mgr, rotatorNames(o)), &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: o.namespace, Name: o.secret},
		CertDir:        o.certDir,
		CAName:         "litepool-webhook-ca",
		CAOrganization: "litepool",
		DNSName:        dns,
		ExtraDNSNames:  extra,
		IsReady:        ready,
		Webhooks: []rotator.WebhookInfo{
			{Name: o.mutatingConfig, Type: rotator.Mutating},
			{Name: o.validatingConfig, Type: rotator.Validating},
		},
		RequireLeaderElection: false,
		EnableReadinessCheck:  true,
		// Renew well before expiry so that the old CA is still trusted while kubelet
		// refreshes the mounted Secret in every replica.
		LookaheadInterval:      90 * 24 * time.Hour,
		RotationCheckFrequency: 12 * time.Hour,
	})
}

// leaseNamespace is where the leader Lease lives: the webhook's own namespace, or
// kube-system for a local run that has none.
func (o *options) leaseNamespace() string {
	switch {
	case o.leaderElectionNamespace != "":
		return o.leaderElectionNamespace
	case o.namespace != "":
		return o.namespace
	}
	return "kube-system"
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// matrixLoader reads the compatibility matrix for C1: the embedded one, or the ConfigMap
// name in namespace, read live when a rollout is created (the webhook may get
// ConfigMaps of its namespace: its departure reservations are ConfigMaps).
func matrixLoader(live client.Client, namespace, name string) admission.MatrixLoader {
	if name == "" {
		return func(context.Context) (*compat.Matrix, error) { return compat.Embedded() }
	}
	return func(ctx context.Context) (*compat.Matrix, error) {
		var cm corev1.ConfigMap
		if err := live.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &cm); err != nil {
			return nil, fmt.Errorf("reading --compat-configmap %s/%s: %w", namespace, name, err)
		}
		data, ok := cm.Data[compat.ConfigMapKey]
		if !ok {
			return nil, fmt.Errorf("configmap %s/%s has no key %q holding the matrix", namespace, name, compat.ConfigMapKey)
		}
		return compat.Parse([]byte(data), "configmap "+namespace+"/"+name)
	}
}
