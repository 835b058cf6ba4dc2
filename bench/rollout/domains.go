package main

// The by-domain comparison (issue 41's figure): one pool of D super pods × M kwok nodes
// (MindCluster's labels, the Ascend topology preset), upgraded node by node
// (maxUnavailable 1) and then by domain (maxUnavailableDomains 1) by the same
// controller, with installs of a fixed length. Each rollout's wall time and
// domain-unavailable time are read from its status; the domain-unavailable time is also
// measured from the bench's own watch of the nodes' cordons, so that the status figure
// is checked against what the cluster saw.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
)

const (
	domainPool    = "bench-domains"
	superPodLabel = "huawei.com/topotree.superpodid"
	rackLabel     = "huawei.com/topotree.rackid"
)

// domainRun is what one rollout of the domain pool gave.
type domainRun struct {
	strategy string
	wall     time.Duration // status: startTime to completionTime
	status   time.Duration // status.domainUnavailableSeconds
	observed time.Duration // the bench's watch: per domain, the time with a member cordoned
	most     int           // the most nodes cordoned at once
	cordons  int           // the most cordons of one node
	domains  int           // status.domains, each Done whole
}

// compareDomains runs both rollouts of the domain pool with binary b and returns them,
// node by node first.
func compareDomains(ctx context.Context, c config, kube kubernetes.Interface, ctl client.Client, b binary) ([]domainRun, error) {
	domainOf, err := populateDomains(ctx, c, kube, ctl)
	if err != nil {
		return nil, err
	}
	_, stop, err := startController(ctx, c, b)
	if err != nil {
		return nil, err
	}
	defer stop()
	agentCtx, stopAgent := context.WithCancel(ctx)
	agentDone := make(chan struct{})
	go func() { defer close(agentDone); agent(agentCtx, kube, c.domainInstall) }()
	defer func() { stopAgent(); <-agentDone }()

	one := intstr.FromInt32(1)
	k := int32(1)
	specs := []struct {
		strategy string
		pace     func(*v1alpha1.DriverRolloutSpec)
	}{
		{"node by node", func(s *v1alpha1.DriverRolloutSpec) { s.MaxUnavailable = &one }},
		{"by domain", func(s *v1alpha1.DriverRolloutSpec) { s.MaxUnavailableDomains = &k }},
	}
	var runs []domainRun
	for i, s := range specs {
		version := fmt.Sprintf("d%d", i+2)
		spec := v1alpha1.DriverRolloutSpec{Pool: domainPool, Version: version,
			Installer: v1alpha1.DriverInstaller{Image: "registry.example/ascend-driver-installer:" + version}}
		s.pace(&spec)
		r, err := rollDomains(ctx, c, kube, ctl, spec, domainOf)
		if err != nil {
			return runs, fmt.Errorf("%s: %w", s.strategy, err)
		}
		r.strategy = s.strategy
		runs = append(runs, r)
	}
	return runs, nil
}

// populateDomains creates the domain pool and its nodes at driver v1, and waits until
// kwok has made them Ready; it returns each node's super pod.
func populateDomains(ctx context.Context, c config, kube kubernetes.Interface, ctl client.Client) (map[string]string, error) {
	p := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: domainPool},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1,
			Accelerator: v1alpha1.AcceleratorSpec{Type: "Snt9B", ResourceName: "huawei.com/Ascend910"},
			Topology:    &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend}}}
	if err := ctl.Create(ctx, p); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	list := corev1.ResourceList{"cpu": resource.MustParse("192"), "memory": resource.MustParse("1Ti"),
		"pods": resource.MustParse("110"), "huawei.com/Ascend910": resource.MustParse("8")}
	domainOf := map[string]string{}
	for d := range c.domains {
		for m := range c.perDomain {
			name := fmt.Sprintf("%s-%d-%d", domainPool, d+1, m+1)
			sp := fmt.Sprintf("sp-%d", d+1)
			domainOf[name] = sp
			_, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
					Labels: map[string]string{"type": "kwok", driverLabel: "v1", policy.LabelGPUType: "Snt9B",
						policy.LabelPool: domainPool, "kubernetes.io/hostname": name, superPodLabel: sp, rackLabel: "rack-1"}},
				Status: corev1.NodeStatus{Allocatable: list, Capacity: list},
			}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, err
			}
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: policy.LabelPool + "=" + domainPool})
		if err != nil {
			return false, nil //nolint:nilerr // polled again
		}
		ready := 0
		for i := range nodes.Items {
			if policy.IsNodeReady(&nodes.Items[i]) {
				ready++
			}
		}
		return ready == len(domainOf), nil
	})
	if err != nil {
		return nil, fmt.Errorf("nodes of pool %s Ready: %w", domainPool, err)
	}
	return domainOf, nil
}

// rollDomains runs one rollout of the domain pool to its end and measures it.
func rollDomains(ctx context.Context, c config, kube kubernetes.Interface, ctl client.Client, spec v1alpha1.DriverRolloutSpec,
	domainOf map[string]string) (domainRun, error) {
	var r domainRun
	clock := newCordonClock(domainOf)
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched, err := watchCordons(watchCtx, kube, clock)
	if err != nil {
		stopWatch()
		return r, err
	}
	ro := &v1alpha1.DriverRollout{ObjectMeta: metav1.ObjectMeta{Name: domainPool + "-" + spec.Version}, Spec: spec}
	if err := ctl.Create(ctx, ro); err != nil {
		stopWatch()
		return r, err
	}
	last, err := waitRolloutEnd(ctx, ctl, ro, 500*time.Millisecond, c.timeout)
	// The last uncordon can reach the watch a moment after the status reads Succeeded.
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return clock.cordoned() == 0, nil
	})
	stopWatch()
	<-watched
	if err != nil {
		return r, fmt.Errorf("rollout %s (phase %s): %w", ro.Name, last.Status.Phase, err)
	}
	if r, err = domainFigures(&last, clock, c); err != nil {
		return r, err
	}
	bg := metav1.DeletePropagationBackground
	_ = kube.BatchV1().Jobs(localwebhook.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg},
		metav1.ListOptions{LabelSelector: upgrade.LabelComponent + "=" + upgrade.Component})
	return r, nil
}

// domainFigures reads a finished rollout's figures, and refuses a rollout whose
// domain-unavailable figure was not computed: the smoke run's one check.
func domainFigures(ro *v1alpha1.DriverRollout, clock *cordonClock, c config) (domainRun, error) {
	st := ro.Status
	r := domainRun{status: time.Duration(st.DomainUnavailableSeconds) * time.Second}
	if st.StartTime == nil || st.CompletionTime == nil {
		return r, fmt.Errorf("rollout %s Succeeded without startTime and completionTime: %+v", ro.Name, st)
	}
	r.wall = st.CompletionTime.Sub(st.StartTime.Time)
	r.observed, r.most, r.cordons = clock.total(), clock.most, clock.mostCordons()
	for _, d := range st.Domains {
		if d.State == policy.RolloutDomainDone && d.Done == int32(c.perDomain) {
			r.domains++
		}
	}
	switch {
	case r.domains != c.domains:
		return r, fmt.Errorf("rollout %s: %d of %d domains Done whole in status.domains (%+v)", ro.Name, r.domains, c.domains, st.Domains)
	case st.DomainUnavailableSeconds <= 0:
		return r, fmt.Errorf("rollout %s: status.domainUnavailableSeconds not computed (%d)", ro.Name, st.DomainUnavailableSeconds)
	case r.observed <= 0:
		return r, fmt.Errorf("rollout %s: the bench saw no node of pool %s cordoned", ro.Name, domainPool)
	}
	return r, nil
}

// watchCordons feeds clock with the domain pool's nodes until ctx ends; the channel
// closes when it has stopped.
func watchCordons(ctx context.Context, kube kubernetes.Interface, clock *cordonClock) (<-chan struct{}, error) {
	sel := metav1.ListOptions{LabelSelector: policy.LabelPool + "=" + domainPool}
	list, err := kube.CoreV1().Nodes().List(ctx, sel)
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		clock.observe(list.Items[i].Name, list.Items[i].Spec.Unschedulable, time.Now())
	}
	rv := list.ResourceVersion
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			opts := sel
			opts.ResourceVersion, opts.AllowWatchBookmarks = rv, true
			w, err := kube.CoreV1().Nodes().Watch(ctx, opts)
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			rv = drain(ctx, w, clock, rv)
		}
	}()
	return done, nil
}

// drain reads one watch to its end and returns the last resource version seen.
func drain(ctx context.Context, w watch.Interface, clock *cordonClock, rv string) string {
	defer w.Stop()
	for ev := range w.ResultChan() {
		n, ok := ev.Object.(*corev1.Node)
		if !ok {
			if ev.Type == watch.Error && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "bench/rollout: watch of pool %s's nodes: %v\n", domainPool, apierrors.FromObject(ev.Object))
			}
			continue
		}
		rv = n.ResourceVersion
		if ev.Type != watch.Bookmark {
			clock.observe(n.Name, n.Spec.Unschedulable && ev.Type != watch.Deleted, time.Now())
		}
	}
	return rv
}

// cordonClock measures, from the cordons it is told of, each domain's time with at
// least one member cordoned (the bench's own domain-unavailable time), the most nodes
// cordoned at once and each node's cordons.
type cordonClock struct {
	mu       sync.Mutex
	domainOf map[string]string
	now      map[string]bool      // node cordoned
	out      map[string]int       // domain: members cordoned
	since    map[string]time.Time // domain: out since
	sum      time.Duration
	most     int
	cordons  map[string]int
}

func newCordonClock(domainOf map[string]string) *cordonClock {
	return &cordonClock{domainOf: domainOf, now: map[string]bool{}, out: map[string]int{}, since: map[string]time.Time{}, cordons: map[string]int{}}
}

// observe records that node is (or is not) cordoned at time at; nodes of no domain
// are not counted.
func (k *cordonClock) observe(node string, cordoned bool, at time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	d, ok := k.domainOf[node]
	if !ok || k.now[node] == cordoned {
		return
	}
	k.now[node] = cordoned
	if cordoned {
		k.cordons[node]++
		if k.out[d]++; k.out[d] == 1 {
			k.since[d] = at
		}
		k.most = max(k.most, k.cordonedLocked())
		return
	}
	if k.out[d]--; k.out[d] == 0 {
		k.sum += at.Sub(k.since[d])
	}
}

func (k *cordonClock) cordonedLocked() int {
	n := 0
	for _, c := range k.now {
		if c {
			n++
		}
	}
	return n
}

// cordoned is the count of nodes cordoned now.
func (k *cordonClock) cordoned() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cordonedLocked()
}

// total is the domain-unavailable time of the domains that have come back.
func (k *cordonClock) total() time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.sum
}

// mostCordons is the most times one node was cordoned.
func (k *cordonClock) mostCordons() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	most := 0
	for _, n := range k.cordons {
		most = max(most, n)
	}
	return most
}

// printDomains prints the comparison, node by node first, and the ratio by domain /
// node by node of each figure; it also appends the figures to $BENCH_FIGURES for
// hack/bench.sh's summary.
func printDomains(c config, runs []domainRun, took time.Duration) error {
	if len(runs) != 2 {
		return errors.New("the comparison needs both rollouts")
	}
	n, d := runs[0], runs[1]
	fmt.Printf("\nRollout by domain (issue 41): pool of %d super pods × %d kwok nodes, installs of %s, one controller; node by node (maxUnavailable 1) vs by domain (maxUnavailableDomains 1)\n",
		c.domains, c.perDomain, c.domainInstall)
	fmt.Printf("%-52s %14s %14s %25s\n", "", n.strategy, d.strategy, "by domain / node by node")
	ratio := func(a, b time.Duration) string {
		if a <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", b.Seconds()/a.Seconds())
	}
	minutes := func(v time.Duration) string { return fmt.Sprintf("%.2f", v.Minutes()) }
	fmt.Printf("%-52s %14.0f %14.0f %25s\n", "wall time (s), status", n.wall.Seconds(), d.wall.Seconds(), ratio(n.wall, d.wall))
	fmt.Printf("%-52s %14s %14s %25s\n", "domain-unavailable (min), status", minutes(n.status), minutes(d.status), ratio(n.status, d.status))
	fmt.Printf("%-52s %14s %14s %25s\n", "domain-unavailable (min), the bench's watch of cordons", minutes(n.observed), minutes(d.observed), ratio(n.observed, d.observed))
	fmt.Printf("%-52s %14d %14d\n", "most nodes cordoned at once", n.most, d.most)
	fmt.Printf("%-52s %14d %14d\n", "most cordons of one node", n.cordons, d.cordons)
	fmt.Printf("%-52s %14d %14d\n", "domains Done whole (status.domains)", n.domains, d.domains)
	fmt.Println(verdict(n, d))
	fmt.Printf("(the comparison took %s, its pool's nodes and controller start included)\n", took.Round(time.Second))
	path := os.Getenv("BENCH_FIGURES")
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	size := fmt.Sprintf("%dx%d", c.domains, c.perDomain)
	for _, l := range [][2]any{{"rollout.node-wall", n.wall.Seconds()}, {"rollout.domain-wall", d.wall.Seconds()},
		{"rollout.node-unavailable", n.status.Minutes()}, {"rollout.domain-unavailable", d.status.Minutes()},
		{"rollout.node-observed", n.observed.Minutes()}, {"rollout.domain-observed", d.observed.Minutes()}} {
		if _, err := fmt.Fprintf(f, "%s %s %.4f\n", size, l[0], l[1]); err != nil {
			return err
		}
	}
	return f.Close()
}

// verdict says which strategy is better: lower on both figures, or which figure each
// wins.
func verdict(n, d domainRun) string {
	switch {
	case d.wall < n.wall && d.status < n.status:
		return "better: by domain (lower wall time and domain-unavailable time)"
	case d.wall >= n.wall && d.status >= n.status:
		return "better: node by node (by domain is lower on neither)"
	case d.status < n.status:
		return "by domain: lower domain-unavailable time, node by node: lower wall time"
	default:
		return "node by node: lower domain-unavailable time, by domain: lower wall time"
	}
}
