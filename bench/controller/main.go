// Command controller measures litepool-webhook on a populated cluster
// (bench/controller/run.sh) as deploy/webhook runs it: two processes of the one binary,
// the webhook (--controllers=false) and the controller (--webhook=false), side by side:
//
//   - start-up: time until /readyz (caches synced) and, for the controller, until every
//     Pool object has a status; CPU seconds spent; peak RSS;
//   - idle: CPU over a quiet period, and the resident set after it (steady);
//   - status lag: a pod bound to a pool's node appears in (and, deleted, leaves) the
//     Pool's status.acceleratorUsed after how long (repeated, median and max);
//   - churn: 1,000 pods created at once; CPU spent, time until status counts all, and
//     the peak RSS of both processes after it.
//
// With --figures, the figures are also appended to that file, one "size key value" line
// each, for the table hack/bench.sh prints.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
)

type config struct {
	kubeconfig, bin string
	idle            time.Duration
	lagRounds       int
	churnPods       int
	figures, size   string
	// webhookArgs and controllerArgs are extra flags for each process (e.g. a pprof
	// address, to profile what the figures show).
	webhookArgs, controllerArgs string
}

func main() {
	var c config
	flag.StringVar(&c.kubeconfig, "kubeconfig", "", "the populated cluster")
	flag.StringVar(&c.bin, "webhook-bin", "_output/bin/litepool-webhook", "litepool-webhook binary")
	flag.DurationVar(&c.idle, "idle", 20*time.Second, "quiet period measured after start-up")
	flag.IntVar(&c.lagRounds, "lag-rounds", 10, "status-lag measurements (pod added, then removed)")
	flag.IntVar(&c.churnPods, "churn-pods", 1000, "pods created at once in the churn phase")
	flag.StringVar(&c.figures, "figures", "", "append the figures to this file (hack/bench.sh's table)")
	flag.StringVar(&c.size, "size", "", "the size label of the figures (the cluster's node count)")
	flag.StringVar(&c.webhookArgs, "webhook-args", "", "extra space-separated flags for the webhook process (e.g. --pprof-bind-address=127.0.0.1:6060)")
	flag.StringVar(&c.controllerArgs, "controller-args", "", "extra space-separated flags for the controller process")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench/controller:", err)
		os.Exit(1)
	}
}

type clients struct {
	kube  kubernetes.Interface
	pools *poolclient.Client
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
	cl := clients{kube: kube, pools: poolclient.New(dyn)}
	ctx := context.Background()
	// The webhook reserves departures and the leader keeps its Lease in its namespace.
	if err := localwebhook.EnsureNamespace(ctx, kube, localwebhook.Namespace); err != nil {
		return err
	}

	fmt.Printf("%-34s %12s %14s %12s %12s %10s %10s\n", "litepool-webhook", "ready (s)", "all status (s)", "CPU start (s)", "CPU idle (%)", "peak MiB", "steady MiB")
	web, err := measureStart(ctx, c, cl, false)
	if err != nil {
		return err
	}
	defer web.stop()
	web.print("webhook (--controllers=false)")
	ctl, err := measureStart(ctx, c, cl, true)
	if err != nil {
		return err
	}
	defer ctl.stop()
	ctl.print("controller (--webhook=false)")
	record(c, "webhook.peak", web.peakMiB)
	record(c, "webhook.steady", web.steadyMiB)
	record(c, "controller.peak", ctl.peakMiB)
	record(c, "controller.steady", ctl.steadyMiB)
	record(c, "controller.start", ctl.allStatus.Seconds())

	if err := statusLag(ctx, c, cl); err != nil {
		return err
	}
	return churn(ctx, c, cl, web.pid, ctl.pid, web.anonPeak, ctl.anonPeak)
}

// record appends one figure to --figures.
func record(c config, key string, v float64) {
	if c.figures == "" {
		return
	}
	f, err := os.OpenFile(c.figures, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/controller: figures:", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s %.2f\n", c.size, key, v)
}

type startFigures struct {
	pid                      int
	ready, allStatus         time.Duration
	cpuStart, cpuIdlePercent float64
	peakMiB, steadyMiB       float64
	// anonPeak is the largest anonymous resident set sampled so far: the process's own
	// memory, without the pages of its 80 MB binary, which the kernel reclaims under a
	// memory limit instead of killing the process.
	anonPeak func() float64
	stop     func()
}

func (f startFigures) print(name string) {
	all := "-"
	if f.allStatus > 0 {
		all = fmt.Sprintf("%.2f", f.allStatus.Seconds())
	}
	fmt.Printf("%-34s %12.2f %14s %12.2f %12.1f %10.1f %10.1f\n", name, f.ready.Seconds(), all, f.cpuStart, f.cpuIdlePercent, f.peakMiB, f.steadyMiB)
}

// measureStart launches the binary and measures its start-up and a quiet period.
func measureStart(ctx context.Context, c config, cl clients, controllers bool) (startFigures, error) {
	dir, err := os.MkdirTemp("", "bench-controller-")
	if err != nil {
		return startFigures{}, err
	}
	certs, err := localwebhook.NewCerts(dir)
	if err != nil {
		return startFigures{}, err
	}
	flags := append([]string{"--cert-mode=files", "--cert-dir=" + certs.Dir, "--controllers=false"}, strings.Fields(c.webhookArgs)...)
	if controllers {
		flags = append([]string{"--webhook=false", "--controllers=true", "--leader-elect=true"}, strings.Fields(c.controllerArgs)...)
	}
	logFile, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return startFigures{}, err
	}
	start := time.Now()
	p, err := localwebhook.Launch(localwebhook.Options{Binary: c.bin, Kubeconfig: c.kubeconfig, Namespace: localwebhook.Namespace, Flags: flags, Output: logFile})
	if err != nil {
		return startFigures{}, err
	}
	f := startFigures{pid: p.Cmd.Process.Pid, stop: func() { stop(p); logFile.Close(); os.RemoveAll(dir) }}
	f.anonPeak = sampleAnon(ctx, f.pid)
	if err := p.WaitReady(ctx, 5*time.Minute); err != nil {
		f.stop()
		return f, err
	}
	f.ready = time.Since(start)
	if controllers {
		if err := waitFirstPass(ctx, p.Metrics, start); err != nil {
			f.stop()
			return f, err
		}
		f.allStatus = time.Since(start)
	}
	f.cpuStart = cpuSeconds(f.pid)
	time.Sleep(c.idle)
	f.cpuIdlePercent = (cpuSeconds(f.pid) - f.cpuStart) / c.idle.Seconds() * 100
	f.peakMiB, f.steadyMiB = peakMiB(f.pid), rssMiB(f.pid, "VmRSS:")
	return f, nil
}

// stop ends the process gracefully (a leader releases its Lease, so the next run does
// not wait for it to expire), killing it if it does not exit within 10 seconds.
func stop(p *localwebhook.Process) {
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		p.Kill()
	}
}

// waitFirstPass waits until the controller has computed every pool once after start
// (its litepool_pool_status_last_sync_timestamp_seconds gauge), status written.
func waitFirstPass(ctx context.Context, metrics string, start time.Time) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		_, body := localwebhook.Get("http://" + metrics + "/metrics")
		for _, line := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(line, "litepool_pool_status_last_sync_timestamp_seconds "); ok {
				ts, err := strconv.ParseFloat(v, 64)
				return err == nil && ts >= float64(start.Unix()), nil
			}
		}
		return false, nil
	})
}

// statusLag adds a pod to a pool's node and removes it, timing until the Pool's
// status.acceleratorUsed follows each change.
func statusLag(ctx context.Context, c config, cl clients) error {
	pool, node, res, err := pickPoolNode(ctx, cl)
	if err != nil {
		return err
	}
	var lags []time.Duration
	for i := 0; i < c.lagRounds; i++ {
		before, err := used(ctx, cl, pool)
		if err != nil {
			return err
		}
		pod := benchPod(fmt.Sprintf("lag-%d-%d", time.Now().UnixNano(), i), node, res, 1)
		t0 := time.Now()
		if _, err := cl.kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return err
		}
		if err := waitUsed(ctx, cl, pool, before+1); err != nil {
			return err
		}
		lags = append(lags, time.Since(t0))
		t0 = time.Now()
		if err := deletePod(ctx, cl, pod.Name); err != nil {
			return err
		}
		if err := waitUsed(ctx, cl, pool, before); err != nil {
			return err
		}
		lags = append(lags, time.Since(t0))
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	fmt.Printf("status lag (pod created or deleted → Pool %s status.acceleratorUsed follows), %d changes: median %s, max %s\n",
		pool, len(lags), lags[len(lags)/2].Round(time.Millisecond), lags[len(lags)-1].Round(time.Millisecond))
	record(c, "controller.lag", lags[len(lags)/2].Seconds())
	return nil
}

// churn creates many pods at once on one pool's node and measures the controller's CPU
// and the time until status counts them all.
func churn(ctx context.Context, c config, cl clients, webPID, pid int, webAnon, anon func() float64) error {
	pool, nodes, res, err := pickPoolNodes(ctx, cl, 100)
	if err != nil {
		return err
	}
	before, err := used(ctx, cl, pool)
	if err != nil {
		return err
	}
	cpu0, t0 := cpuSeconds(pid), time.Now()
	names := make([]string, c.churnPods)
	errs := make(chan error, c.churnPods)
	sem := make(chan struct{}, 50)
	for i := range names {
		names[i] = fmt.Sprintf("churn-%d-%d", t0.UnixNano(), i)
		sem <- struct{}{}
		go func(name, node string) {
			defer func() { <-sem }()
			_, err := cl.kube.CoreV1().Pods("default").Create(ctx, benchPod(name, node, res, 1), metav1.CreateOptions{})
			errs <- err
		}(names[i], nodes[i%len(nodes)])
	}
	for range names {
		if err := <-errs; err != nil {
			return err
		}
	}
	created := time.Since(t0)
	if err := waitUsed(ctx, cl, pool, before+int64(c.churnPods)); err != nil {
		return err
	}
	followed := time.Since(t0)
	cpu := cpuSeconds(pid) - cpu0
	fmt.Printf("churn: %d pods created in %s; status counted them all %s after the first create (%s after the last); controller CPU %.2f s\n",
		c.churnPods, created.Round(time.Millisecond), followed.Round(time.Millisecond), (followed - created).Round(time.Millisecond), cpu)
	fmt.Printf("peak RSS after the churn: webhook %.1f MiB, controller %.1f MiB; of it anonymous (the binary's pages left out), at most: webhook %.1f MiB, controller %.1f MiB\n",
		peakMiB(webPID), peakMiB(pid), webAnon(), anon())
	record(c, "webhook.anon", webAnon())
	record(c, "controller.anon", anon())
	record(c, "webhook.burst", peakMiB(webPID))
	record(c, "controller.burst", peakMiB(pid))
	record(c, "controller.follow", followed.Seconds())
	for _, n := range names {
		if err := deletePod(ctx, cl, n); err != nil {
			return err
		}
	}
	return nil
}

func pickPoolNode(ctx context.Context, cl clients) (pool, node string, res corev1.ResourceName, err error) {
	pool, nodes, res, err := pickPoolNodes(ctx, cl, 1)
	if err != nil {
		return "", "", "", err
	}
	return pool, nodes[0], res, nil
}

// pickPoolNodes finds a Pool object and up to n of its Ready nodes with accelerators of
// one resource.
func pickPoolNodes(ctx context.Context, cl clients, n int64) (pool string, names []string, res corev1.ResourceName, err error) {
	pools, err := cl.pools.List(ctx)
	if err != nil {
		return "", nil, "", err
	}
	for _, p := range pools {
		nodes, err := cl.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: policy.LabelPool + "=" + p.Name, Limit: n})
		if err != nil {
			return "", nil, "", err
		}
		for i := range nodes.Items {
			r, total := policy.Accelerators{}.NodeAccelerators(&nodes.Items[i])
			if policy.IsNodeReady(&nodes.Items[i]) && total > 0 && (res == "" || r == res) {
				res, names = r, append(names, nodes.Items[i].Name)
			}
		}
		if len(names) > 0 {
			return p.Name, names, res, nil
		}
	}
	return "", nil, "", fmt.Errorf("no Pool object with a Ready accelerator node")
}

func benchPod(name, node string, res corev1.ResourceName, n int64) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "bench",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{res: *resource.NewQuantity(n, resource.DecimalSI)}}}}}}
}

func deletePod(ctx context.Context, cl clients, name string) error {
	zero := int64(0)
	return cl.kube.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
}

func used(ctx context.Context, cl clients, pool string) (int64, error) {
	p, err := cl.pools.Get(ctx, pool)
	if err != nil {
		return 0, err
	}
	return p.Status.AcceleratorUsed, nil
}

func waitUsed(ctx context.Context, cl clients, pool string, want int64) error {
	var got int64
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cl.pools.Get(ctx, pool)
		if err != nil {
			return false, err
		}
		got = p.Status.AcceleratorUsed
		return got == want, nil
	})
	if err != nil {
		return fmt.Errorf("pool %s: status.acceleratorUsed %d, want %d: %w", pool, got, want, err)
	}
	return nil
}

// cpuSeconds is the process's user+system CPU time (Linux /proc, 100 ticks a second).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

// sampleAnon samples the process's RssAnon every 50 ms until it exits and returns the
// largest value seen so far (the kernel keeps no peak of it).
func sampleAnon(ctx context.Context, pid int) func() float64 {
	var mu sync.Mutex
	peak := 0.0
	go func() {
		for ctx.Err() == nil {
			v := rssMiB(pid, "RssAnon:")
			if v == 0 {
				return
			}
			mu.Lock()
			peak = max(peak, v)
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// peakMiB is the process's peak resident set (VmHWM).
func peakMiB(pid int) float64 { return rssMiB(pid, "VmHWM:") }

// rssMiB reads one of /proc/<pid>/status's sizes (VmHWM:, VmRSS:) in MiB.
func rssMiB(pid int, field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field) {
			kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
			return kb / 1024
		}
	}
	return 0
}
