// Command populate fills a bench cluster with an AI cluster's worth of objects: N nodes
// with accelerators, carved into pools (most with a Pool object, some made only of
// labels, the rest in the default pool), and M pods bound to them through spec.nodeName
// and requesting accelerators, with realistic specs and statuses (Running, 10%
// Succeeded). Everything is created concurrently by many goroutines through one
// high-QPS protobuf client, so 5,000 nodes and 40,000 pods take minutes.
//
// Nodes are not played by any kubelet (kwok manages only annotated nodes, and the bench
// runs no controller manager): they keep the Ready status they are created with.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

var (
	kubeconfig = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the bench cluster")
	numNodes   = flag.Int("nodes", 5000, "nodes to create")
	numPods    = flag.Int("pods", 40000, "pods to create")
	numPools   = flag.Int("pools", 40, "pools (the last quarter exist only as node labels)")
	inPools    = flag.Float64("in-pools", 0.9, "share of the nodes that belong to a pool")
	workers    = flag.Int("workers", 96, "concurrent writers")
	namespaces = flag.Int("namespaces", 20, "namespaces the pods are spread over")
)

func main() {
	flag.Parse()
	if *expect {
		printExpected()
		return
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	check(err)
	cfg.QPS, cfg.Burst = 100000, 100000 // the bench measures the server, not client throttling
	dyn, err := dynamic.NewForConfig(cfg)
	check(err)
	cfg.ContentType = runtime.ContentTypeProtobuf
	kube, err := kubernetes.NewForConfig(cfg)
	check(err)
	ctx := context.Background()
	start := time.Now()
	switch {
	case *deleteDRA:
		removeDRA(ctx, kube)
		fmt.Printf("populate: DRA objects deleted in %s\n", time.Since(start).Round(time.Second))
		return
	case *onlyDRA:
		populateDRA(ctx, kube)
		fmt.Printf("populate: DRA objects for %d nodes and %d pods in %s\n", *numNodes, *numPods, time.Since(start).Round(time.Second))
		return
	}

	for p := 0; p < *numPools*3/4; p++ {
		check(createPool(ctx, dyn, p))
	}
	for n := 0; n < *namespaces; n++ {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName(n)}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			check(err)
		}
	}
	run("nodes", *numNodes, func(i int) error {
		_, err := kube.CoreV1().Nodes().Create(ctx, node(i), metav1.CreateOptions{})
		return ignoreExists(err)
	})
	run("pods", *numPods, func(i int) error {
		pod := pod(i)
		status := pod.Status
		created, err := kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		if err != nil {
			return err
		}
		created.Status = status
		_, err = kube.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	})
	if *withDRA {
		populateDRA(ctx, kube)
	}
	fmt.Printf("populate: %d nodes, %d pods, %d pools in %s\n", *numNodes, *numPods, *numPools, time.Since(start).Round(time.Second))
}

// run calls fn(0..n-1) from the workers, reporting progress and failing on an error.
func run(what string, n int, fn func(int) error) {
	start := time.Now()
	var next, done atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := retry(func() error { return fn(i) }); err != nil {
					once.Do(func() { firstErr = fmt.Errorf("%s %d: %w", what, i, err) })
					return
				}
				if d := done.Add(1); d%10000 == 0 {
					fmt.Printf("populate: %d %s (%s)\n", d, what, time.Since(start).Round(time.Second))
				}
			}
		}()
	}
	wg.Wait()
	check(firstErr)
	fmt.Printf("populate: %d %s created in %s (%.0f/s)\n", n, what, time.Since(start).Round(time.Millisecond), float64(n)/time.Since(start).Seconds())
}

// retry rides out the API server's 429s and timeouts under load.
func retry(fn func() error) error {
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		if err = fn(); !retriable(err) {
			return err
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
	return err
}

// retriable: the API server is overloaded or slow, not refusing.
func retriable(err error) bool {
	return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err)
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func poolName(p int) string { return fmt.Sprintf("pool-%02d", p) }
func nsName(n int) string   { return fmt.Sprintf("team-%02d", n) }

// poolOf is the pool node i belongs to, or -1 for the default pool.
func poolOf(i int) int {
	members := int(float64(*numNodes) * *inPools)
	if i >= members {
		return -1
	}
	return i * *numPools / members
}

// npu says whether pool p (or a default node i) is an Ascend pool: every third.
func npu(p, i int) bool {
	if p < 0 {
		return i%3 == 0
	}
	return p%3 == 0
}

func createPool(ctx context.Context, dyn dynamic.Interface, p int) error {
	gpuType, resourceName := "A100-80G", "nvidia.com/gpu"
	if npu(p, 0) {
		gpuType, resourceName = "Snt9B", "huawei.com/Ascend910"
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "runwhere.ai/v1alpha1", "kind": "Pool",
		"metadata": map[string]any{"name": poolName(p)},
		"spec": map[string]any{
			"description": fmt.Sprintf("bench pool %d", p), "type": []string{"Training", "Inference", "Development"}[p%3],
			"accelerator": map[string]any{"type": gpuType, "resourceName": resourceName}, "minNodes": int64(2),
			"nodePools": []any{map[string]any{"name": "np-a"}, map[string]any{"name": "np-b"}},
		},
	}}
	if *domainSize > 0 {
		u.Object["spec"].(map[string]any)["topology"] = topologyPreset(p)
	}
	_, err := dyn.Resource(v1alpha1.PoolResource).Create(ctx, u, metav1.CreateOptions{})
	return ignoreExists(err)
}

var images = func() []corev1.ContainerImage {
	var out []corev1.ContainerImage
	for i := 0; i < 12; i++ {
		out = append(out, corev1.ContainerImage{
			Names:     []string{fmt.Sprintf("registry.example.com/ai/image-%02d@sha256:%064x", i, i*7919), fmt.Sprintf("registry.example.com/ai/image-%02d:v1.%d", i, i)},
			SizeBytes: int64(1+i) * 1 << 30,
		})
	}
	return out
}()

func q(s string) resource.Quantity { return resource.MustParse(s) }

// node is a GPU or NPU server as the device plugins and feature discovery label it.
func node(i int) *corev1.Node {
	name := fmt.Sprintf("node-%05d", i)
	p := poolOf(i)
	labels := map[string]string{
		"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"node.kubernetes.io/instance-type": "ai.8xlarge", "topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3),
		"topology.kubernetes.io/region": "region-1",
	}
	resourceName, model := corev1.ResourceName("nvidia.com/gpu"), "A100-80G"
	if npu(p, i) {
		resourceName, model = "huawei.com/Ascend910", "Snt9B"
		labels["huawei.com/driver.version"] = "24.1.rc2"
		labels["node.kubernetes.io/npu.chip.name"] = "910B3"
		labels["accelerator"] = "huawei-Ascend910"
	} else {
		labels["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-80GB"
		labels["nvidia.com/gpu.count"] = "8"
		labels["nvidia.com/cuda.driver-version.full"] = "535.104.05"
	}
	labels["runwhere.ai/gpu-type"] = model
	topologyLabels(labels, i, npu(p, i))
	if p >= 0 {
		labels["runwhere.ai/pool"] = poolName(p)
		if p < *numPools*3/4 {
			labels["runwhere.ai/node-pool"] = []string{"np-a", "np-b"}[i%2]
		}
	}
	resources := corev1.ResourceList{"cpu": q("192"), "memory": q("1536Gi"), "pods": q("110"),
		"ephemeral-storage": q("3Ti"), "hugepages-1Gi": q("0"), "hugepages-2Mi": q("0"), resourceName: q("8")}
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{
			"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
		Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.%d.%d.0/24", i/256, i%256), PodCIDRs: []string{fmt.Sprintf("10.%d.%d.0/24", i/256, i%256)},
			ProviderID: "bench://" + name},
		Status: corev1.NodeStatus{
			Capacity: resources, Allocatable: resources,
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
			},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("192.168.%d.%d", i/256, i%256)}, {Type: corev1.NodeHostName, Address: name}},
			NodeInfo: corev1.NodeSystemInfo{MachineID: fmt.Sprintf("%032x", i), SystemUUID: fmt.Sprintf("%032x", i+1), BootID: fmt.Sprintf("%032x", i+2),
				KernelVersion: "5.15.0-105-generic", OSImage: "Ubuntu 22.04.4 LTS", ContainerRuntimeVersion: "containerd://1.7.13",
				KubeletVersion: "v1.36.3", OperatingSystem: "linux", Architecture: "amd64"},
			Images: images,
		},
	}
}

// pod is a training or serving pod bound to its node: pods fill the nodes in order, 8
// to a node on average, each asking for 1 accelerator.
func pod(i int) *corev1.Pod {
	n := i * *numNodes / *numPods
	p := poolOf(n)
	resourceName := corev1.ResourceName("nvidia.com/gpu")
	if npu(p, n) {
		resourceName = "huawei.com/Ascend910"
	}
	ns := nsName(i % *namespaces)
	job := fmt.Sprintf("job-%05d", i/8)
	labels := map[string]string{"app.kubernetes.io/name": "trainer", "job-name": job, "batch.kubernetes.io/job-name": job,
		"runwhere.ai/workload-type": "training", "controller-uid": fmt.Sprintf("%08x-0000-4000-8000-%012x", i/8, i/8)}
	var selector map[string]string
	if p >= 0 {
		labels["runwhere.ai/pool"] = poolName(p)
		selector = map[string]string{"runwhere.ai/pool": poolName(p)}
	}
	limits := corev1.ResourceList{"cpu": q("16"), "memory": q("128Gi"), resourceName: q("1")}
	env := []corev1.EnvVar{{Name: "MASTER_ADDR", Value: job + "-0." + job}, {Name: "MASTER_PORT", Value: "29500"},
		{Name: "WORLD_SIZE", Value: "8"}, {Name: "RANK", Value: fmt.Sprint(i % 8)}, {Name: "NCCL_DEBUG", Value: "WARN"},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	name := fmt.Sprintf("%s-%d", job, i%8)
	start := metav1.NewTime(time.Now().Add(-time.Hour))
	phase, ready := corev1.PodRunning, corev1.ConditionTrue
	state := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}}
	if i%10 == 9 {
		phase, ready = corev1.PodSucceeded, corev1.ConditionFalse
		state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: start, FinishedAt: metav1.Now()}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels,
			Annotations: map[string]string{"kubectl.kubernetes.io/default-container": "trainer"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job,
				UID: types(fmt.Sprintf("%08x-0000-4000-8000-%012x", i/8, i/8)), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.PodSpec{
			NodeName: fmt.Sprintf("node-%05d", n), NodeSelector: selector, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "trainer", Image: "registry.example.com/ai/pytorch:2.4.0-cuda12.1", Command: []string{"torchrun"},
				Args: []string{"--nproc-per-node=1", "train.py", "--config=/etc/train/config.yaml"}, Env: env,
				Resources:    corev1.ResourceRequirements{Limits: limits, Requests: limits},
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/train"}, {Name: "shm", MountPath: "/dev/shm"}},
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: job}}}},
				{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			},
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
		},
		Status: corev1.PodStatus{
			Phase: phase, HostIP: fmt.Sprintf("192.168.%d.%d", n/256, n%256), PodIP: fmt.Sprintf("10.%d.%d.%d", n/256, n%256, i%8+2), StartTime: &start,
			QOSClass: corev1.PodQOSGuaranteed,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: start},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: start},
				{Type: corev1.ContainersReady, Status: ready, LastTransitionTime: start},
				{Type: corev1.PodReady, Status: ready, LastTransitionTime: start},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "trainer", Image: "registry.example.com/ai/pytorch:2.4.0-cuda12.1",
				ImageID: "registry.example.com/ai/pytorch@sha256:" + fmt.Sprintf("%064x", 42), ContainerID: fmt.Sprintf("containerd://%064x", i),
				Ready: ready == corev1.ConditionTrue, Started: ptr.To(phase == corev1.PodRunning), State: state}},
		},
	}
}

func types(s string) k8stypes.UID { return k8stypes.UID(s) }

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "populate:", err)
		os.Exit(1)
	}
}
