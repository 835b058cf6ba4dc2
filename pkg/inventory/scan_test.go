package inventory

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// encode writes a list as the API server sends it (magic, runtime.Unknown, the list).
func encode(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	kinds, _, err := scheme.Scheme.ObjectKinds(obj)
	require.NoError(t, err)
	enc := scheme.Codecs.EncoderForVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), kinds[0].GroupVersion())
	var buf bytes.Buffer
	require.NoError(t, enc.Encode(obj, &buf))
	return buf.Bytes()
}

func randomResources(r *rand.Rand) corev1.ResourceList {
	rl := corev1.ResourceList{"cpu": resource.MustParse("4"), "memory": resource.MustParse("16Gi")}
	names := []corev1.ResourceName{"nvidia.com/gpu", "huawei.com/Ascend910", "nvidia.com/mig-1g.10gb", "example.com/fpga"}
	for _, n := range names {
		if r.Intn(3) == 0 {
			rl[n] = *resource.NewQuantity(int64(r.Intn(9)), resource.DecimalSI)
		}
	}
	return rl
}

func randomPod(r *rand.Rand, i int) corev1.Pod {
	container := func(name string) corev1.Container {
		c := corev1.Container{Name: name, Image: "img", Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
			Resources: corev1.ResourceRequirements{Limits: randomResources(r)}}
		if r.Intn(2) == 0 {
			c.Resources.Requests = randomResources(r)
		}
		return c
	}
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "ns", Labels: map[string]string{"app": "x"},
			Annotations: map[string]string{"note": "y"}},
		Spec:   corev1.PodSpec{NodeName: fmt.Sprintf("n%d", r.Intn(200)), Containers: []corev1.Container{container("a")}},
		Status: corev1.PodStatus{Phase: []corev1.PodPhase{corev1.PodRunning, corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed}[r.Intn(4)]},
	}
	if r.Intn(2) == 0 {
		p.Spec.Containers = append(p.Spec.Containers, container("b"))
	}
	if r.Intn(3) == 0 {
		init := container("init")
		if r.Intn(2) == 0 {
			init.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}
		p.Spec.InitContainers = []corev1.Container{init, container("init2")}
	}
	if r.Intn(5) == 0 {
		p.Spec.Overhead = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), "cpu": resource.MustParse("1")}
	}
	switch r.Intn(5) {
	case 0:
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "u", Controller: ptr.To(true)}}
	case 1:
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "u"}}
	case 2:
		p.Annotations[corev1.MirrorPodAnnotationKey] = "hash"
	case 3:
		p.Spec.NodeName = ""
	}
	return p
}

func randomNode(r *rand.Rand, i int) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), Labels: map[string]string{"kubernetes.io/hostname": "x"},
			Annotations: map[string]string{"other": "x"}},
		Status: corev1.NodeStatus{Allocatable: randomResources(r), Capacity: randomResources(r),
			Images: []corev1.ContainerImage{{Names: []string{"img"}, SizeBytes: 1}}},
	}
	if r.Intn(2) == 0 {
		n.Labels["runwhere.ai/pool"] = []string{"pool-a", "pool-b"}[r.Intn(2)]
		n.Labels["runwhere.ai/node-pool"] = "np"
	}
	if r.Intn(2) == 0 {
		n.Labels["runwhere.ai/gpu-type"] = "A100-80G"
	} else {
		n.Labels["nvidia.com/gpu.product"] = "NVIDIA-A100"
		n.Labels["nvidia.com/cuda.driver-version.full"] = "535.104.05"
	}
	n.Spec.Unschedulable = r.Intn(4) == 0
	switch r.Intn(4) {
	case 0:
		n.Annotations["runwhere.ai/upgrade-state"] = "install"
	case 1:
		n.Annotations["runwhere.ai/draining"] = "true"
	case 2:
		n.Labels["runwhere.ai/health"] = "degraded"
	}
	ready := corev1.ConditionTrue
	if r.Intn(4) == 0 {
		ready = corev1.ConditionFalse
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeReady, Status: ready}}
	if r.Intn(6) == 0 {
		n.Status.Conditions = nil
	}
	return n
}

func TestScannersAgreeWithFullDecoding(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	pods := &corev1.PodList{ListMeta: metav1.ListMeta{Continue: "next-page"}}
	for i := 0; i < 500; i++ {
		pods.Items = append(pods.Items, randomPod(r, i))
	}
	nodes := &corev1.NodeList{}
	for i := 0; i < 200; i++ {
		nodes.Items = append(nodes.Items, randomNode(r, i))
	}

	full := NewBuilder()
	for i := range pods.Items {
		full.AddPod(&pods.Items[i])
	}
	for i := range nodes.Items {
		full.AddNode(&nodes.Items[i])
	}

	want := full.Build("pool-c")
	for _, d := range []decoder{scanDecoder, unmarshalDecoder} {
		scanned := NewBuilder()
		var pod corev1.Pod
		cont, err := listItems(encode(t, pods), func(b []byte) error {
			if err := d.pod(b, &pod, map[string]string{}, policy.Accelerators{}); err != nil {
				return err
			}
			scanned.AddPod(&pod)
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, "next-page", cont)
		var node corev1.Node
		cont, err = listItems(encode(t, nodes), func(b []byte) error {
			if err := d.node(b, &node, policy.Accelerators{}); err != nil {
				return err
			}
			scanned.AddNode(&node)
			return nil
		})
		require.NoError(t, err)
		assert.Empty(t, cont)
		assert.Equal(t, want, scanned.Build("pool-c"), "decoder %s", d.name)
	}
	// The sample exercises what it should: used accelerators, workload and daemon pods,
	// every node state.
	var used int64
	states := map[string]bool{}
	for _, n := range want.Nodes {
		used += n.Used
		states[string(n.State)] = true
	}
	assert.Greater(t, used, int64(100))
	assert.Len(t, states, 6, "%v", states)
}

func TestScannerRejectsWhatItCannotRead(t *testing.T) {
	_, err := listItems([]byte(`{"kind":"PodList"}`), func([]byte) error { return nil })
	assert.ErrorIs(t, err, errNotProtobuf)
	body := encode(t, &corev1.PodList{Items: []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "p1"}, Spec: corev1.PodSpec{NodeName: "n1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "p2"}, Spec: corev1.PodSpec{NodeName: "n1"}},
	}})
	items := 0
	_, err = listItems(body, func(b []byte) error {
		items++
		return scanPod(b, &corev1.Pod{}, map[string]string{}, policy.Accelerators{})
	})
	require.NoError(t, err)
	assert.Equal(t, 2, items)
	// Cut anywhere before the envelope's two trailing empty strings (4 bytes), the body
	// is an error, never a shorter list: not even cut between two items.
	for cut := 0; cut < len(body)-4; cut++ {
		_, err = listItems(body[:cut], func(b []byte) error { return scanPod(b, &corev1.Pod{}, map[string]string{}, policy.Accelerators{}) })
		assert.Error(t, err, "cut at %d of %d", cut, len(body))
	}
}

// A length above math.MaxInt64 is a corrupt stream: read as int64 it would be negative,
// pass every "no more than what is left" check, and slice with a negative bound (a panic)
// or end a list early as if it were empty.
func TestScannerRejectsLengthsBeyondInt64(t *testing.T) {
	huge := protowire.AppendVarint(nil, 1<<63+5)
	field := func(num protowire.Number, length, payload []byte) []byte {
		b := protowire.AppendTag(nil, num, protowire.BytesType)
		return append(append(b, length...), payload...)
	}
	item := field(2, huge, nil)                                            // an item of a list
	list := field(2, protowire.AppendVarint(nil, uint64(len(item))), item) // Unknown.raw
	for name, body := range map[string][]byte{
		"item":     append([]byte("k8s\x00"), list...),
		"envelope": append([]byte("k8s\x00"), field(2, huge, nil)...),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := listItems(body, func([]byte) error { return nil })
			assert.ErrorContains(t, err, "truncated message")
		})
	}
}

func BenchmarkScanPods(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	pods := &corev1.PodList{}
	for i := 0; i < 1000; i++ {
		pods.Items = append(pods.Items, randomPod(r, i))
	}
	body := encode(b, pods)
	b.Run("scan", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			bu := NewBuilder()
			var pod corev1.Pod
			names := map[string]string{}
			_, _ = listItems(body, func(item []byte) error {
				_ = scanPod(item, &pod, names, policy.Accelerators{})
				bu.AddPod(&pod)
				return nil
			})
		}
	})
	xpu := policy.NewAccelerators("vendor.example/xpu", "vendor.example/npu")
	b.Run("scan-extra-accelerators", func(b *testing.B) { // a set with extra names costs no more
		for i := 0; i < b.N; i++ {
			bu := NewBuilder()
			bu.Accelerators = xpu
			var pod corev1.Pod
			names := map[string]string{}
			_, _ = listItems(body, func(item []byte) error {
				_ = scanPod(item, &pod, names, xpu)
				bu.AddPod(&pod)
				return nil
			})
		}
	})
	b.Run("unmarshal", func(b *testing.B) { // the same stream, each item decoded in full
		for i := 0; i < b.N; i++ {
			bu := NewBuilder()
			var pod corev1.Pod
			_, _ = listItems(body, func(item []byte) error {
				_ = unmarshalDecoder.pod(item, &pod, nil, policy.Accelerators{})
				bu.AddPod(&pod)
				return nil
			})
		}
	})
	b.Run("decode", func(b *testing.B) {
		dec := scheme.Codecs.UniversalDeserializer()
		for i := 0; i < b.N; i++ {
			bu := NewBuilder()
			obj, _, _ := dec.Decode(body, nil, nil)
			for j := range obj.(*corev1.PodList).Items {
				bu.AddPod(&obj.(*corev1.PodList).Items[j])
			}
		}
	})
}

// FuzzListItems: whatever the bytes, the scanner returns an error or items, never
// panics or loops.
func FuzzListItems(f *testing.F) {
	r := rand.New(rand.NewSource(2))
	pods := &corev1.PodList{ListMeta: metav1.ListMeta{Continue: "c"}}
	for i := 0; i < 3; i++ {
		pods.Items = append(pods.Items, randomPod(r, i))
	}
	nodes := &corev1.NodeList{Items: []corev1.Node{randomNode(r, 0)}}
	f.Add(encode(f, pods))
	f.Add(encode(f, nodes))
	f.Add([]byte("k8s\x00"))
	f.Fuzz(func(t *testing.T, body []byte) {
		var pod corev1.Pod
		var node corev1.Node
		names := map[string]string{}
		_, _ = listItems(body, func(b []byte) error {
			if err := scanPod(b, &pod, names, policy.Accelerators{}); err != nil {
				return err
			}
			return scanNode(b, &node, policy.Accelerators{})
		})
	})
}
