package realnode

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	domainPool   = "rn-dom"
	domainLabel  = "e2e.runwhere.ai/superpod"
	domainTarget = "1.2.5"
)

// testRolloutByDomain: a rollout by domain (maxUnavailableDomains 1) of a pool of two
// domains, the real node one member of the first beside two kwok nodes, the second
// two kwok nodes. The plugin drives it (litepool was uninstalled before); the real
// node's installer Job runs as a real container on the real kubelet, the kwok
// members' installers are played by the driver agent, and the real node's driver
// reports once the rollout has validated its kwok peers. Each domain goes out whole and once, never both at
// once, and comes back whole: no member is uncordoned while a member of its domain has
// not reported the target driver, so the kwok members wait, cordoned, for the real one.
func testRolloutByDomain(t *testing.T) {
	c := framework.C
	restoreCRDsAndNamespace(t)
	clearRealNode(t)
	_, err := poolclient.New(c.Dynamic).Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: domainPool},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeDevelopment, MinNodes: 1, Description: "the real node beside kwok nodes, by domain",
			Topology: &v1alpha1.TopologySpec{Levels: []string{domainLabel}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// sp-1: the real node and rn-dom-1, rn-dom-2; sp-2: rn-dom-3, rn-dom-4.
	domainOf := map[string]string{node: "sp-1"}
	for i := 1; i <= 4; i++ {
		name := fmt.Sprintf("%s-%d", domainPool, i)
		framework.CreateReadyNode(t, c.Kube, name, domainPool)
		domainOf[name] = fmt.Sprintf("sp-%d", (i+1)/2)
	}
	restore := joinDomainPool(t)
	defer restore()
	for n, d := range domainOf {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, domainLabel, d)
		_, err := c.Kube.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	framework.WaitInService(t, c.Kube, keys(domainOf)...)

	agent := framework.StartDriverAgent(time.Second)
	defer agent.Stop()
	agent.Leave(node) // its kubelet runs its installer
	w := watchDomains(t, domainOf)
	defer w.stop()
	// The real node's driver reports last in its domain, once the rollout has validated
	// its kwok peers: they must then wait for it, cordoned.
	ctl, err := client.New(c.Config, client.Options{Scheme: kit.Scheme})
	require.NoError(t, err)
	stopDiscovery := playFeatureDiscoveryWhen(t, node, func() bool { return validated(ctl, domainPool+"-1", domainPool+"-2") })
	defer stopDiscovery()

	res := c.Litepool(t, "upgrade", "driver", "--pool", domainPool, "--version", domainTarget, "--installer-image", installerOK,
		"--max-unavailable-domains", "1", "--wait-timeout", "0", "--install-timeout", "3m", "--validate-timeout", "1m",
		"--force", "--yes", "--controller-timeout", "2s")
	require.Equal(t, 0, res.ExitCode, "stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	ro := domainRollout(t)
	require.Equal(t, v1alpha1.RolloutSucceeded, ro.Status.Phase, ro.Status.Message)
	t.Logf("rollout by domain over the real node and 4 kwok nodes: wall %s, domain-unavailable %ds",
		ro.Status.CompletionTime.Sub(ro.Status.StartTime.Time), ro.Status.DomainUnavailableSeconds)

	// The real node's installer ran in containerd and its driver is what it installed.
	pod := onlyPod(t, upgrade.LabelComponent+"="+upgrade.Component+",batch.kubernetes.io/job-name in ("+jobsOn(t, node)+")")
	assert.Equal(t, corev1.PodSucceeded, pod.Status.Phase)
	assertExited(t, pod, 0)
	assert.Equal(t, domainTarget, framework.Node(t, node).Labels[policy.LabelDriverVersion], "what the installer container left on the host")
	assert.Zero(t, agent.InstallerPods(node), "the agent left the real node's installer alone")

	// The cluster's account, from the watch: each domain out whole and once, one at a
	// time, and back only once all of it reported the target.
	w.wait(t)
	most, together, cordons, early := w.snapshot()
	order := w.order()
	t.Logf("the nodes reported %s in this order: %v", domainTarget, order)
	require.Len(t, order, len(domainOf))
	assert.Greater(t, slices.Index(order, node), max(slices.Index(order, domainPool+"-1"), slices.Index(order, domainPool+"-2")),
		"the real node reports after its kwok peers")
	assert.Equal(t, map[string]int{"sp-1": 3, "sp-2": 2}, most, "each domain out whole")
	assert.Equal(t, 1, together, "never two domains out at once")
	assert.Empty(t, early, "a member uncordoned while a member of its domain had not reported the target")
	for n := range domainOf {
		assert.Equal(t, 1, cordons[n], "cordons of %s", n)
		got := framework.Node(t, n)
		assert.False(t, got.Spec.Unschedulable, "%s left cordoned", n)
		assert.Equal(t, domainTarget, policy.DriverVersion(got), n)
	}
	require.Len(t, ro.Status.Domains, 2)
	for _, d := range ro.Status.Domains {
		assert.Equal(t, policy.RolloutDomainDone, d.State, d.Name)
	}
	assert.Positive(t, ro.Status.DomainUnavailableSeconds)
}

// clearRealNode removes what the steps before left on the real node: their rollouts
// (a failed one still holds it, rule U4) and installer Jobs, the cordon of the failed
// upgrade and the health label of the failed stress run.
func clearRealNode(t *testing.T) {
	t.Helper()
	c := framework.C
	res := c.Kubectl(t, "", "delete", "driverrollouts.runwhere.ai", "--all", "--wait=true", "--timeout=60s")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	res = c.Kubectl(t, "", "delete", "jobs", "-n", system, "-l", upgrade.LabelComponent+"="+upgrade.Component,
		"--cascade=foreground", "--wait=true", "--timeout=60s")
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	clean := `{"metadata":{"labels":{"` + policy.LabelHealth + `":null},"annotations":{"` + policy.AnnotationUpgradeState + `":null,"` +
		policy.AnnotationUpgradeMessage + `":null}},"spec":{"unschedulable":null}}`
	_, err := c.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(clean), metav1.PatchOptions{})
	require.NoError(t, err)
}

// joinDomainPool moves the real node into the domain pool; restore puts its pool label
// back, removes the domain label, the rollout, its Jobs and the kwok nodes.
func joinDomainPool(t *testing.T) (restore func()) {
	t.Helper()
	kube := framework.C.Kube
	before := framework.Node(t, node).Labels[policy.LabelPool]
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, policy.LabelPool, domainPool)
	_, err := kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
	return func() {
		back := "null"
		if before != "" {
			back = fmt.Sprintf("%q", before)
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s,%q:null}}}`, policy.LabelPool, back, domainLabel)
		if _, err := kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Errorf("giving the real node back to its pool: %v", err)
		}
		res := framework.C.Kubectl(t, "", "delete", "driverrollouts.runwhere.ai", "--all", "--wait=true", "--timeout=60s")
		if res.ExitCode != 0 {
			t.Errorf("deleting the rollouts: %s", res.Stderr)
		}
		res = framework.C.Kubectl(t, "", "delete", "jobs", "-n", system, "-l", upgrade.LabelComponent+"="+upgrade.Component,
			"--cascade=foreground", "--wait=true", "--timeout=60s")
		if res.ExitCode != 0 {
			t.Errorf("deleting the installer Jobs: %s", res.Stderr)
		}
		for i := 1; i <= 4; i++ {
			err := kube.CoreV1().Nodes().Delete(ctx, fmt.Sprintf("%s-%d", domainPool, i), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting the kwok nodes: %v", err)
			}
		}
	}
}

func domainRollout(t *testing.T) *v1alpha1.DriverRollout {
	t.Helper()
	ctl, err := client.New(framework.C.Config, client.Options{Scheme: kit.Scheme})
	require.NoError(t, err)
	var list v1alpha1.DriverRolloutList
	require.NoError(t, ctl.List(ctx, &list))
	var found *v1alpha1.DriverRollout
	for i := range list.Items {
		if list.Items[i].Spec.Pool == domainPool {
			require.Nil(t, found, "one rollout of %s", domainPool)
			found = &list.Items[i]
		}
	}
	require.NotNil(t, found, "no rollout of %s", domainPool)
	return found
}

// jobsOn names the installer Jobs placed on node.
func jobsOn(t *testing.T, node string) string {
	t.Helper()
	jobs, err := framework.C.Kube.BatchV1().Jobs(system).List(ctx, metav1.ListOptions{LabelSelector: upgrade.LabelComponent + "=" + upgrade.Component})
	require.NoError(t, err)
	var names []string
	for _, j := range jobs.Items {
		if j.Spec.Template.Spec.NodeName == node {
			names = append(names, j.Name)
		}
	}
	require.Len(t, names, 1, "installer Jobs on %s", node)
	return names[0]
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// domainWatch follows the pool's nodes in the API server's order and records what a
// gang scheduler would see of the domains: the most members of each out at once, the
// most domains out at once, each node's cordons, and the uncordons of a member while
// another member of its domain had not yet reported the target driver.
type domainWatch struct {
	mu       sync.Mutex
	domainOf map[string]string
	cordoned map[string]bool
	driver   map[string]string
	most     map[string]int
	together int
	cordons  map[string]int
	early    []string
	reported []string // the nodes in the order they reported the target driver
	stop     func()
	done     chan struct{}
}

func watchDomains(t *testing.T, domainOf map[string]string) *domainWatch {
	t.Helper()
	kube := framework.C.Kube
	sel := metav1.ListOptions{LabelSelector: domainLabel}
	list, err := kube.CoreV1().Nodes().List(ctx, sel)
	require.NoError(t, err)
	w := &domainWatch{domainOf: domainOf, cordoned: map[string]bool{}, driver: map[string]string{}, most: map[string]int{},
		cordons: map[string]int{}, done: make(chan struct{})}
	for i := range list.Items {
		w.update(&list.Items[i])
	}
	wctx, cancel := context.WithCancel(ctx)
	sel.ResourceVersion = list.ResourceVersion
	wi, err := kube.CoreV1().Nodes().Watch(wctx, sel)
	require.NoError(t, err, "watching the pool's nodes")
	w.stop = func() { cancel(); <-w.done }
	go func() {
		defer close(w.done)
		for ev := range wi.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				w.update(n)
			}
		}
	}()
	return w
}

func (w *domainWatch) update(n *corev1.Node) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d, ok := w.domainOf[n.Name]
	if !ok {
		return
	}
	if v := policy.DriverVersion(n); v != w.driver[n.Name] {
		w.driver[n.Name] = v
		if v == domainTarget {
			w.reported = append(w.reported, n.Name)
		}
	}
	was := w.cordoned[n.Name]
	w.cordoned[n.Name] = n.Spec.Unschedulable
	switch {
	case n.Spec.Unschedulable && !was:
		w.cordons[n.Name]++
	case !n.Spec.Unschedulable && was:
		for peer, pd := range w.domainOf {
			if pd == d && w.driver[peer] != domainTarget {
				w.early = append(w.early, fmt.Sprintf("%s uncordoned while %s reported driver %q", n.Name, peer, w.driver[peer]))
			}
		}
	}
	out := map[string]int{}
	for name, c := range w.cordoned {
		if c {
			out[w.domainOf[name]]++
		}
	}
	for dom, k := range out {
		w.most[dom] = max(w.most[dom], k)
	}
	w.together = max(w.together, len(out))
}

// wait lets the watch catch up with the end of the rollout: every node back.
func (w *domainWatch) wait(t *testing.T) {
	t.Helper()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		for n := range w.domainOf {
			if w.cordoned[n] || w.driver[n] != domainTarget {
				return false, nil
			}
		}
		return true, nil
	}), "the watch did not see every node back at %s", domainTarget)
}

func (w *domainWatch) snapshot() (most map[string]int, together int, cordons map[string]int, early []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	most, cordons = map[string]int{}, map[string]int{}
	for k, v := range w.most {
		most[k] = v
	}
	for k, v := range w.cordons {
		cordons[k] = v
	}
	return most, w.together, cordons, append([]string(nil), w.early...)
}

// order is the nodes in the order they reported the target driver.
func (w *domainWatch) order() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.reported...)
}

// validated says whether the domain pool's rollout has validated every one of nodes:
// each is at its uncordon or done.
func validated(ctl client.Client, nodes ...string) bool {
	var list v1alpha1.DriverRolloutList
	if err := ctl.List(ctx, &list); err != nil {
		return false
	}
	for _, ro := range list.Items {
		if ro.Spec.Pool != domainPool {
			continue
		}
		n := 0
		for _, s := range ro.Status.Nodes {
			if slices.Contains(nodes, s.Name) && (s.State == string(policy.UpgradeUncordon) || s.State == string(policy.UpgradeDone)) {
				n++
			}
		}
		return n == len(nodes)
	}
	return false
}
