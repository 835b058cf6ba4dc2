package attack

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
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

// Rows of issue 41: writers of node labels and of pools/status against a rollout by
// domain. The strategy: at most maxUnavailableDomains (1) of the domains fixed at the
// rollout's start out at once, and never fewer than the pool's minNodes available.

const rollMinNodes = 4 // of 6: one super node of 2 out leaves 4

// outWatch follows a pool's nodes while its rollout runs: the most super nodes (as
// fixed at the start) with a member out at once, and the fewest members available.
type outWatch struct {
	mu         sync.Mutex
	mostOut    int
	fewestUp   int
	outAtMost  []string
	stop       func()
	domainOf   map[string]string
	memberList []string
}

func watchOut(t *testing.T, domainOf map[string]string) *outWatch {
	w := &outWatch{fewestUp: len(domainOf), domainOf: domainOf}
	for n := range domainOf {
		w.memberList = append(w.memberList, n)
	}
	c, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c.Err() == nil {
			w.look(c)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	w.stop = func() { cancel(); <-done }
	t.Cleanup(w.stop)
	return w
}

// look reads every member from one list, a snapshot at one revision: a Get per member
// spans the rollout's moves, and a member read before its super node came back beside
// one read after the next went out looked like two super nodes out at once.
func (w *outWatch) look(c context.Context) {
	list, err := framework.C.Kube.CoreV1().Nodes().List(c, metav1.ListOptions{})
	if err != nil {
		return
	}
	byName := map[string]*corev1.Node{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	out, up := map[string]bool{}, 0
	for _, name := range w.memberList {
		n, ok := byName[name]
		if !ok {
			return
		}
		if n.Spec.Unschedulable {
			out[w.domainOf[name]] = true
		} else if policy.IsNodeReady(n) {
			up++
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(out) > w.mostOut {
		w.mostOut = len(out)
		w.outAtMost = sortedSet(out)
	}
	w.fewestUp = min(w.fewestUp, up)
}

func sortedSet(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// superPodPool makes a pool of 3 super nodes × 2 (Ascend preset, minNodes rollMinNodes),
// its members in service; it returns the members and each one's super node.
func superPodPool(t *testing.T, pool string) ([]string, map[string]string) {
	t.Helper()
	nodes := framework.AscendPool(t, pool, 6, "23.0.6", v1alpha1.SoftwareSpec{})
	domainOf := map[string]string{}
	for i, n := range nodes {
		domainOf[n] = fmt.Sprintf("sp-%d", i/2+1)
		_, err := framework.C.Kube.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"`+superPod+`":"`+domainOf[n]+`"}}}`), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	framework.WaitInService(t, framework.C.Kube, nodes...)
	pools := poolclient.New(framework.C.Dynamic)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pools.Get(ctx, pool)
		if err != nil {
			return err
		}
		p.Spec.MinNodes, p.Spec.Topology = rollMinNodes, &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend}
		_, err = pools.Update(ctx, p, metav1.UpdateOptions{})
		return err
	}))
	return nodes, domainOf
}

// superPodRollout makes a pool of 3 super nodes × 2 (Ascend preset, minNodes 4) and
// starts a rollout by domain of it (installs of 2 s); it returns each node's super
// node and waits until the first super node is in progress.
func superPodRollout(t *testing.T, pool string) (map[string]string, *v1alpha1.DriverRollout, client.Client) {
	t.Helper()
	_, domainOf := superPodPool(t, pool)
	agent := framework.StartDriverAgent(2 * time.Second)
	t.Cleanup(agent.Stop)
	c, err := client.New(framework.C.Config, client.Options{Scheme: kit.Scheme})
	require.NoError(t, err)
	ro := &v1alpha1.DriverRollout{ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec: v1alpha1.DriverRolloutSpec{Pool: pool, Version: "24.1.0.3", MaxUnavailableDomains: ptr.To[int32](1),
			Installer: v1alpha1.DriverInstaller{Image: "registry.example.com/ascend-installer:24.1.0.3"}}}
	// The webhook judges U6 from its cache, which sees the pool's topology a moment
	// after the update above: ask again until it does.
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(cc context.Context) (bool, error) {
		err := c.Create(cc, ro)
		if err != nil && strings.Contains(err.Error(), "has none (no spec.topology)") {
			return false, nil
		}
		return err == nil, err
	}))
	t.Cleanup(func() { _ = c.Delete(context.Background(), ro) })
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(cc context.Context) (bool, error) {
		if err := c.Get(cc, client.ObjectKeyFromObject(ro), ro); err != nil {
			return false, err
		}
		for _, d := range ro.Status.Domains {
			if d.State == policy.RolloutDomainInProgress {
				return true, nil
			}
		}
		return false, nil
	}), "no super node went out: %s", ro.Status.Message)
	return domainOf, ro, c
}

// endRollout waits for the rollout to end and checks the strategy held throughout.
func endRollout(t *testing.T, c client.Client, ro *v1alpha1.DriverRollout, w *outWatch) {
	t.Helper()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(cc context.Context) (bool, error) {
		if err := c.Get(cc, client.ObjectKeyFromObject(ro), ro); err != nil {
			return false, err
		}
		return !upgrade.Active(ro), nil
	}), "the rollout did not end: %s", ro.Status.Message)
	w.stop()
	assert.Equal(t, v1alpha1.RolloutSucceeded, ro.Status.Phase, ro.Status.Message)
	assert.Equal(t, 1, w.mostOut, "at most maxUnavailableDomains 1 of the super nodes fixed at the start out at once (most: %v)", w.outAtMost)
	assert.GreaterOrEqual(t, w.fewestUp, rollMinNodes, "never fewer than minNodes available")
	assert.Len(t, ro.Status.Domains, 3, "the domains the rollout started with")
}

// attackRelabelDomainsMidRollout: the node labeller puts every member into one super
// node while the first is out, then each member into a super node of its own. Both
// are admitted (the labels are their agents'); the rollout keeps the domains it fixed.
func attackRelabelDomainsMidRollout(t *testing.T) {
	domainOf, ro, c := superPodRollout(t, "at-roll-lbl")
	w := watchOut(t, domainOf)
	labeller := as(t, nodePatcher)
	relabel := func(value func(node string) string) {
		for n := range domainOf {
			_, err := labeller.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"`+superPod+`":"`+value(n)+`"}}}`), metav1.PatchOptions{})
			require.NoError(t, err, "topology labels are their agents': never refused (%s)", n)
		}
	}
	relabel(func(string) string { return "sp-all" })
	time.Sleep(3 * time.Second) // a few passes of the rollout under the merged labels
	relabel(func(n string) string { return "sp-" + n })
	endRollout(t, c, ro, w)
}

// attackRewritePoolStatusMidRollout: the pools/status writer rewrites the pool's
// counts and topology summary (all healthy, many domains) while the first super node
// is out. The rollout reads its floor from the spec and its domains from its own
// status: nothing changes.
func attackRewritePoolStatusMidRollout(t *testing.T) {
	domainOf, ro, c := superPodRollout(t, "at-roll-st")
	w := watchOut(t, domainOf)
	dyn, err := dynamic.NewForConfig(asConfig(poolStatus))
	require.NoError(t, err)
	body, err := json.Marshal(map[string]any{"status": map[string]any{"nodeCount": 60, "healthyNodes": 60, "faultyNodes": 0,
		"topology": map[string]any{"domains": 30}}})
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		_, err = dyn.Resource(v1alpha1.PoolResource).Patch(ctx, "at-roll-st", types.MergePatchType, body, metav1.PatchOptions{}, "status")
		require.NoError(t, err, "pools/status: the right gives the write")
		time.Sleep(time.Second)
	}
	endRollout(t, c, ro, w)
}
