// Command rollout measures what the controller's DriverRollout reconciler asks of the
// API server (issue 32's Show): a rollout over a pool of kwok nodes (1,000 by default)
// run by litepool-webhook --controllers, counted by the process's own metrics:
// client-go's rest_client_requests_total by method, and controller-runtime's
// controller_runtime_reconcile_total{controller="driver-rollout"} for the passes. A
// driver agent here plays the driver: once an installer pod has run for --install-delay
// it completes it (unless kwok has) and sets the node's driver label, as
// test/e2e/upgrade's agent does.
//
// --bin NAME=PATH (repeatable) runs the same rollout with each binary in turn, on the
// same cluster, and prints them side by side (bench/rollout/before.sh: the binary
// before node Jobs were watched).
//
// The counts are the whole process's: the other controllers' calls that the rollout
// causes (Pool status following the cordons) are in them; an idle window before the
// rollout gives the process's rate when nothing happens.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/bench/internal/proc"
	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
)

const (
	pool        = "bench-rollout"
	driverLabel = "huawei.com/driver.version"
)

type binary struct{ name, path string }

type config struct {
	kubeconfig         string
	bins               []binary
	nodes              int
	maxUnavailable     string
	installDelay, idle time.Duration
	timeout            time.Duration
	// window, when set, measures each rollout for this long instead of to its end,
	// then removes it and returns its nodes.
	window time.Duration
	// The by-domain comparison (domains.go): domains × perDomain nodes, installs of
	// domainInstall; none when domains is 0.
	domains, perDomain int
	domainInstall      time.Duration
}

// waitRolloutEnd polls the rollout every interval until it succeeds (its last state and
// nil), fails or is aborted (an error with its message), or limit passes.
func waitRolloutEnd(ctx context.Context, ctl client.Client, ro *v1alpha1.DriverRollout, interval, limit time.Duration) (v1alpha1.DriverRollout, error) {
	var last v1alpha1.DriverRollout
	err := wait.PollUntilContextTimeout(ctx, interval, limit, true, func(ctx context.Context) (bool, error) {
		if err := ctl.Get(ctx, client.ObjectKeyFromObject(ro), &last); err != nil {
			return false, nil //nolint:nilerr // polled again
		}
		switch last.Status.Phase {
		case v1alpha1.RolloutSucceeded:
			return true, nil
		case v1alpha1.RolloutFailed, v1alpha1.RolloutAborted:
			return false, fmt.Errorf("rollout %s: %s", last.Status.Phase, last.Status.Message)
		}
		return false, nil
	})
	return last, err
}

func main() {
	var c config
	flag.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (hack/cluster.sh: kube-controller-manager runs the Jobs, kwok the nodes)")
	flag.Func("bin", "NAME=PATH of a litepool-webhook binary (repeatable; each runs one rollout)", func(v string) error {
		n, p, ok := strings.Cut(v, "=")
		if !ok || n == "" || p == "" {
			return errors.New("want NAME=PATH")
		}
		c.bins = append(c.bins, binary{n, p})
		return nil
	})
	flag.IntVar(&c.nodes, "nodes", 1000, "kwok nodes in the pool (0: only the by-domain comparison)")
	flag.StringVar(&c.maxUnavailable, "max-unavailable", "10%", "the rollout's maxUnavailable")
	flag.DurationVar(&c.installDelay, "install-delay", 10*time.Second, "how long an installer runs before the agent completes it")
	flag.DurationVar(&c.idle, "idle", 10*time.Second, "quiet window measured before each rollout")
	flag.DurationVar(&c.timeout, "timeout", time.Hour, "longest a rollout may take (1,000 nodes at 10% took 17-21 min on 2 shared cores at load 15-20)")
	flag.DurationVar(&c.window, "window", 0, "measure each rollout for this long, then remove it and return its nodes (0: measure it to its end)")
	flag.IntVar(&c.domains, "domains", 8, "super pods in the by-domain comparison's pool (0: no comparison)")
	flag.IntVar(&c.perDomain, "per-domain", 4, "kwok nodes per super pod in the by-domain comparison")
	flag.DurationVar(&c.domainInstall, "domain-install", 5*time.Second, "how long an installer runs in the by-domain comparison")
	flag.Parse()
	if len(c.bins) == 0 {
		c.bins = []binary{{"now", "_output/bin/litepool-webhook"}}
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench/rollout:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 500, 1000
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctl, err := client.New(cfg, client.Options{Scheme: kit.Scheme})
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := localwebhook.EnsureNamespace(ctx, kube, localwebhook.Namespace); err != nil {
		return err
	}
	if c.nodes > 0 {
		if err := measureCalls(ctx, c, kube, dyn, ctl); err != nil {
			return err
		}
	}
	if c.domains == 0 {
		return nil
	}
	// The comparison is the tree's own (the last binary): older ones may not know rollouts
	// by domain.
	start := time.Now()
	runs, err := compareDomains(ctx, c, kube, ctl, c.bins[len(c.bins)-1])
	if err != nil {
		return fmt.Errorf("by-domain comparison: %w", err)
	}
	return printDomains(c, runs, time.Since(start))
}

// measureCalls is issue 32's figure: the API calls per pass of a rollout over the
// pool of c.nodes nodes, with each binary.
func measureCalls(ctx context.Context, c config, kube kubernetes.Interface, dyn dynamic.Interface, ctl client.Client) error {
	if err := populate(ctx, c, kube, dyn); err != nil {
		return err
	}
	var all []figures
	for i, b := range c.bins {
		f, err := measure(ctx, c, kube, ctl, b, fmt.Sprintf("v%d", i+2))
		if err != nil {
			return fmt.Errorf("%s: %w", b.name, err)
		}
		all = append(all, f)
	}
	printTable(c, all)
	return nil
}

// populate creates the pool and its kwok nodes at driver v1, and waits until kwok has
// made them Ready.
func populate(ctx context.Context, c config, kube kubernetes.Interface, dyn dynamic.Interface) error {
	_, err := poolclient.New(dyn).Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1,
			Accelerator: v1alpha1.AcceleratorSpec{Type: "Snt9B", ResourceName: "huawei.com/Ascend910"}}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	start := time.Now()
	list := corev1.ResourceList{"cpu": resource.MustParse("192"), "memory": resource.MustParse("1Ti"),
		"pods": resource.MustParse("110"), "huawei.com/Ascend910": resource.MustParse("8")}
	errs := proc.Parallel(c.nodes, 16, func(i int) error {
		name := nodeName(i)
		_, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
				Labels: map[string]string{"type": "kwok", driverLabel: "v1", policy.LabelGPUType: "Snt9B",
					policy.LabelPool: pool, "kubernetes.io/hostname": name}},
			Status: corev1.NodeStatus{Allocatable: list, Capacity: list},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if len(errs) > 0 {
		return fmt.Errorf("creating nodes: %d failed, the first: %w", len(errs), errs[0])
	}
	ready := 0
	err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: policy.LabelPool + "=" + pool})
		if err != nil {
			return false, nil //nolint:nilerr // polled again
		}
		ready = 0
		for i := range nodes.Items {
			if policy.IsNodeReady(&nodes.Items[i]) {
				ready++
			}
		}
		return ready == c.nodes, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d nodes Ready: %w", ready, c.nodes, err)
	}
	fmt.Printf("pool %s: %d kwok nodes Ready after %s\n", pool, c.nodes, time.Since(start).Round(time.Second))
	return nil
}

func nodeName(i int) string { return fmt.Sprintf("%s-%04d", pool, i+1) }

// counts are what the process's metrics say at one moment.
type counts struct {
	calls  map[string]float64 // by method
	passes float64            // reconciles of the driver-rollout controller
}

func scrape(addr string) (counts, error) {
	code, body := localwebhook.Get("http://" + addr + "/metrics")
	if code != 200 {
		return counts{}, fmt.Errorf("metrics at %s: %d %s", addr, code, body)
	}
	c := counts{calls: map[string]float64{}}
	for _, line := range strings.Split(body, "\n") {
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, "rest_client_requests_total{"):
			c.calls[label(line, "method")] += v
		case strings.HasPrefix(line, "controller_runtime_reconcile_total{") && label(line, "controller") == "driver-rollout":
			c.passes += v
		}
	}
	return c, nil
}

// label is the value of label name in a metric line.
func label(line, name string) string {
	_, rest, ok := strings.Cut(line, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

func (c counts) minus(o counts) counts {
	out := counts{calls: map[string]float64{}, passes: c.passes - o.passes}
	for k, v := range c.calls {
		if d := v - o.calls[k]; d != 0 {
			out.calls[k] = d
		}
	}
	return out
}

func (c counts) total() float64 {
	t := 0.0
	for _, v := range c.calls {
		t += v
	}
	return t
}

type figures struct {
	name    string
	idle    counts
	idleFor time.Duration
	rollout counts
	took    time.Duration
	nodes   int
	done    int    // nodes the rollout had finished when measured
	first   counts // the first pass (in --window mode, not in rollout)
}

// measure runs one rollout of the pool to version with binary b.
func measure(ctx context.Context, c config, kube kubernetes.Interface, ctl client.Client, b binary, version string) (figures, error) {
	f := figures{name: b.name, nodes: c.nodes}
	p, stop, err := startController(ctx, c, b)
	if err != nil {
		return f, err
	}
	defer stop()
	time.Sleep(2 * time.Second) // the first passes of every controller after start
	c0, err := scrape(p.Metrics)
	if err != nil {
		return f, err
	}
	time.Sleep(c.idle)
	c1, err := scrape(p.Metrics)
	if err != nil {
		return f, err
	}
	f.idle, f.idleFor = c1.minus(c0), c.idle

	agentCtx, stopAgent := context.WithCancel(ctx)
	agentDone := make(chan struct{})
	go func() { defer close(agentDone); agent(agentCtx, kube, c.installDelay) }()
	defer func() { stopAgent(); <-agentDone }()

	mu := intstr.Parse(c.maxUnavailable)
	ro := &v1alpha1.DriverRollout{ObjectMeta: metav1.ObjectMeta{Name: "bench-" + version},
		Spec: v1alpha1.DriverRolloutSpec{Pool: pool, Version: version, MaxUnavailable: &mu,
			Installer: v1alpha1.DriverInstaller{Image: "registry.example/ascend-driver-installer:" + version}}}
	start := time.Now()
	if err := ctl.Create(ctx, ro); err != nil {
		return f, err
	}
	if c.window > 0 {
		// The window starts once the first pass has ended: it writes every node of the
		// pool (its upgrade-state annotation), once per rollout and the same in every
		// binary, which would outweigh the passes a short window holds.
		var first counts
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, c.timeout, true, func(context.Context) (bool, error) {
			now, err := scrape(p.Metrics)
			first = now
			return err == nil && now.passes >= c1.passes+1, nil
		}); err != nil {
			return f, fmt.Errorf("the first pass did not end: %w", err)
		}
		f.first = first.minus(c1)
		c1, start = first, time.Now()
	}
	limit := c.timeout
	if c.window > 0 {
		limit = c.window
	}
	last, err := waitRolloutEnd(ctx, ctl, ro, time.Second, limit)
	f.took = time.Since(start)
	f.done = 0
	for _, n := range last.Status.Nodes {
		if n.State == string(policy.UpgradeDone) {
			f.done++
		}
	}
	if c.window > 0 && wait.Interrupted(err) {
		err = nil
	}
	if err != nil {
		return f, fmt.Errorf("rollout %s (phase %s after %s): %w", ro.Name, last.Status.Phase, f.took.Round(time.Second), err)
	}
	c2, err := scrape(p.Metrics)
	if err != nil {
		return f, err
	}
	f.rollout = c2.minus(c1)
	fmt.Printf("%s: rollout of %d nodes to %s, %s measured (%s); %0.f passes, %0.f API calls\n", b.name, c.nodes, version, f.took.Round(time.Second),
		last.Status.Message, f.rollout.passes, f.rollout.total())
	if c.window > 0 {
		stop() // a pass under way writes no more after the nodes are returned
		if err := returnNodes(ctx, kube, ctl, ro); err != nil {
			return f, err
		}
	}
	// The next rollout starts with no installer Job in the namespace.
	bg := metav1.DeletePropagationBackground
	_ = kube.BatchV1().Jobs(localwebhook.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg},
		metav1.ListOptions{LabelSelector: upgrade.LabelComponent + "=" + upgrade.Component})
	return f, nil
}

// startController runs binary b as litepool's controller (no webhook) on the cluster
// until stop is called.
func startController(ctx context.Context, c config, b binary) (*localwebhook.Process, func(), error) {
	dir, err := os.MkdirTemp("", "bench-rollout-")
	if err != nil {
		return nil, nil, err
	}
	certs, err := localwebhook.NewCerts(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	log, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	p, err := localwebhook.Launch(localwebhook.Options{Binary: b.path, Kubeconfig: c.kubeconfig, Namespace: localwebhook.Namespace,
		Flags: []string{"--cert-mode=files", "--cert-dir=" + certs.Dir, "--webhook=false", "--controllers=true", "--zap-log-level=error"}, Output: log})
	if err != nil {
		log.Close()
		os.RemoveAll(dir)
		return nil, nil, err
	}
	stop := func() {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.Done():
		case <-time.After(10 * time.Second):
			p.Kill()
		}
		log.Close()
		os.RemoveAll(dir)
	}
	if err := p.WaitReady(ctx, 5*time.Minute); err != nil {
		out, _ := os.ReadFile(log.Name())
		stop()
		return nil, nil, fmt.Errorf("%w\n%s", err, out)
	}
	return p, stop, nil
}

// returnNodes removes the rollout and puts its pool's nodes back as they were before
// it (uncordoned, no litepool annotation), as an operator would by hand, so that the
// next binary's rollout starts where this one did.
func returnNodes(ctx context.Context, kube kubernetes.Interface, ctl client.Client, ro *v1alpha1.DriverRollout) error {
	if err := ctl.Delete(ctx, ro); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: policy.LabelPool + "=" + pool})
	if err != nil {
		return err
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		ann := map[string]any{}
		for k := range n.Annotations {
			if strings.HasPrefix(k, policy.Prefix) {
				ann[k] = nil
			}
		}
		if !n.Spec.Unschedulable && len(ann) == 0 {
			continue
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}, "spec": map[string]any{"unschedulable": nil}})
		if _, err := kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// agent completes installer pods that have run for delay, and reports the driver they
// installed on their node, until ctx ends.
func agent(ctx context.Context, kube kubernetes.Interface, delay time.Duration) {
	seen, handled := map[string]time.Time{}, map[string]bool{}
	for ctx.Err() == nil {
		time.Sleep(250 * time.Millisecond)
		pods, err := kube.CoreV1().Pods(localwebhook.Namespace).List(ctx, metav1.ListOptions{LabelSelector: upgrade.LabelComponent + "=" + upgrade.Component})
		if err != nil {
			continue
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Spec.NodeName == "" || handled[p.Name] {
				continue
			}
			first, ok := seen[p.Name]
			if !ok {
				seen[p.Name], first = time.Now(), time.Now()
			}
			if time.Since(first) < delay {
				continue
			}
			if finish(ctx, kube, p) {
				handled[p.Name] = true
			}
		}
	}
}

func finish(ctx context.Context, kube kubernetes.Interface, p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		now := metav1.Now()
		p.Status.Phase = corev1.PodSucceeded
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}}}}
		if _, err := kube.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			return false
		}
	}
	version := ""
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == "DRIVER_VERSION" {
			version = e.Value
		}
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, driverLabel, version)
	_, err := kube.CoreV1().Nodes().Patch(ctx, p.Spec.NodeName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err == nil
}

var verbs = []string{"GET", "LIST", "WATCH", "POST", "PUT", "PATCH", "DELETE"}

func printTable(c config, all []figures) {
	what := "to its end"
	if c.window > 0 {
		what = c.window.String() + " after its first pass"
	}
	fmt.Printf("\nDriverRollout of %d kwok nodes (%s), maxUnavailable %s, installs of %s; the controller process's API calls (rest_client_requests_total) per driver-rollout reconcile pass\n",
		c.nodes, what, c.maxUnavailable, c.installDelay)
	fmt.Printf("%-46s", "")
	for _, f := range all {
		fmt.Printf(" %14s", f.name)
	}
	fmt.Println()
	row := func(name string, cell func(f figures) string) {
		fmt.Printf("%-46s", name)
		for _, f := range all {
			fmt.Printf(" %14s", cell(f))
		}
		fmt.Println()
	}
	if c.window > 0 {
		row("first pass (not in what follows): API calls", func(f figures) string { return fmt.Sprintf("%.0f", f.first.total()) })
		row("  of them PATCH", func(f figures) string { return fmt.Sprintf("%.0f", f.first.calls["PATCH"]) })
	}
	row("measured (s)", func(f figures) string { return fmt.Sprintf("%.0f", f.took.Seconds()) })
	row("reconcile passes", func(f figures) string { return fmt.Sprintf("%.0f", f.rollout.passes) })
	row("passes per minute", func(f figures) string { return fmt.Sprintf("%.1f", f.rollout.passes/f.took.Minutes()) })
	row("API calls", func(f figures) string { return fmt.Sprintf("%.0f", f.rollout.total()) })
	row("API calls per pass", func(f figures) string { return perPass(f.rollout.total(), f.rollout.passes) })
	methods := map[string]bool{}
	for _, f := range all {
		for m := range f.rollout.calls {
			methods[m] = true
		}
	}
	ordered := slices.DeleteFunc(slices.Clone(verbs), func(m string) bool { return !methods[m] })
	for m := range methods {
		if !slices.Contains(verbs, m) {
			ordered = append(ordered, m)
		}
	}
	for _, m := range ordered {
		row("  "+m+" per pass", func(f figures) string { return perPass(f.rollout.calls[m], f.rollout.passes) })
	}
	fmt.Println("  (client-go's method label: GET counts gets, lists and watches alike)")
	row("nodes done", func(f figures) string { return strconv.Itoa(f.done) })
	row("API calls per node done", func(f figures) string {
		if f.done == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f", f.rollout.total()/float64(f.done))
	})
	row("idle: API calls per minute (no rollout)", func(f figures) string {
		return fmt.Sprintf("%.1f", f.idle.total()/f.idleFor.Minutes())
	})
}

func perPass(v, passes float64) string {
	if passes == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v/passes)
}
