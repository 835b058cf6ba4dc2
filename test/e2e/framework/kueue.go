package framework

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
)

// Kueue is Kueue's own controller-manager (sigs.k8s.io/kueue/cmd/kueue, built by
// hack/build-kueue.sh from the version hack/tools-kueue pins) running as a local process
// against a cluster: its CRDs installed from its module, its admission webhooks (those of
// its own API group and of batch/v1 Jobs, the one integration it runs) registered by URL
// with a CA the test made, its internal certificate management off.
type Kueue struct {
	Dir     string // the module's directory in the Go module cache
	Log     string // its log file
	cmd     *exec.Cmd
	done    chan struct{}
	cluster *Cluster
	hooks   localwebhook.Configurations
}

// KueueQueueLabel is the label a Job names its LocalQueue with.
const KueueQueueLabel = "kueue.x-k8s.io/queue-name"

// KueueNamespace is Kueue's own namespace (its configuration's default).
const KueueNamespace = "kueue-system"

// Kueue's webhook configurations, as named here (its manifests name them generically).
const (
	kueueMutating   = "kueue-mutating-webhook-configuration"
	kueueValidating = "kueue-validating-webhook-configuration"
)

// KueueOption changes how StartKueue configures Kueue.
type KueueOption func(*kueueOptions)

type kueueOptions struct {
	deviceClassMappings []kueueDeviceClassMapping
}

type kueueDeviceClassMapping struct {
	name    string
	classes []string
}

// KueueDeviceClassMapping adds an entry to Kueue's resources.deviceClassMappings (a
// workload's claims of these DeviceClasses are charged to the logical resource name)
// and turns its DynamicResourceAllocation feature gate on.
func KueueDeviceClassMapping(name string, classes ...string) KueueOption {
	return func(o *kueueOptions) {
		o.deviceClassMappings = append(o.deviceClassMappings, kueueDeviceClassMapping{name: name, classes: classes})
	}
}

// StartKueue installs Kueue's CRDs in c, starts its controller-manager and registers its
// webhooks, and waits until the API server calls them.
func StartKueue(c *Cluster, opts ...KueueOption) (*Kueue, error) {
	var o kueueOptions
	for _, opt := range opts {
		opt(&o)
	}
	ctx := context.Background()
	dir, err := kueueModuleDir()
	if err != nil {
		return nil, err
	}
	k := &Kueue{Dir: dir, cluster: c, done: make(chan struct{})}
	if err := k.installCRDs(ctx); err != nil {
		return nil, err
	}
	if err := localwebhook.EnsureNamespace(ctx, c.Kube, KueueNamespace); err != nil {
		return nil, err
	}
	work := filepath.Join(Root, "_output", "e2e", c.Name, "kueue")
	certs, err := localwebhook.NewCerts(filepath.Join(work, "certs"))
	if err != nil {
		return nil, err
	}
	ports, err := localwebhook.FreePorts(2)
	if err != nil {
		return nil, err
	}
	webhookAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	probeAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	config := filepath.Join(work, "config.yaml")
	if err := os.WriteFile(config, []byte(kueueConfig(ports[0], probeAddr, certs.Dir, o.deviceClassMappings)), 0o600); err != nil {
		return nil, err
	}
	k.Log = filepath.Join(work, "kueue.log")
	logFile, err := os.Create(k.Log)
	if err != nil {
		return nil, err
	}
	// VisibilityOnDemand serves an aggregated API on a port of its own; these tests
	// read Workloads, not that API.
	gates := "VisibilityOnDemand=false"
	if len(o.deviceClassMappings) > 0 {
		gates += ",DynamicResourceAllocation=true"
	}
	k.cmd = exec.Command(filepath.Join(BinDir, "kueue"), "--config="+config, "--feature-gates="+gates, "--zap-log-level=2")
	k.cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "KUEUE_METRICS_CERT_DIR="+certs.Dir)
	k.cmd.Stdout, k.cmd.Stderr = logFile, logFile
	if err := k.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w (build it first: make kueue)", err)
	}
	go func() { _ = k.cmd.Wait(); logFile.Close(); close(k.done) }()
	if err := k.waitReady(ctx, probeAddr); err != nil {
		k.Stop()
		return nil, err
	}
	if k.hooks, err = kueueWebhooks(filepath.Join(dir, "config", "components", "webhook", "manifests.yaml")); err != nil {
		k.Stop()
		return nil, err
	}
	k.hooks.ByURL(webhookAddr, certs.CAPEM)
	if err := k.hooks.Register(ctx, c.Kube); err != nil {
		k.Stop()
		return nil, err
	}
	if err := k.waitEffective(ctx); err != nil {
		k.Stop()
		return nil, err
	}
	return k, nil
}

// Stop removes Kueue's webhook configurations (so the cluster stays usable) and the
// process; its CRDs and objects stay.
func (k *Kueue) Stop() {
	if k.hooks.Mutating != nil {
		_ = k.hooks.Unregister(context.Background(), k.cluster.Kube)
	}
	if k.cmd.Process != nil {
		_ = k.cmd.Process.Kill()
		<-k.done
	}
}

// kueueModuleDir is where the Go module cache holds the Kueue that hack/tools-kueue
// pins (hack/build-kueue.sh has downloaded it).
func kueueModuleDir() (string, error) {
	return moduleDir("hack/tools-kueue", "sigs.k8s.io/kueue", "make kueue")
}

// kueueConfig is Kueue's Configuration: webhook and probes on loopback, metrics off,
// no leader election, no internal certificates (the test's CA signs the webhook's), and
// only the batch/job integration.
func kueueConfig(webhookPort int, probeAddr, certDir string, mappings []kueueDeviceClassMapping) string {
	var resources string
	if len(mappings) > 0 {
		resources = "resources:\n  deviceClassMappings:\n"
		for _, m := range mappings {
			resources += fmt.Sprintf("  - name: %s\n    deviceClassNames: [%s]\n", m.name, strings.Join(m.classes, ", "))
		}
	}
	return resources + fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
health:
  healthProbeBindAddress: %s
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
manageJobsWithoutQueueName: false
integrations:
  frameworks:
  - batch/job
`, KueueNamespace, probeAddr, webhookPort, certDir)
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRDs creates (or replaces) every CRD of config/components/crd/bases and waits
// until each is established.
func (k *Kueue) installCRDs(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(k.Dir, "config", "components", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no Kueue CRDs under %s: %v", k.Dir, err)
	}
	return InstallCRDFiles(ctx, k.cluster, files)
}

// InstallCRDFiles creates (or replaces) the CRD of each file and waits until each is
// established.
func InstallCRDFiles(ctx context.Context, c *Cluster, files []string) error {
	crds := c.Dynamic.Resource(crdGVR)
	var names []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		_, err = crds.Create(ctx, obj, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			var old *unstructured.Unstructured
			if old, err = crds.Get(ctx, obj.GetName(), metav1.GetOptions{}); err == nil {
				obj.SetResourceVersion(old.GetResourceVersion())
				_, err = crds.Update(ctx, obj, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			return fmt.Errorf("installing CRD %s: %w", obj.GetName(), err)
		}
		names = append(names, obj.GetName())
	}
	return WaitCRDsEstablished(ctx, c, names...)
}

// WaitCRDsEstablished waits up to a minute until each CRD named is Established. `kubectl
// wait --for=condition=Established` does not do for this: on a CRD created a moment before,
// whose status has no conditions yet, it fails at once (".status.conditions accessor
// error: <nil>"), which a loaded machine made a realnode test meet.
func WaitCRDsEstablished(ctx context.Context, c *Cluster, names ...string) error {
	crds := c.Dynamic.Resource(crdGVR)
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, name := range names {
			crd, err := crds.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			established := slices.ContainsFunc(conds, func(c any) bool {
				m, _ := c.(map[string]any)
				return m["type"] == "Established" && m["status"] == "True"
			})
			if !established {
				return false, nil
			}
		}
		return true, nil
	})
}

// kueueWebhooks reads Kueue's webhook manifests and keeps the webhooks of its own API
// group and of batch/v1 Jobs: the others belong to integrations this Kueue does not run
// (pods, Deployments, Kubeflow, Ray, ...), whose paths it does not serve, and with their
// failure policy Fail they would refuse every pod.
func kueueWebhooks(path string) (localwebhook.Configurations, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return localwebhook.Configurations{}, err
	}
	c := localwebhook.Configurations{Mutating: &admissionregistrationv1.MutatingWebhookConfiguration{}, Validating: &admissionregistrationv1.ValidatingWebhookConfiguration{}}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		switch {
		case strings.Contains(doc, "kind: MutatingWebhookConfiguration"):
			err = yaml.Unmarshal([]byte(doc), c.Mutating)
		case strings.Contains(doc, "kind: ValidatingWebhookConfiguration"):
			err = yaml.Unmarshal([]byte(doc), c.Validating)
		}
		if err != nil {
			return c, fmt.Errorf("%s: %w", path, err)
		}
	}
	c.Mutating.Name, c.Validating.Name = kueueMutating, kueueValidating
	c.Mutating.Webhooks = slices.DeleteFunc(c.Mutating.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool { return !kueueServed(w.Rules) })
	c.Validating.Webhooks = slices.DeleteFunc(c.Validating.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return !kueueServed(w.Rules) })
	if len(c.Mutating.Webhooks) == 0 || len(c.Validating.Webhooks) == 0 {
		return c, fmt.Errorf("%s: no webhook of Kueue's API group or batch/v1 Jobs", path)
	}
	return c, nil
}

// kueueServed says whether every rule is about Kueue's own API group or batch.
func kueueServed(rules []admissionregistrationv1.RuleWithOperations) bool {
	for _, r := range rules {
		for _, g := range r.APIGroups {
			if g != "kueue.x-k8s.io" && g != "batch" {
				return false
			}
		}
	}
	return len(rules) > 0
}

// waitReady waits for /readyz (its webhook server listens) or the process's exit.
func (k *Kueue) waitReady(ctx context.Context, probe string) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		select {
		case <-k.done:
			return false, fmt.Errorf("kueue exited: %v", k.cmd.ProcessState)
		default:
		}
		return localwebhook.Ready(probe), nil
	})
	if err != nil {
		return fmt.Errorf("kueue never became ready: %w (log %s)", err, k.Log)
	}
	return nil
}

// waitEffective waits until the API server calls Kueue's Job webhook: a server-side dry
// run of a Job naming a queue comes back suspended, which only that webhook does.
func (k *Kueue) waitEffective(ctx context.Context) error {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "kueue-probe", Labels: map[string]string{KueueQueueLabel: "kueue-probe"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}},
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var got *batchv1.Job
		got, last = k.cluster.Kube.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last == nil && ptr.Deref(got.Spec.Suspend, false), nil
	})
	if err != nil {
		return fmt.Errorf("the webhooks of Kueue never took effect (last answer: %v; log %s)", last, k.Log)
	}
	return nil
}

// InstallKueueCRDs installs the CRDs of the named Kueue resources (plural, as
// "workloads"), of the Kueue hack/tools-kueue pins, into a cluster where no Kueue runs:
// for tests of what litepool reads from Kueue's objects, written by whoever may.
func InstallKueueCRDs(ctx context.Context, c *Cluster, resources ...string) error {
	dir, err := kueueModuleDir()
	if err != nil {
		return err
	}
	var files []string
	for _, r := range resources {
		files = append(files, filepath.Join(dir, "config", "components", "crd", "bases", "kueue.x-k8s.io_"+r+".yaml"))
	}
	return InstallCRDFiles(ctx, c, files)
}
