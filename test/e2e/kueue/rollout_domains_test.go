package kueue

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	oldDriver = "23.0.6"
	newDriver = "24.1.0.3"
)

// playedKubelet plays the kubelet of nodes kwok does not manage (kwok completes a Job's
// pods the moment they run; a training gang must run until it is evicted): it keeps
// the nodes' Ready heartbeat, starts the pods bound to them and never ends them, and
// removes a pod once it is terminating (an eviction), as a kubelet does after its
// grace period.
type playedKubelet struct {
	nodes map[string]bool
	stop  func()
}

func startPlayedKubelet(t *testing.T, namespace string, nodes []string) *playedKubelet {
	k := &playedKubelet{nodes: map[string]bool{}}
	for _, n := range nodes {
		k.nodes[n] = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			for _, n := range nodes {
				heartbeat(ctx, n)
			}
			sleep(ctx, 5*time.Second)
		}
	}()
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			k.playPods(ctx, namespace)
			sleep(ctx, 100*time.Millisecond)
		}
	}()
	k.stop = func() { cancel(); wg.Wait() }
	t.Cleanup(k.stop)
	return k
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func heartbeat(ctx context.Context, name string) {
	_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := framework.C.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: now, LastTransitionTime: now}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready.LastTransitionTime = c.LastTransitionTime
			}
		}
		n.Status.Conditions = []corev1.NodeCondition{ready}
		_, err = framework.C.Kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

func (k *playedKubelet) playPods(ctx context.Context, namespace string) {
	pods, err := framework.C.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		switch {
		case !k.nodes[p.Spec.NodeName]:
		case p.DeletionTimestamp != nil:
			_ = framework.C.Kube.CoreV1().Pods(namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		case p.Status.Phase == corev1.PodPending:
			now := metav1.Now()
			p.Status.Phase, p.Status.StartTime = corev1.PodRunning, &now
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now})
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
				Ready: true, Started: ptr.To(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
			_, _ = framework.C.Kube.CoreV1().Pods(namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		}
	}
}

// playedSuperNodePool is superNodePool with nodes the test's kubelet plays, at the old
// driver: an exclusive Kueue pool of domains super nodes × size nodes of 8 GPUs with
// the Ascend preset. It returns each node's super node and the node names.
func playedSuperNodePool(t *testing.T, name, namespace string, domains, size int) (map[string]string, []string) {
	t.Helper()
	ctx := context.Background()
	_, err := poolclient.New(framework.C.Dynamic).Create(ctx, &v1alpha1.Pool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, Exclusive: true, Namespaces: []string{namespace},
			Accelerator: v1alpha1.AcceleratorSpec{ResourceName: gpu},
			Topology:    &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend},
			Queue:       &v1alpha1.QueueSpec{Scheduler: v1alpha1.QueueKueue}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	res := corev1.ResourceList{"cpu": resource.MustParse("64"), "memory": resource.MustParse("512Gi"), "pods": resource.MustParse("110"), gpu: resource.MustParse("8")}
	domainOf := map[string]string{}
	var names []string
	for d := 1; d <= domains; d++ {
		for i := 1; i <= size; i++ {
			node := fmt.Sprintf("%s-sp%d-%d", name, d, i)
			sp := fmt.Sprintf("superpod-%d", d)
			_, err := framework.C.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node,
				Labels: map[string]string{corev1.LabelHostname: node, corev1.LabelOSStable: "linux", policy.LabelPool: name,
					superPod: sp, "huawei.com/topotree.rackid": fmt.Sprintf("rack-%d-%d", d, (i+1)/2), framework.DriverLabel: oldDriver}}},
				metav1.CreateOptions{})
			require.NoError(t, err)
			require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
				n := framework.Node(t, node)
				n.Status.Allocatable, n.Status.Capacity = res, res
				_, err := framework.C.Kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
				return err
			}))
			heartbeat(ctx, node)
			domainOf[node] = sp
			names = append(names, node)
		}
	}
	return domainOf, names
}

// gangLog follows the Jobs' pods: every pod made (a gang evicted once is made twice),
// and, when a pod is first seen bound, whether its super node's members then carried
// one driver or a mix (a domain the rollout holds half-done).
type gangLog struct {
	mu      sync.Mutex
	made    map[string]map[types.UID]bool // job -> pods
	bound   map[types.UID]bool
	mixed   []string
	domains map[string]map[string]bool // job -> super nodes its pods were bound in
	killed  []string                   // pods Kueue's TAS node controller failed
}

func followGangs(t *testing.T, namespace string, domainOf map[string]string, jobs ...string) *gangLog {
	g := &gangLog{made: map[string]map[types.UID]bool{}, bound: map[types.UID]bool{}, domains: map[string]map[string]bool{}}
	for _, j := range jobs {
		g.made[j], g.domains[j] = map[types.UID]bool{}, map[string]bool{}
	}
	members := map[string][]string{}
	for n, d := range domainOf {
		members[d] = append(members[d], n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			for _, j := range jobs {
				pods, err := framework.C.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + j})
				if err != nil {
					continue
				}
				for _, p := range pods.Items {
					g.seen(ctx, j, &p, domainOf, members)
				}
			}
			sleep(ctx, 100*time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return g
}

func (g *gangLog) seen(ctx context.Context, job string, p *corev1.Pod, domainOf map[string]string, members map[string][]string) {
	g.mu.Lock()
	if !g.made[job][p.UID] && terminatedByKueue(p) {
		g.killed = append(g.killed, fmt.Sprintf("%s (on %q, selector %q)", p.Name, p.Spec.NodeName, p.Spec.NodeSelector[corev1.LabelHostname]))
	}
	g.made[job][p.UID] = true
	first := p.Spec.NodeName != "" && !g.bound[p.UID]
	if first {
		g.bound[p.UID] = true
	}
	g.mu.Unlock()
	if !first {
		return
	}
	d := domainOf[p.Spec.NodeName]
	drivers := map[string]bool{}
	for _, m := range members[d] {
		if n, err := framework.C.Kube.CoreV1().Nodes().Get(ctx, m, metav1.GetOptions{}); err == nil {
			drivers[n.Labels[framework.DriverLabel]] = true
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.domains[job][d] = true
	if len(drivers) > 1 {
		g.mixed = append(g.mixed, fmt.Sprintf("%s's pod %s bound to %s while %s carried drivers %v", job, p.Name, p.Spec.NodeName, d, drivers))
	}
}

// terminatedByKueue: Kueue's TAS node controller failed the pod, judging its node
// unfit for it (TASReplaceNodeOnNodeTaints: a taint the Workload's template does not
// tolerate).
func terminatedByKueue(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == "TerminatedByKueue" && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// evictions is how many times Kueue evicted the Job's Workload, by reason (its
// status.schedulingStats), and their sum.
func evictions(t *testing.T, namespace, job string) (map[string]int64, int64) {
	t.Helper()
	wl := workloadOf(t, namespace, job)
	if wl == nil {
		return nil, 0
	}
	byReason, sum := map[string]int64{}, int64(0)
	evs, _, _ := unstructured.NestedSlice(wl.Object, "status", "schedulingStats", "evictions")
	for _, e := range evs {
		m, _ := e.(map[string]any)
		n, _, _ := unstructured.NestedInt64(m, "count")
		reason, _ := m["reason"].(string)
		byReason[reason] += n
		sum += n
	}
	return byReason, sum
}

func (g *gangLog) domainsOf(job string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for d := range g.domains[job] {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

func (g *gangLog) pods(job string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.made[job])
}

// TestTASJobDuringARolloutByDomain: a Kueue TAS Job requiring one super node runs on an
// exclusive pool of 4 super nodes × 4 (every member tainted with the pool's taint; the
// Jobs are written without its toleration, which jobs.runwhere.ai writes into their
// templates, where Kueue's TAS node controller looks for it) while the pool's driver is rolled out by domain
// (maxUnavailableDomains 1, installs of 1 s, wait-timeout 2 s). The rollout takes the
// idle super nodes first; a second such Job, queued while a super node is out, is
// placed in a whole one (Kueue's TAS counts no cordoned node); each Job is evicted at most once (its super node's drain,
// once the wait ran out; Kueue counts it in the Workload's schedulingStats), no pod is
// failed by Kueue's TAS node controller, its pods are only ever bound in a super node whose members
// all carry one driver (never one the rollout holds half-done), and both run at the end.
func TestTASJobDuringARolloutByDomain(t *testing.T) {
	const pool, ns = "qtas-roll", "q-tas-roll"
	ctx := context.Background()
	createNamespace(t, ns, nil)
	domainOf, nodes := playedSuperNodePool(t, pool, ns, 4, 4)
	startPlayedKubelet(t, ns, nodes)
	framework.WaitInService(t, framework.C.Kube, nodes...)
	waitQuota(t, pool, "128")
	agent := framework.StartDriverAgent(time.Second)
	t.Cleanup(agent.Stop)
	gangs := followGangs(t, ns, domainOf, "first", "second")

	createJob(t, tasJob(ns, "first", pool, 4, superPod))
	running := waitJobPodsRunning(t, ns, "first", 4)
	busy := domainOf[running[0].Spec.NodeName]

	c, err := client.New(framework.C.Config, client.Options{Scheme: kit.Scheme})
	require.NoError(t, err)
	ro := &v1alpha1.DriverRollout{ObjectMeta: metav1.ObjectMeta{Name: pool,
		Annotations: map[string]string{policy.AnnotationForce: "e2e: a fake driver for a fake GPU"}},
		Spec: v1alpha1.DriverRolloutSpec{Pool: pool, Version: newDriver, MaxUnavailableDomains: ptr.To[int32](1),
			WaitTimeout: &metav1.Duration{Duration: 2 * time.Second},
			Installer:   v1alpha1.DriverInstaller{Image: "registry.example.com/ascend-installer:" + newDriver}}}
	require.NoError(t, c.Create(ctx, ro))
	t.Cleanup(func() { _ = c.Delete(context.Background(), ro) })

	// The second Job is queued while the rollout holds a super node out.
	var out string
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ro), ro); err != nil {
			return false, err
		}
		for _, d := range ro.Status.Domains {
			if d.State == policy.RolloutDomainInProgress {
				out = d.Name
			}
		}
		return out != "", nil
	}), "no super node went out: %s", ro.Status.Message)
	assert.NotEqual(t, busy, out, "an idle super node goes first")
	createJob(t, tasJob(ns, "second", pool, 4, superPod))

	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, 4*time.Minute, true, func(context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ro), ro); err != nil {
			return false, err
		}
		return !upgrade.Active(ro), nil
	}), "the rollout did not end: %s", ro.Status.Message)
	require.Equal(t, v1alpha1.RolloutSucceeded, ro.Status.Phase, ro.Status.Message)
	for _, j := range []string{"first", "second"} {
		waitJobPodsRunning(t, ns, j, 4)
	}

	firstBy, firstEv := evictions(t, ns, "first")
	secondBy, secondEv := evictions(t, ns, "second")
	t.Logf("first ran in %s; the rollout took %s out while it ran; pods made: first %d (in %v), second %d (in %v); evictions: first %v, second %v; pods failed by Kueue: %v; wall %s, domain-unavailable %ds",
		busy, out, gangs.pods("first"), gangs.domainsOf("first"), gangs.pods("second"), gangs.domainsOf("second"),
		firstBy, secondBy, gangs.killed, ro.Status.CompletionTime.Sub(ro.Status.StartTime.Time), ro.Status.DomainUnavailableSeconds)
	assert.Equal(t, 8, gangs.pods("first"), "first is evicted once: its super node's drain, once the wait ran out")
	assert.LessOrEqual(t, gangs.pods("second"), 8, "second is evicted at most once")
	assert.LessOrEqual(t, firstEv, int64(1), "Kueue evicts first at most once: %v", firstBy)
	assert.LessOrEqual(t, secondEv, int64(1), "Kueue evicts second at most once: %v", secondBy)
	assert.Empty(t, gangs.killed, "Kueue fails no pod for a taint of the pool that its pods tolerate")
	assert.Empty(t, gangs.mixed, "no pod bound in a super node the rollout holds half-done")
	// Kueue evicts a TAS Workload whose node is cordoned when its domain has no
	// replacement (the whole super node is out) and admits it again in a whole one.
	assert.LessOrEqual(t, len(gangs.domainsOf("first")), 2, "first ran in its super node, then in one whole super node: %v", gangs.domainsOf("first"))
	for _, d := range ro.Status.Domains {
		assert.Equal(t, policy.RolloutDomainDone, d.State, d.Name)
	}
	for _, n := range nodes {
		assert.Equal(t, newDriver, framework.Node(t, n).Labels[framework.DriverLabel], n)
		assert.False(t, framework.Node(t, n).Spec.Unschedulable, n)
	}
}
