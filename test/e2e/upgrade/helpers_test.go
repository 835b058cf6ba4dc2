package upgrade

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	waitInterval = 200 * time.Millisecond
	waitTimeout  = 60 * time.Second
)

// agent plays the driver for every test of the package (tests configure their own
// nodes).
var (
	agentOnce sync.Once
	agent     *framework.DriverAgent
)

// startAgent starts the agent (once) and configures nodes: installs take delay on them,
// and with noLabel the driver label never changes.
func startAgent(delay time.Duration, noLabel bool, nodes ...string) *framework.DriverAgent {
	agentOnce.Do(func() {
		agent = framework.StartDriverAgent(0)
		// Installer Jobs run in litepool's own namespace, which an install of litepool
		// makes; these tests run the plugin alone.
		if err := localwebhook.EnsureNamespace(context.Background(), framework.C.Kube, localwebhook.Namespace); err != nil {
			panic(err)
		}
	})
	agent.Configure(delay, noLabel, nodes...)
	return agent
}

// unschedulableWatch records, from a watch on the pool's nodes, the most nodes that
// were unschedulable at once and how often each node went from schedulable to
// cordoned: the cluster's own account, not the plugin's.
type unschedulableWatch struct {
	mu       sync.Mutex
	now      map[string]bool
	max      int
	cordons  map[string]int
	maxNames []string
}

func watchUnschedulable(t *testing.T, pool string) *unschedulableWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sel := labels.Set{policy.LabelPool: pool}.String()
	list, err := framework.C.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel})
	require.NoError(t, err)
	w := &unschedulableWatch{now: map[string]bool{}, cordons: map[string]int{}}
	for i := range list.Items {
		w.update(&list.Items[i])
	}
	wi, err := framework.C.Kube.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range wi.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && ev.Type != watch.Error {
				w.update(n)
			}
		}
	}()
	t.Cleanup(func() { cancel(); wi.Stop(); <-done })
	return w
}

func (w *unschedulableWatch) update(n *corev1.Node) {
	w.mu.Lock()
	defer w.mu.Unlock()
	was, known := w.now[n.Name]
	if known && !was && n.Spec.Unschedulable {
		w.cordons[n.Name]++
	}
	w.now[n.Name] = n.Spec.Unschedulable
	count := 0
	var names []string
	for name, u := range w.now {
		if u {
			count++
			names = append(names, name)
		}
	}
	if count > w.max {
		w.max, w.maxNames = count, names
	}
}

func (w *unschedulableWatch) snapshot() (int, map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := map[string]int{}
	for k, v := range w.cordons {
		c[k] = v
	}
	return w.max, c
}

func eventsFor(t *testing.T, node, reason string) int {
	t.Helper()
	list, err := framework.C.Kube.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node + ",reason=" + reason,
	})
	require.NoError(t, err)
	return len(list.Items)
}

func jobsFor(t *testing.T, nodes []string) int {
	t.Helper()
	list, err := framework.C.Kube.BatchV1().Jobs(localwebhook.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=driver-installer"})
	require.NoError(t, err)
	want := map[string]bool{}
	for _, n := range nodes {
		want[n] = true
	}
	count := 0
	for _, j := range list.Items {
		if want[j.Annotations["litepool.runwhere.ai/node"]] {
			count++
		}
	}
	return count
}

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

func configMap(name, matrix string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string]string{"compat-matrix.yaml": matrix}}
}

// rolloutOf is the newest DriverRollout of a pool, or of nodes of the pool.
func rolloutOf(t *testing.T, pool string) *v1alpha1.DriverRollout {
	t.Helper()
	c, err := client.New(framework.C.Config, client.Options{Scheme: kit.Scheme})
	require.NoError(t, err)
	var list v1alpha1.DriverRolloutList
	require.NoError(t, c.List(context.Background(), &list))
	var out *v1alpha1.DriverRollout
	for i := range list.Items {
		if ro := &list.Items[i]; (ro.Spec.Pool == pool || len(ro.Spec.Nodes) > 0 && strings.HasPrefix(ro.Spec.Nodes[0], pool+"-")) && (out == nil || !ro.CreationTimestamp.Before(&out.CreationTimestamp)) {
			out = ro
		}
	}
	require.NotNil(t, out, "no DriverRollout of pool %s", pool)
	return out
}

// eventMessages are the messages of a node's events of one reason.
func eventMessages(t *testing.T, node, reason string) []string {
	t.Helper()
	list, err := framework.C.Kube.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node + ",reason=" + reason,
	})
	require.NoError(t, err)
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Message)
	}
	return out
}

// noController is what the plugin says when it drives a rollout itself.
const noController = "no litepool controller acted on it within 10s: this command drives it, with the controller's reconciler"
