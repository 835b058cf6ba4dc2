package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
)

// DriverLabel is the driver version the Ascend device plugin reports on a node.
const DriverLabel = "huawei.com/driver.version"

// AscendPool creates a Pool object and n Ready Snt9B nodes NAME-1..n at driver, and
// returns the node names.
func AscendPool(t *testing.T, name string, n int, driver string, software v1alpha1.SoftwareSpec) []string {
	t.Helper()
	ctx := context.Background()
	_, err := poolclient.New(C.Dynamic).Create(ctx, &v1alpha1.Pool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1, Software: software,
			Accelerator: v1alpha1.AcceleratorSpec{Type: "Snt9B", ResourceName: "huawei.com/Ascend910"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	list := corev1.ResourceList{"cpu": resource.MustParse("192"), "memory": resource.MustParse("1Ti"),
		"pods": resource.MustParse("110"), "huawei.com/Ascend910": resource.MustParse("8")}
	var names []string
	for i := 1; i <= n; i++ {
		nodeName := fmt.Sprintf("%s-%d", name, i)
		_, err := C.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: nodeName, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
				Labels: map[string]string{"type": "kwok", DriverLabel: driver, policy.LabelGPUType: "Snt9B",
					policy.LabelPool: name, "kubernetes.io/hostname": nodeName}},
			Status: corev1.NodeStatus{Allocatable: list, Capacity: list},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		names = append(names, nodeName)
	}
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		for _, nn := range names {
			if !policy.IsNodeReady(Node(t, nn)) {
				return false, nil
			}
		}
		return true, nil
	}), "nodes of %s did not go Ready", name)
	return names
}

// Node reads a node.
func Node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := C.Kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return n
}

// UpgradeState is a node's driver-upgrade state annotation.
func UpgradeState(t *testing.T, name string) string {
	return Node(t, name).Annotations[policy.AnnotationUpgradeState]
}

// WaitUpgradeState waits for a node's upgrade-state annotation to read want. The
// in-cluster controller publishes a move on the node after the rollout's status that
// records it is stored, so a client that saw the status may read the node before that.
func WaitUpgradeState(t *testing.T, name, want string) {
	t.Helper()
	var got string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		got = UpgradeState(t, name)
		return got == want, nil
	})
	require.NoError(t, err, "node %s: upgrade state %q, want %q", name, got, want)
}

// DriverAgent plays the driver after an install. Once an installer pod has run for its
// node's delay, it marks the pod Succeeded through the status subresource if kwok
// (whose pod-complete stage completes Job pods) has not already, then sets the node's
// driver label to the pod's DRIVER_VERSION, except on nodes configured noLabel, whose
// installer "succeeds" without the driver ever reporting the new version.
type DriverAgent struct {
	mu           sync.Mutex
	defaultDelay time.Duration
	delay        map[string]time.Duration
	noLabel      map[string]bool
	left         map[string]bool // nodes whose own kubelet runs the installers
	pods         map[string]int  // installer pods seen per node
	seen         map[string]time.Time
	handled      map[string]bool
	installers   corelisters.PodLister // an informer's: a LIST every tick was most of e2e upgrade's pod reads
	stop         func()
}

// StartDriverAgent starts an agent; installs take defaultDelay on nodes not configured.
func StartDriverAgent(defaultDelay time.Duration) *DriverAgent {
	a := &DriverAgent{defaultDelay: defaultDelay, delay: map[string]time.Duration{}, noLabel: map[string]bool{}, left: map[string]bool{},
		pods: map[string]int{}, seen: map[string]time.Time{}, handled: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	// Installer pods run in litepool's namespace; every namespace is watched.
	informers := kubeinformers.NewSharedInformerFactoryWithOptions(C.Kube, 0, kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = upgrade.LabelComponent + "=" + upgrade.Component
	}))
	a.installers = informers.Core().V1().Pods().Lister()
	informers.Start(ctx.Done())
	informers.WaitForCacheSync(ctx.Done())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			a.tick(ctx)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	a.stop = func() { cancel(); wg.Wait(); informers.Shutdown() }
	return a
}

// Stop stops the agent and waits for it.
func (a *DriverAgent) Stop() { a.stop() }

// Configure sets how installs behave on nodes: they take delay, and with noLabel the
// driver label never changes.
func (a *DriverAgent) Configure(delay time.Duration, noLabel bool, nodes ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range nodes {
		a.delay[n] = delay
		a.noLabel[n] = noLabel
	}
}

// Leave makes the agent leave the installer pods of nodes alone: a real kubelet runs
// them, and what their containers exit with is the result.
func (a *DriverAgent) Leave(nodes ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range nodes {
		a.left[n] = true
	}
}

// InstallerPods counts the installer pods the agent saw on node.
func (a *DriverAgent) InstallerPods(node string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pods[node]
}

func (a *DriverAgent) tick(ctx context.Context) {
	pods, err := a.installers.List(labels.Everything())
	if err != nil {
		return
	}
	for _, cached := range pods {
		p := cached.DeepCopy() // finishInstall writes to it
		if p.Spec.NodeName == "" {
			continue
		}
		a.mu.Lock()
		if a.left[p.Spec.NodeName] {
			a.mu.Unlock()
			continue
		}
		first, ok := a.seen[p.Name]
		if !ok {
			a.seen[p.Name], first = time.Now(), time.Now()
			a.pods[p.Spec.NodeName]++
		}
		delay, set := a.delay[p.Spec.NodeName]
		if !set {
			delay = a.defaultDelay
		}
		noLabel, handled := a.noLabel[p.Spec.NodeName], a.handled[p.Name]
		a.mu.Unlock()
		if handled || time.Since(first) < delay || !finishInstall(ctx, p, noLabel) {
			continue
		}
		a.mu.Lock()
		a.handled[p.Name] = true
		a.mu.Unlock()
	}
}

// finishInstall completes an installer pod and, unless noLabel, reports its driver on
// the node; false when a write failed (the next tick tries again).
func finishInstall(ctx context.Context, p *corev1.Pod, noLabel bool) bool {
	kube := C.Kube
	if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		Terminate(p, PodEnd{})
		if _, err := kube.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			return false
		}
	}
	if noLabel {
		return true
	}
	version := ""
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == "DRIVER_VERSION" {
			version = e.Value
		}
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, DriverLabel, version)
	_, err := kube.CoreV1().Nodes().Patch(ctx, p.Spec.NodeName, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err == nil
}

// CreateReadyNode registers a kwok node of 8 nvidia.com/gpu, Ready from the start, in
// pool (none when pool is empty): kwok keeps it Ready.
func CreateReadyNode(t *testing.T, kube kubernetes.Interface, name, pool string) {
	t.Helper()
	res := corev1.ResourceList{"cpu": resource.MustParse("64"), "memory": resource.MustParse("512Gi"), "pods": resource.MustParse("110"), "nvidia.com/gpu": resource.MustParse("8")}
	labels := map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok"}
	if pool != "" {
		labels[policy.LabelPool] = pool
	}
	_, err := kube.CoreV1().Nodes().Create(context.Background(), &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}, Labels: labels},
		Status: corev1.NodeStatus{Allocatable: res, Capacity: res,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// WaitInService waits until the API server has each node Ready and without a taint a
// pool's pods do not tolerate. The TaintNodesByCondition admission plugin gives every
// new node the not-ready taint, which the controller-manager lifts only once it has seen
// the node Ready (seconds later on a loaded machine): until then the node is out of
// service (policy.NodeOut), and neither N3's domain floor nor a scale plan counts it.
func WaitInService(t *testing.T, kube kubernetes.Interface, names ...string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			node, err := kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if out := policy.NodeOut(node, node.Labels[policy.LabelPool], ""); out != "" {
				last = n + ": " + out
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "nodes never came into service; last: %s", last)
}

// RenderWithComponent is `kubectl kustomize` of deploy/webhook with one of its components
// (deploy/webhook/components/NAME), as an operator's overlay would render it.
func RenderWithComponent(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	base, err := filepath.Rel(dir, filepath.Join(Root, "deploy", "webhook"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"),
		[]byte(fmt.Sprintf("resources: [%s]\ncomponents: [%s/components/%s]\n", base, base, name)), 0o600))
	r := C.Kubectl(t, "", "kustomize", dir)
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	return r.Stdout
}
