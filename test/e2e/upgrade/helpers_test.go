package upgrade

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	driverLabel  = "huawei.com/driver.version"
	waitInterval = 200 * time.Millisecond
	waitTimeout  = 60 * time.Second
)

// makePool creates a Pool object and n Ready Snt9B nodes named POOL-1..n at driver.
func makePool(t *testing.T, name string, n int, driver string, software v1alpha1.SoftwareSpec) []string {
	t.Helper()
	ctx := context.Background()
	pools := poolclient.New(framework.C.Dynamic)
	_, err := pools.Create(ctx, &v1alpha1.Pool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1, Software: software,
			Accelerator: v1alpha1.AcceleratorSpec{Type: "Snt9B", ResourceName: "huawei.com/Ascend910"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	var names []string
	for i := 1; i <= n; i++ {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        fmt.Sprintf("%s-%d", name, i),
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
				Labels: map[string]string{"type": "kwok", driverLabel: driver, policy.LabelGPUType: "Snt9B",
					policy.LabelPool: name, "kubernetes.io/hostname": fmt.Sprintf("%s-%d", name, i)},
			},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{"cpu": resource.MustParse("192"), "memory": resource.MustParse("1Ti"), "pods": resource.MustParse("110"), "huawei.com/Ascend910": resource.MustParse("8")},
				Capacity:    corev1.ResourceList{"cpu": resource.MustParse("192"), "memory": resource.MustParse("1Ti"), "pods": resource.MustParse("110"), "huawei.com/Ascend910": resource.MustParse("8")},
			},
		}
		_, err := framework.C.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		require.NoError(t, err)
		names = append(names, node.Name)
	}
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := framework.C.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: policy.LabelPool + "=" + name})
		if err != nil {
			return false, err
		}
		ready := 0
		for i := range list.Items {
			if policy.IsNodeReady(&list.Items[i]) {
				ready++
			}
		}
		return ready == n, nil
	}), "nodes of %s did not go Ready", name)
	return names
}

func node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := framework.C.Kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return n
}

func state(t *testing.T, name string) string {
	return node(t, name).Annotations[policy.AnnotationUpgradeState]
}

// agent plays the driver. Once an installer pod's node delay has passed, it marks the
// pod Succeeded through the status subresource if kwok (whose pod-complete stage
// completes Job pods) has not already, then sets the node's driver label to the pod's
// DRIVER_VERSION, except on nodes told noLabel, whose installer "succeeds" without the
// driver ever reporting the new version. One agent
// serves every test of the package (tests configure their own nodes).
type fakeAgent struct {
	mu      sync.Mutex
	delay   map[string]time.Duration
	noLabel map[string]bool
	pods    map[string]int // installer pods seen per node
	seen    map[string]time.Time
	handled map[string]bool
}

var (
	agentOnce sync.Once
	agent     = &fakeAgent{delay: map[string]time.Duration{}, noLabel: map[string]bool{}, pods: map[string]int{}, seen: map[string]time.Time{}, handled: map[string]bool{}}
)

// startAgent starts the agent (once) and configures nodes: installs take delay on them,
// and with noLabel the driver label never changes.
func startAgent(delay time.Duration, noLabel bool, nodes ...string) *fakeAgent {
	agentOnce.Do(func() {
		go func() {
			for {
				agent.tick(context.Background())
				time.Sleep(100 * time.Millisecond)
			}
		}()
	})
	agent.mu.Lock()
	defer agent.mu.Unlock()
	for _, n := range nodes {
		agent.delay[n] = delay
		agent.noLabel[n] = noLabel
	}
	return agent
}

func (a *fakeAgent) tick(ctx context.Context) {
	kube := framework.C.Kube
	pods, err := kube.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=driver-installer"})
	if err != nil {
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" {
			continue
		}
		a.mu.Lock()
		first, ok := a.seen[p.Name]
		if !ok {
			a.seen[p.Name], first = time.Now(), time.Now()
			a.pods[p.Spec.NodeName]++
		}
		delay, noLabel, handled := a.delay[p.Spec.NodeName], a.noLabel[p.Spec.NodeName], a.handled[p.Name]
		a.mu.Unlock()
		if handled || time.Since(first) < delay {
			continue
		}
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			// kwok completes Job pods by itself (its pod-complete stage); this covers
			// a pod it has not completed yet.
			now := metav1.Now()
			p.Status.Phase = corev1.PodSucceeded
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "installer", Image: p.Spec.Containers[0].Image,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}}}}
			if _, err := kube.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				continue
			}
		}
		if !noLabel {
			version := ""
			for _, e := range p.Spec.Containers[0].Env {
				if e.Name == "DRIVER_VERSION" {
					version = e.Value
				}
			}
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, driverLabel, version)
			if _, err := kube.CoreV1().Nodes().Patch(ctx, p.Spec.NodeName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				continue
			}
		}
		a.mu.Lock()
		a.handled[p.Name] = true
		a.mu.Unlock()
	}
}

func (a *fakeAgent) installerPods(node string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pods[node]
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
	list, err := framework.C.Kube.BatchV1().Jobs("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=driver-installer"})
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
