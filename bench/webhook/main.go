// Command webhook-bench measures litepool-webhook on this machine, each figure beside a
// baseline measured in the same run:
//
//  1. HTTPS on loopback: AdmissionReview requests to the webhook binary (one replica,
//     its informer cache synced against a local control plane) at several
//     concurrencies, beside a controller-runtime webhook server on the same TLS stack
//     whose handler allows everything;
//  2. node removals through kube-apiserver: the minNodes reservation's cost per
//     departure, beside no webhook and a cache-only label change (departures.go);
//  3. pod creates through the real kube-apiserver with the webhook registered (deploy's
//     own configurations, called by URL) beside the same run without it, a trivial
//     webhook (one mutating configuration: P1's selectors, no CEL), the trivial webhook
//     with P6's configuration beside it (what the API server's match conditions cost),
//     litepool without P6's placement webhook, and litepool at GOGC=25 instead of its
//     paced default (what a heap held at 1.25x the live one costs), alternated, each round starting one
//     setup later. Beside creates/s, figures that contention moves less: the API
//     server's and etcd's CPU time per create, and the API server's own time in match
//     conditions. --setups picks setups; --p6-variant adds the trivial webhook with
//     another P6 configuration (to compare configurations of P6). The baseline webhooks
//     run in a process of their own (this program, --serve-baseline), so that the
//     trivial webhook's own CPU per create is read from /proc as litepool-webhook's is:
//     their ratio is issue 43's figure.
//
// Every loop is bounded in count and in time, and talks only to 127.0.0.1.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/runwhere-ai/litepool/bench/internal/proc"
	"github.com/runwhere-ai/litepool/bench/internal/rounds"
	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

type config struct {
	kubeconfig, bin, root string
	requests              int
	duration              time.Duration
	concurrencies         []int
	pods, podConc, rounds int
	departures            int
	extraArgs             string
	baselinePprof         string
	clusterDir            string
	figures               string
	setups                []string
	variants              []variant
}

func main() {
	var c config
	var conc string
	flag.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig of the local control plane (with the sample fixtures)")
	flag.StringVar(&c.bin, "webhook-bin", "_output/bin/litepool-webhook", "the webhook binary")
	flag.StringVar(&c.root, "root", ".", "repository root (for deploy/webhook/webhooks.yaml)")
	flag.IntVar(&c.requests, "requests", 4000, "HTTPS requests per concurrency level (at most)")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "time limit per concurrency level")
	flag.StringVar(&conc, "concurrency", "1,4,16,64", "HTTPS concurrency levels")
	flag.IntVar(&c.pods, "pods", 1000, "pods created per API-server round")
	flag.IntVar(&c.podConc, "pod-concurrency", 16, "concurrent pod creates")
	flag.IntVar(&c.rounds, "rounds", 6, "rounds of every pod-create setup, alternated (2 rounds vary by up to 25% on 2 shared cores); 0 skips the API-server part")
	flag.IntVar(&c.departures, "departures", 60, "node departures per case of the reservation benchmark; 0 skips it")
	flag.StringVar(&c.clusterDir, "cluster-dir", "", "the kwok cluster's directory, to read the CPU time of its kube-apiserver and etcd")
	flag.StringVar(&c.figures, "figures", "", "append the figures to this file (hack/bench.sh's table)")
	flag.StringVar(&c.extraArgs, "webhook-args", "", "extra space-separated flags for the webhook (e.g. --pprof-bind-address=127.0.0.1:6060)")
	flag.StringVar(&c.baselinePprof, "baseline-pprof", "", "address for the baseline server's /debug/pprof endpoints (e.g. 127.0.0.1:6061; empty: off)")
	serve := flag.Int("serve-baseline", 0, "internal: serve the baseline webhooks on this port of 127.0.0.1 (with --baseline-cert-dir) instead of benchmarking; the bench runs itself so")
	baselineCerts := flag.String("baseline-cert-dir", "", "internal: the baseline server's certificate directory")
	setups := flag.String("setups", strings.Join(defaultSetups, ","), "pod-create setups to alternate, of "+strings.Join(defaultSetups, ", ")+" and the --p6-variant names")
	flag.Func("p6-variant", "NAME=FILE: one more pod-create setup, the trivial webhook with the pod webhooks of FILE's ValidatingWebhookConfiguration in place of P6's (what another configuration costs the API server); repeatable", func(v string) error {
		name, file, ok := strings.Cut(v, "=")
		if !ok || name == "" || file == "" {
			return errors.New("want NAME=FILE")
		}
		c.variants = append(c.variants, variant{name, file})
		return nil
	})
	flag.Parse()
	if *serve != 0 {
		if err := serveBaseline(*serve, *baselineCerts, c.baselinePprof); err != nil {
			fmt.Fprintln(os.Stderr, "webhook-bench baseline:", err)
			os.Exit(1)
		}
		return
	}
	c.setups = strings.Split(*setups, ",")
	for _, s := range strings.Split(conc, ",") {
		var n int
		if _, err := fmt.Sscan(s, &n); err == nil && n > 0 {
			c.concurrencies = append(c.concurrencies, n)
		}
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "webhook-bench:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	ctrllog.SetLogger(logr.Discard()) // the baseline server's logs are not the point
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return err
	}
	cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter() // the load is the point
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "webhook-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	certs, err := localwebhook.NewCerts(dir)
	if err != nil {
		return err
	}
	caPEM := certs.CAPEM
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	addr, stop, err := startWebhook(ctx, c, dir)
	if err != nil {
		return err
	}
	defer stop()
	baseAddr, stopBaseline, err := startBaseline(ctx, dir, c.baselinePprof)
	if err != nil {
		return err
	}
	defer stopBaseline()
	body, err := reviewBody()
	if err != nil {
		return err
	}
	client := httpsClient(caPEM)

	fmt.Println("HTTPS on loopback, one replica: AdmissionReview for an NPU pod of train-snt9b (P1 nodeSelector + HCCL env)")
	fmt.Printf("%-5s | %-36s | %-36s\n", "conc", "baseline: allow-all controller-runtime", "litepool-webhook /mutate-pods")
	fmt.Printf("%-5s | %10s %10s %10s   | %10s %10s %10s\n", "", "req/s", "p50 ms", "p99 ms", "req/s", "p50 ms", "p99 ms")
	for _, n := range c.concurrencies {
		b, err := hammer(client, "https://"+baseAddr+"/allow", body, n, c.requests, c.duration)
		if err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		w, err := hammer(client, "https://"+addr+"/mutate-pods", body, n, c.requests, c.duration)
		if err != nil {
			return fmt.Errorf("webhook: %w", err)
		}
		fmt.Printf("%-5d | %10.0f %10.3f %10.3f   | %10.0f %10.3f %10.3f\n", n, b.rate, ms(b.p50), ms(b.p99), w.rate, ms(w.p50), ms(w.p99))
	}

	if c.departures > 0 {
		if err := benchDepartures(ctx, cfg, kube, c, addr, caPEM); err != nil {
			return fmt.Errorf("departures: %w", err)
		}
	}
	if c.rounds == 0 {
		return nil
	}
	return benchCreates(ctx, c, kube, dir, caPEM, addr, baseAddr)
}

// record appends one size-independent figure to --figures.
func record(c config, key string, v float64) {
	if c.figures == "" {
		return
	}
	f, err := os.OpenFile(c.figures, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "webhook-bench: figures:", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "any %s %.3f\n", key, v)
}

// createsGoal is issue 20's goal for pod creates: litepool at most 5% slower than a
// trivial webhook.
const createsGoal = 1.05

// spread is the ratios of two setups' rates, round by round.
type spread struct {
	ratios           []float64
	min, median, max float64
}

// ratioSpread pairs the rounds of base and other (run back to back in each round) and
// returns base.rate/other.rate per round: how much slower other is.
func ratioSpread(base, other []result) spread {
	var s spread
	for i := range base {
		if i < len(other) && other[i].rate > 0 {
			s.ratios = append(s.ratios, base[i].rate/other[i].rate)
		}
	}
	return s.summarize()
}

// summarize fills in the min, median and max of s.ratios.
func (s spread) summarize() spread {
	if len(s.ratios) == 0 {
		return s
	}
	s.min, s.max, s.median = slices.Min(s.ratios), slices.Max(s.ratios), rounds.Median(s.ratios)
	return s
}

// verdict judges the goal on the median, and says when the rounds disagree about it.
func (s spread) verdict(goal float64) string {
	j := rounds.Judge(s.ratios, func(x float64) bool { return x <= goal })
	switch {
	case j.Rounds == 0:
		return "no round"
	case !j.Split && j.MedianMeets:
		return fmt.Sprintf("meets <= %.2fx in every round", goal)
	case !j.Split:
		return fmt.Sprintf("misses <= %.2fx in every round", goal)
	case j.MedianMeets:
		return fmt.Sprintf("median meets <= %.2fx, but rounds fall on both sides: too wide to decide, run more rounds on a quieter machine", goal)
	default:
		return fmt.Sprintf("median misses <= %.2fx, but rounds fall on both sides: too wide to decide, run more rounds on a quieter machine", goal)
	}
}

func printRound(name string, r result) {
	fmt.Printf("%-24s %10.0f %10.3f %10.3f %12.3f %12.3f %12.3f %12.3f %12.1f\n", name, r.rate, ms(r.p50), ms(r.p99), ms(r.cpuServer), ms(r.cpuWebhook), ms(r.cpuBaseline), ms(r.cpuBench), float64(r.match)/float64(time.Microsecond))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

type result struct {
	rate     float64
	p50, p99 time.Duration
	// CPU time per request of the control plane (kube-apiserver + etcd), the webhook
	// process, the baseline server's (the trivial webhook's) and this one (the clients).
	cpuServer, cpuWebhook, cpuBaseline, cpuBench time.Duration
	// match is the API server's own time in match conditions per request
	// (apiserver_admission_match_condition_evaluation_seconds: it times the conditions
	// of every webhook entry they keep the request from).
	match time.Duration
}

func mean(rs []result) result {
	var m result
	for _, r := range rs {
		m.rate += r.rate / float64(len(rs))
		m.p50 += r.p50 / time.Duration(len(rs))
		m.p99 += r.p99 / time.Duration(len(rs))
		m.cpuServer += r.cpuServer / time.Duration(len(rs))
		m.cpuWebhook += r.cpuWebhook / time.Duration(len(rs))
		m.cpuBaseline += r.cpuBaseline / time.Duration(len(rs))
		m.cpuBench += r.cpuBench / time.Duration(len(rs))
		m.match += r.match / time.Duration(len(rs))
	}
	return m
}

func summarize(lat []time.Duration, elapsed time.Duration) result {
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(float64(len(lat))*p))] }
	return result{rate: float64(len(lat)) / elapsed.Seconds(), p50: pct(0.50), p99: pct(0.99)}
}

// load runs do with n workers until count calls or the time limit, and returns each
// call's latency. The first error stops it.
func load(n, count int, limit time.Duration, do func(i int) error) (result, error) {
	var next atomic.Int64
	var mu sync.Mutex
	var firstErr error
	lat := make([]time.Duration, 0, count)
	deadline := time.Now().Add(limit)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= count || time.Now().After(deadline) {
					return
				}
				t := time.Now()
				err := do(i)
				d := time.Since(t)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				lat = append(lat, d)
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return result{}, firstErr
	}
	return summarize(lat, time.Since(start)), nil
}

func hammer(client *http.Client, url string, body []byte, n, count int, limit time.Duration) (result, error) {
	// Warm the connections up first so that TLS handshakes do not count.
	if _, err := load(n, 2*n, limit, func(int) error { return post(client, url, body) }); err != nil {
		return result{}, err
	}
	return load(n, count, limit, func(int) error { return post(client, url, body) })
}

func post(client *http.Client, url string, body []byte) error {
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || out.Response == nil || !out.Response.Allowed {
		return fmt.Errorf("%s: HTTP %d, %+v", url, resp.StatusCode, out.Response)
	}
	return nil
}

func httpsClient(caPEM []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 128,
	}}
}

func reviewBody() ([]byte, error) {
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "pangu-bench", Namespace: "ai-team", Labels: map[string]string{policy.LabelPool: "train-snt9b", policy.LabelWorkloadType: "training"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer", Image: "ascendhub/pytorch-npu:2.1.0-cann8.0",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"huawei.com/Ascend910": resource.MustParse("8")}}}}},
	}
	raw, err := json.Marshal(pod)
	if err != nil {
		return nil, err
	}
	return json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "bench", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: "ai-team", Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw}},
	})
}

// startWebhook runs the webhook binary with the bench certificate and waits for /readyz.
func startWebhook(ctx context.Context, c config, dir string) (string, func(), error) {
	addr, stop, pid, metrics, err := startWebhookProc(ctx, c, dir, "webhook", nil)
	webhookPID, webhookMetrics = pid, metrics
	return addr, stop, err
}

// webhookPID is the webhook process, whose CPU time the API-server rounds report;
// webhookMetrics its metrics endpoint.
var (
	webhookPID     int
	webhookMetrics string
)

// webhookNamespace holds the ConfigMaps that reserve node departures.
const webhookNamespace = "litepool-system"

// placementWebhook is P6's webhook configuration entry, podsWebhook P1-P5's on pods
// that name a pool.
const (
	placementWebhook = "pod-placement.runwhere.ai"
	podsWebhook      = "pods.runwhere.ai"
)

// startWebhookProc starts the webhook binary, logging to dir/name.log, with env added to
// this process's environment, and waits until it is ready. It returns its address, a
// stop function, its pid and its metrics address.
func startWebhookProc(ctx context.Context, c config, dir, name string, env []string) (string, func(), int, string, error) {
	port, probe, metrics := freePort(), freePort(), freePort()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return "", nil, 0, "", err
	}
	cmd := exec.CommandContext(ctx, c.bin, "--cert-mode=files", "--cert-dir="+dir, "--host=127.0.0.1", fmt.Sprintf("--port=%d", port),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probe), fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metrics), "--metrics-secure=false",
		"--kubeconfig="+c.kubeconfig, "--zap-log-level=error", "--namespace="+webhookNamespace)
	cmd.Args = append(cmd.Args, strings.Fields(c.extraArgs)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return "", nil, 0, "", err
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", probe))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr, stop, cmd.Process.Pid, fmt.Sprintf("127.0.0.1:%d", metrics), nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	stop()
	out, _ := os.ReadFile(log.Name())
	return "", nil, 0, "", fmt.Errorf("the webhook never became ready:\n%s", out)
}

// webhookConfigs are litepool's two webhook configurations (deploy/webhook/webhooks.yaml
// or a variant of it).
type webhookConfigs struct {
	mut admissionregistrationv1.MutatingWebhookConfiguration
	val admissionregistrationv1.ValidatingWebhookConfiguration
}

// loadConfigs reads the configurations of a webhooks.yaml.
func loadConfigs(file string) (webhookConfigs, error) {
	var w webhookConfigs
	raw, err := os.ReadFile(file)
	if err != nil {
		return w, err
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		switch {
		case strings.Contains(doc, "kind: MutatingWebhookConfiguration"):
			err = yaml.Unmarshal([]byte(doc), &w.mut)
		case strings.Contains(doc, "kind: ValidatingWebhookConfiguration"):
			err = yaml.Unmarshal([]byte(doc), &w.val)
		}
		if err != nil {
			return w, fmt.Errorf("%s: %w", file, err)
		}
	}
	return w, nil
}

// keep keeps the mutating webhooks mut keeps and the validating ones val keeps.
func (w webhookConfigs) keep(mut func(admissionregistrationv1.MutatingWebhook) bool, val func(admissionregistrationv1.ValidatingWebhook) bool) webhookConfigs {
	w.mut.Webhooks = slices.DeleteFunc(slices.Clone(w.mut.Webhooks), func(h admissionregistrationv1.MutatingWebhook) bool { return !mut(h) })
	w.val.Webhooks = slices.DeleteFunc(slices.Clone(w.val.Webhooks), func(h admissionregistrationv1.ValidatingWebhook) bool { return !val(h) })
	return w
}

// isPlacement tells P6's entries (however many a configuration splits it into): the
// validating webhooks on pods and their bindings.
func isPlacement(h admissionregistrationv1.ValidatingWebhook) bool {
	for _, r := range h.Rules {
		for _, res := range r.Resources {
			if res == "pods" || res == "pods/binding" || res == "bindings" {
				return true
			}
		}
	}
	return false
}

// register creates deploy/webhook's configurations, called by URL; the returned
// function removes them and waits until pods are admitted without the webhook again.
func register(ctx context.Context, kube kubernetes.Interface, root, addr string, caPEM []byte) (func(), error) {
	w, err := loadConfigs(filepath.Join(root, "deploy", "webhook", "webhooks.yaml"))
	if err != nil {
		return nil, err
	}
	return registerConfigs(ctx, kube, addr, caPEM, w)
}

// registerConfigs creates w's configurations, called by URL at addr.
func registerConfigs(ctx context.Context, kube kubernetes.Interface, addr string, caPEM []byte, w webhookConfigs) (func(), error) {
	mut, val := *w.mut.DeepCopy(), *w.val.DeepCopy()
	byURL := func(cc *admissionregistrationv1.WebhookClientConfig) {
		url := "https://" + addr + *cc.Service.Path
		*cc = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM}
	}
	for i := range mut.Webhooks {
		byURL(&mut.Webhooks[i].ClientConfig)
	}
	for i := range val.Webhooks {
		byURL(&val.Webhooks[i].ClientConfig)
	}
	ar := kube.AdmissionregistrationV1()
	if _, err := ar.MutatingWebhookConfigurations().Create(ctx, &mut, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if len(val.Webhooks) > 0 {
		if _, err := ar.ValidatingWebhookConfigurations().Create(ctx, &val, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	unregister := func() {
		_ = ar.MutatingWebhookConfigurations().Delete(ctx, mut.Name, metav1.DeleteOptions{})
		_ = ar.ValidatingWebhookConfigurations().Delete(ctx, val.Name, metav1.DeleteOptions{})
		_ = waitWebhook(ctx, kube, false)
	}
	if err := waitWebhook(ctx, kube, true); err != nil {
		unregister()
		return nil, err
	}
	return unregister, nil
}

// waitWebhook waits until the API server does (on) or does not (off) call a pod
// webhook: a dry-run pod of train-a100 comes back pinned only while one is registered.
func waitWebhook(ctx context.Context, kube kubernetes.Interface, on bool) error {
	for i := 0; i < 150; i++ {
		pod, err := kube.CoreV1().Pods("ai-team").Create(ctx, benchPod("probe", "train-a100"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil && (pod.Spec.NodeSelector[policy.LabelPool] != "") == on {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the API server did not pick up the webhook configuration change (on=%v)", on)
}

func benchPod(name, pool string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{policy.LabelPool: pool, policy.LabelWorkloadType: "training"}},
		Spec: corev1.PodSpec{SchedulerName: "bench-unscheduled", // nobody schedules them: no kwok work
			Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
}

// podRound creates c.pods pods in a fresh namespace, then deletes it all and waits, so
// that the next round starts from the same state.
// podRound creates c.pods pods in a new namespace and measures them; webhook is the pid
// of the webhook process whose CPU it reports.
func podRound(ctx context.Context, kube kubernetes.Interface, c config, namespace string, webhook int) (result, error) {
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return result{}, err
	}
	servers := proc.ServerPIDs(c.clusterDir)
	cpuServer0, cpuWebhook0, cpuBench0 := proc.CPUTime(servers...), proc.CPUTime(webhook), proc.CPUTime(os.Getpid())
	cpuBaseline0 := proc.CPUTime(baselinePID)
	match0 := matchConditionTime(ctx, kube)
	res, err := load(c.podConc, c.pods, 2*time.Minute, func(i int) error {
		_, err := kube.CoreV1().Pods(namespace).Create(ctx, benchPod(fmt.Sprintf("p-%05d", i), "train-a100"), metav1.CreateOptions{})
		return err
	})
	res.cpuServer = (proc.CPUTime(servers...) - cpuServer0) / time.Duration(c.pods)
	res.cpuWebhook = (proc.CPUTime(webhook) - cpuWebhook0) / time.Duration(c.pods)
	res.cpuBaseline = (proc.CPUTime(baselinePID) - cpuBaseline0) / time.Duration(c.pods)
	res.cpuBench = (proc.CPUTime(os.Getpid()) - cpuBench0) / time.Duration(c.pods)
	res.match = (matchConditionTime(ctx, kube) - match0) / time.Duration(c.pods)
	grace := int64(0)
	_ = kube.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{})
	for i := 0; i < 300; i++ {
		list, lerr := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{Limit: 1})
		if lerr == nil && len(list.Items) == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The namespace's removal (its events, its service account and its token) is work
	// for the API server, etcd and the controller manager: done before the next round.
	_ = kube.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{})
	for i := 0; i < 300; i++ {
		if _, gerr := kube.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{}); apierrors.IsNotFound(gerr) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	return res, err
}

// matchConditionTime is the API server's total time in match conditions that kept a
// request from a webhook, from its metrics (0 if it cannot tell).
func matchConditionTime(ctx context.Context, kube kubernetes.Interface) time.Duration {
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0
	}
	var total float64
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_admission_match_condition_evaluation_seconds_sum{") {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			total += v
		}
	}
	return time.Duration(total * float64(time.Second))
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
