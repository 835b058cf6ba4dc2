package policy

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// catalog is a PoolCatalog (and NodeCatalog) over maps.
type catalog struct {
	pools map[string]PoolInfo
	pods  map[string][]string
}

func (c catalog) Pool(name string) (PoolInfo, bool) {
	p, ok := c.pools[name]
	return p, ok
}

func (c catalog) PoolNames() []string {
	var names []string
	for n := range c.pools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (c catalog) WorkloadPods(node string) []string { return c.pods[node] }

func testCatalog() catalog {
	a100 := pool("train-a100", "A100-80G", 2)
	a100.Spec.Type = v1alpha1.PoolTypeTraining
	a100.Spec.Accelerator.ResourceName = "nvidia.com/gpu"
	a100.Spec.NodePools = []v1alpha1.NodePool{{Name: "a100-np1"}, {Name: "a100-np2"}}
	snt9b := pool("train-snt9b", "Snt9B", 1)
	snt9b.Spec.Accelerator.ResourceName = "huawei.com/Ascend910"
	snt9b.Spec.HCCL.OpRetry = v1alpha1.OpRetrySpec{Enabled: true, MaxRetries: 3, RetryTimeoutSeconds: 300}
	npuPlain := pool("infer-snt9b", "Snt9B", 1)
	npuPlain.Spec.Type = v1alpha1.PoolTypeInference
	npuPlain.Spec.Accelerator.ResourceName = "huawei.com/Ascend910"
	dev := pool("dev-sandbox", "A10-24G", 1)
	dev.Spec.Type = v1alpha1.PoolTypeDevelopment
	dev.Spec.Exclusive = true
	dev.Spec.Namespaces = []string{"notebooks"}
	dev.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "research"}}
	return catalog{pools: map[string]PoolInfo{
		"train-a100":  {Name: "train-a100", Object: a100, Members: 3, GPUTypes: []string{"A100-80G"}},
		"train-snt9b": {Name: "train-snt9b", Object: snt9b, Members: 3, GPUTypes: []string{"Snt9B"}},
		"infer-snt9b": {Name: "infer-snt9b", Object: npuPlain, Members: 0},
		"dev-sandbox": {Name: "dev-sandbox", Object: dev, Members: 0},
		"infer-a10":   {Name: "infer-a10", Members: 2, GPUTypes: []string{"A10-24G"}},
	}}
}

type podOpt func(*corev1.Pod)

func podLabels(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		for i := 0; i < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func nodeSelector(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func affinity(key string, op corev1.NodeSelectorOperator, values ...string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}},
			}},
		}}
	}
}

func limits(name string, n int64) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceName(name): *resource.NewQuantity(n, resource.DecimalSI)}
	}
}

func env(name, value string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: name, Value: value})
	}
}

func inNamespace(name string) podOpt { return func(p *corev1.Pod) { p.Namespace = name } }

func ownedBy(kind string) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, Name: "owner", Controller: ptr.To(true)}}
	}
}

func testPod(opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "job-0", Namespace: "ai-team", Labels: map[string]string{}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func ns(name string, kv ...string) *corev1.Namespace {
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for i := 0; i < len(kv); i += 2 {
		n.Labels[kv[i]] = kv[i+1]
	}
	return n
}

const (
	hcclEnable = "L0:0, L1:1, L2:1"
	hcclParams = "MaxCnt:3,HoldTime:60000,IntervalTime:1000"
)

func TestMutatePod(t *testing.T) {
	training := []podOpt{podLabels(LabelPool, "train-a100", LabelWorkloadType, "training")}
	with := func(extra ...podOpt) []podOpt { return append(append([]podOpt{}, training...), extra...) }
	tests := []struct {
		name     string
		pod      *corev1.Pod
		ns       *corev1.Namespace
		want     PodPatch
		warnings []string
		wantErr  string
	}{
		{name: "no pool: untouched", pod: testPod(), ns: ns("ai-team")},
		{name: "default pool: untouched", pod: testPod(podLabels(LabelPool, "default")), ns: ns("ai-team", LabelPool, "train-a100")},
		{name: "P1 nodeSelector injected", pod: testPod(training...), ns: ns("ai-team"),
			want: PodPatch{NodeSelector: map[string]string{LabelPool: "train-a100"}}},
		{name: "P1 node pool injected too", pod: testPod(with(podLabels(LabelNodePool, "a100-np2"))...),
			want: PodPatch{NodeSelector: map[string]string{LabelPool: "train-a100", LabelNodePool: "a100-np2"}}},
		{name: "P1 same nodeSelector already there: nothing to add", pod: testPod(with(nodeSelector(LabelPool, "train-a100", "zone", "a"))...)},
		{name: "P1 compatible affinity", pod: testPod(with(affinity(LabelPool, corev1.NodeSelectorOpIn, "train-a100", "infer-a10"))...),
			want: PodPatch{NodeSelector: map[string]string{LabelPool: "train-a100"}}},
		{name: "P1 conflicting nodeSelector denied, naming both values", pod: testPod(with(nodeSelector(LabelPool, "infer-a10"))...),
			wantErr: `[P1] nodeSelector runwhere.ai/pool=infer-a10 conflicts with pool "train-a100", which needs runwhere.ai/pool=train-a100: remove it or make it runwhere.ai/pool=train-a100 (litepool never overwrites it)`},
		{name: "P1 conflicting node pool nodeSelector", pod: testPod(with(podLabels(LabelNodePool, "a100-np1"), nodeSelector(LabelNodePool, "a100-np2"))...),
			wantErr: `[P1] nodeSelector runwhere.ai/node-pool=a100-np2 conflicts with pool "train-a100", which needs runwhere.ai/node-pool=a100-np1: remove it or make it runwhere.ai/node-pool=a100-np1 (litepool never overwrites it)`},
		{name: "P1 conflicting required affinity", pod: testPod(with(affinity(LabelPool, corev1.NodeSelectorOpNotIn, "train-a100"))...),
			wantErr: `[P1] required node affinity (term 0) runwhere.ai/pool notin (train-a100) conflicts with pool "train-a100", which needs runwhere.ai/pool=train-a100: remove it or make it runwhere.ai/pool=train-a100 (litepool never overwrites it)`},
		{name: "P1 toleration for an exclusive pool", pod: testPod(podLabels(LabelPool, "dev-sandbox", LabelWorkloadType, "development"), inNamespace("notebooks")), ns: ns("notebooks"),
			want: PodPatch{NodeSelector: map[string]string{LabelPool: "dev-sandbox"}, Tolerations: []corev1.Toleration{ExclusivePoolToleration("dev-sandbox")}}},
		{name: "P1 HCCL env for an NPU pod of a pool with retry on",
			pod: testPod(podLabels(LabelPool, "train-snt9b", LabelWorkloadType, "training"), limits("huawei.com/Ascend910", 8)),
			want: PodPatch{NodeSelector: map[string]string{LabelPool: "train-snt9b"}, Env: []ContainerEnv{{Index: 0, Name: "main", Env: []corev1.EnvVar{
				{Name: EnvHCCLOpRetryEnable, Value: hcclEnable}, {Name: EnvHCCLOpRetryParams, Value: hcclParams}}}}}},
		{name: "P1 no HCCL env for a pod without NPUs",
			pod:  testPod(podLabels(LabelPool, "train-snt9b", LabelWorkloadType, "training")),
			want: PodPatch{NodeSelector: map[string]string{LabelPool: "train-snt9b"}}},
		{name: "P1 no HCCL env in an NPU pool with retry off",
			pod:  testPod(podLabels(LabelPool, "infer-snt9b", LabelWorkloadType, "inference"), limits("huawei.com/Ascend910", 1)),
			want: PodPatch{NodeSelector: map[string]string{LabelPool: "infer-snt9b"}}},
		{name: "P1 HCCL env already equal: nothing to add",
			pod:  testPod(podLabels(LabelPool, "train-snt9b", LabelWorkloadType, "training"), limits("huawei.com/Ascend910", 8), env(EnvHCCLOpRetryEnable, hcclEnable), env(EnvHCCLOpRetryParams, hcclParams)),
			want: PodPatch{NodeSelector: map[string]string{LabelPool: "train-snt9b"}}},
		{name: "P1 HCCL env conflict denied, naming both values",
			pod:     testPod(podLabels(LabelPool, "train-snt9b", LabelWorkloadType, "training"), limits("huawei.com/Ascend910", 8), env(EnvHCCLOpRetryParams, "MaxCnt:5")),
			wantErr: `[P1] container "main" sets HCCL_OP_RETRY_PARAMS="MaxCnt:5" but pool "train-snt9b" sets "MaxCnt:3,HoldTime:60000,IntervalTime:1000": remove it from the container (the pool's value is injected) or change the pool's HCCL settings`},
		{name: "namespace default pool: label and nodeSelector added", pod: testPod(podLabels(LabelWorkloadType, "training")), ns: ns("ai-team", LabelPool, "train-a100"),
			want: PodPatch{Labels: map[string]string{LabelPool: "train-a100"}, NodeSelector: map[string]string{LabelPool: "train-a100"}}},
		{name: "P2 unknown pool denied, naming no other pool", pod: testPod(podLabels(LabelPool, "train-h100")),
			wantErr: `[P2] pool "train-h100" (label runwhere.ai/pool) does not exist: ask for a pool that exists (kubectl litepool get pools) or remove the label`},
		{name: "P2 unknown namespace default pool", pod: testPod(), ns: ns("ai-team", LabelPool, "gone-pool"),
			wantErr: `[P2] pool "gone-pool" (the default pool of namespace "ai-team") does not exist: ask for a pool that exists (kubectl litepool get pools) or have the namespace's label runwhere.ai/pool corrected`},
		{name: "P2 unknown node pool", pod: testPod(with(podLabels(LabelNodePool, "a100-np9"))...),
			wantErr: `[P2] node pool "a100-np9" (label runwhere.ai/node-pool) does not exist in pool "train-a100": its node pools are a100-np1, a100-np2`},
		{name: "P2 pool of labels only exists", pod: testPod(podLabels(LabelPool, "infer-a10")),
			want: PodPatch{NodeSelector: map[string]string{LabelPool: "infer-a10"}}},
		{name: "P3 cross-type work denied", pod: testPod(podLabels(LabelPool, "train-a100", LabelWorkloadType, "inference")),
			wantErr: `[P3] pool "train-a100" (type Training) does not accept inference work (label runwhere.ai/workload-type): it accepts training, development; use a pool that takes inference work`},
		{name: "P3 type inferred from the owner", pod: testPod(podLabels(LabelPool, "train-a100"), ownedBy("ReplicaSet")),
			wantErr: `[P3] pool "train-a100" (type Training) does not accept inference work (inferred from its owner ReplicaSet): it accepts training, development; use a pool that takes inference work`},
		{name: "P3 owner Job accepted", pod: testPod(podLabels(LabelPool, "train-a100"), ownedBy("Job")),
			want: PodPatch{NodeSelector: map[string]string{LabelPool: "train-a100"}}},
		{name: "P3 invalid workload type", pod: testPod(podLabels(LabelPool, "train-a100", LabelWorkloadType, "batch")),
			wantErr: `[P3] label runwhere.ai/workload-type: unknown workload type "batch": must be one of training, inference, development, compute`},
		{name: "P3 undeclared work admitted with a warning", pod: testPod(podLabels(LabelPool, "train-a100")),
			want:     PodPatch{NodeSelector: map[string]string{LabelPool: "train-a100"}},
			warnings: []string{`[P3] pod declares no workload type: set label runwhere.ai/workload-type to one that pool "train-a100" accepts (training, development)`}},
		{name: "P4 namespace not allowed", pod: testPod(podLabels(LabelPool, "dev-sandbox", LabelWorkloadType, "development")), ns: ns("ai-team"),
			wantErr: `[P4] namespace "ai-team" may not use pool "dev-sandbox": the pool admits only the namespaces its spec.namespaces lists or its spec.namespaceSelector selects, and "ai-team" is not among them; use a pool that admits it, or have "ai-team" added to spec.namespaces of pool "dev-sandbox"`},
		{name: "P4 namespace allowed by selector", pod: testPod(podLabels(LabelPool, "dev-sandbox", LabelWorkloadType, "development")), ns: ns("ai-team", "team", "research"),
			want: PodPatch{NodeSelector: map[string]string{LabelPool: "dev-sandbox"}, Tolerations: []corev1.Toleration{ExclusivePoolToleration("dev-sandbox")}}},
		{name: "P5 gpu-type mismatch in nodeSelector", pod: testPod(with(nodeSelector(LabelGPUType, "A10-24G"))...),
			wantErr: `[P5] nodeSelector runwhere.ai/gpu-type=A10-24G does not match pool "train-a100", whose nodes are runwhere.ai/gpu-type=A100-80G: ask for runwhere.ai/gpu-type=A100-80G or use a pool of the gpu-type you need`},
		{name: "P5 gpu-type mismatch in the pod label", pod: testPod(with(podLabels(LabelGPUType, "H100"))...),
			wantErr: `[P5] label runwhere.ai/gpu-type=H100 does not match pool "train-a100", whose nodes are runwhere.ai/gpu-type=A100-80G: ask for runwhere.ai/gpu-type=A100-80G or use a pool of the gpu-type you need`},
		{name: "P5 gpu-type mismatch in affinity", pod: testPod(with(affinity(LabelGPUType, corev1.NodeSelectorOpIn, "H100", "A10-24G"))...),
			wantErr: `[P5] required node affinity (term 0) runwhere.ai/gpu-type in (H100, A10-24G) does not match pool "train-a100", whose nodes are runwhere.ai/gpu-type=A100-80G: ask for runwhere.ai/gpu-type=A100-80G or use a pool of the gpu-type you need`},
		{name: "P5 matching gpu-type", pod: testPod(with(nodeSelector(LabelGPUType, "A100-80G"))...),
			want: PodPatch{NodeSelector: map[string]string{LabelPool: "train-a100"}}},
		{name: "P5 label-only pool checks its members' model", pod: testPod(podLabels(LabelPool, "infer-a10"), nodeSelector(LabelGPUType, "A100-80G")),
			wantErr: `[P5] nodeSelector runwhere.ai/gpu-type=A100-80G does not match pool "infer-a10", whose nodes are runwhere.ai/gpu-type=A10-24G: ask for runwhere.ai/gpu-type=A10-24G or use a pool of the gpu-type you need`},
		{name: "P5 accelerator resource mismatch", pod: testPod(with(limits("huawei.com/Ascend910", 8))...),
			wantErr: `[P5] pod requests huawei.com/Ascend910 but pool "train-a100" provides nvidia.com/gpu: request nvidia.com/gpu or use a pool of huawei.com/Ascend910 nodes`},
		{name: "P5 MIG slices fit an NVIDIA pool", pod: testPod(with(limits("nvidia.com/mig-1g.10gb", 1))...),
			want: PodPatch{NodeSelector: map[string]string{LabelPool: "train-a100"}}},
		{name: "several rules fail: every one is named", pod: testPod(podLabels(LabelPool, "train-a100", LabelWorkloadType, "inference"), nodeSelector(LabelPool, "infer-a10", LabelGPUType, "A10-24G")),
			wantErr: "[P3] pool \"train-a100\" (type Training) does not accept inference work (label runwhere.ai/workload-type): it accepts training, development; use a pool that takes inference work\n" +
				"[P5] nodeSelector runwhere.ai/gpu-type=A10-24G does not match pool \"train-a100\", whose nodes are runwhere.ai/gpu-type=A100-80G: ask for runwhere.ai/gpu-type=A100-80G or use a pool of the gpu-type you need\n" +
				"[P1] nodeSelector runwhere.ai/pool=infer-a10 conflicts with pool \"train-a100\", which needs runwhere.ai/pool=train-a100: remove it or make it runwhere.ai/pool=train-a100 (litepool never overwrites it)"},
	}
	cat := testCatalog()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.pod.DeepCopy()
			patch, warnings, err := MutatePod(tt.pod, tt.ns, cat, Accelerators{})
			assert.Equal(t, before, tt.pod, "MutatePod must not change its input")
			assert.Equal(t, tt.warnings, warnings)
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				assert.True(t, patch.Empty(), "a denied pod gets no patch")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, patch)
			// Reinvocation: the patched pod needs nothing more and is still admitted.
			patched := tt.pod.DeepCopy()
			patch.Apply(patched)
			again, _, err := MutatePod(patched, tt.ns, cat, Accelerators{})
			require.NoError(t, err)
			assert.True(t, again.Empty(), "second pass added %+v", again)
		})
	}
}

func TestPodPatchApply(t *testing.T) {
	pod := testPod(podLabels(LabelPool, "train-snt9b", LabelWorkloadType, "training"), limits("huawei.com/Ascend910", 8))
	pod.Spec.InitContainers = []corev1.Container{{Name: "warmup", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"huawei.com/Ascend910": resource.MustParse("1")}}}}
	patch, _, err := MutatePod(pod, nil, testCatalog(), Accelerators{})
	require.NoError(t, err)
	patch.Apply(pod)
	assert.Equal(t, map[string]string{LabelPool: "train-snt9b"}, pod.Spec.NodeSelector)
	want := []corev1.EnvVar{{Name: EnvHCCLOpRetryEnable, Value: hcclEnable}, {Name: EnvHCCLOpRetryParams, Value: hcclParams}}
	assert.Equal(t, want, pod.Spec.Containers[0].Env)
	assert.Equal(t, want, pod.Spec.InitContainers[0].Env)
}

// TestMutatePodDaemonSet: a DaemonSet's pods are placed node by node, so P1 pins none of
// them to a pool: a namespace's default pool leaves them alone, and one that asks for a
// pool by label is checked and tolerates an exclusive pool, but gets no nodeSelector.
func TestMutatePodDaemonSet(t *testing.T) {
	cat := testCatalog()
	oneNode := func(p *corev1.Pod) { // what the DaemonSet controller writes
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"cpu-node-1"}}}}}}}}
	}
	team := ns("ai-team", LabelPool, "train-a100")

	patch, warnings, err := MutatePod(testPod(ownedBy("DaemonSet"), oneNode), team, cat, Accelerators{})
	require.NoError(t, err)
	assert.True(t, patch.Empty(), "the namespace's default pool adds nothing: %+v", patch)
	assert.Empty(t, warnings)

	patch, _, err = MutatePod(testPod(ownedBy("DaemonSet"), oneNode, nodeSelector(LabelPool, "other")), team, cat, Accelerators{})
	require.NoError(t, err, "its own nodeSelector does not clash with a default pool that does not apply")
	assert.True(t, patch.Empty())

	patch, _, err = MutatePod(testPod(ownedBy("DaemonSet"), oneNode, inNamespace("notebooks"), podLabels(LabelPool, "dev-sandbox")), ns("notebooks"), cat, Accelerators{})
	require.NoError(t, err)
	assert.Empty(t, patch.NodeSelector, "no pool nodeSelector")
	assert.Equal(t, []corev1.Toleration{ExclusivePoolToleration("dev-sandbox")}, patch.Tolerations, "it tolerates the exclusive pool it asks for")

	_, _, err = MutatePod(testPod(ownedBy("DaemonSet"), podLabels(LabelPool, "dev-sandbox")), ns("ai-team"), cat, Accelerators{})
	assert.Equal(t, []string{"P4"}, Rules(err), "the pool's other rules still hold")

	patch, _, err = MutatePod(testPod(ownedBy("Job")), team, cat, Accelerators{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{LabelPool: "train-a100"}, patch.NodeSelector, "other pods of the namespace are pinned as before")
}

// A pod with no pool label that a nodeSelector pins to a pool (Kueue's ResourceFlavor of
// the pool's queue sets it on the pods it admits) is the pool's pod: it is labelled with
// the pool and judged by every pool rule; a namespace the pool does not admit is refused
// with the reason it was judged.
func TestMutatePodPinnedByNodeSelector(t *testing.T) {
	cat := testCatalog()
	kueue := []podOpt{inNamespace("notebooks"), nodeSelector(LabelPool, "dev-sandbox"), podLabels(LabelWorkloadType, "development")}
	patch, _, err := MutatePod(testPod(kueue...), ns("notebooks"), cat, Accelerators{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{LabelPool: "dev-sandbox"}, patch.Labels, "labelled with the pool")
	assert.Empty(t, patch.NodeSelector, "it has it already")
	assert.Equal(t, []corev1.Toleration{ExclusivePoolToleration("dev-sandbox")}, patch.Tolerations)
	pod := testPod(kueue...)
	patch.Apply(pod)
	again, _, err := MutatePod(pod, ns("notebooks"), cat, Accelerators{})
	require.NoError(t, err)
	assert.True(t, again.Empty(), "idempotent: %+v", again)

	// The toleration and the nodeSelector do not let another namespace in.
	sneak := testPod(nodeSelector(LabelPool, "dev-sandbox"), func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{ExclusivePoolToleration("dev-sandbox")}
	})
	_, _, err = MutatePod(sneak, ns("ai-team"), cat, Accelerators{})
	require.Error(t, err)
	assert.Equal(t, []string{"P4"}, Rules(err))
	assert.Contains(t, err.Error(), `nodeSelector runwhere.ai/pool=dev-sandbox pins it to pool "dev-sandbox"`)
	assert.Contains(t, err.Error(), `namespace "ai-team" may not use pool "dev-sandbox"`)

	_, _, err = MutatePod(testPod(nodeSelector(LabelPool, "nowhere")), ns("ai-team"), cat, Accelerators{})
	assert.Equal(t, []string{"P2"}, Rules(err))
	assert.Contains(t, err.Error(), "nodeSelector runwhere.ai/pool")

	// A namespace's default pool comes first: a pod pinned to another clashes (P1).
	_, _, err = MutatePod(testPod(nodeSelector(LabelPool, "dev-sandbox")), ns("ai-team", LabelPool, "train-a100"), cat, Accelerators{})
	assert.Equal(t, []string{"P1"}, Rules(err))

	// A DaemonSet's pod pinned to a pool is placed node by node, as before.
	patch, _, err = MutatePod(testPod(ownedBy("DaemonSet"), nodeSelector(LabelPool, "dev-sandbox")), ns("ai-team"), cat, Accelerators{})
	require.NoError(t, err)
	assert.True(t, patch.Empty())

	name, origin := PodPoolOrigin(testPod(nodeSelector(LabelPool, "dev-sandbox")), nil)
	assert.Equal(t, "dev-sandbox", name)
	assert.Equal(t, PoolFromNodeSelector, origin)
}
