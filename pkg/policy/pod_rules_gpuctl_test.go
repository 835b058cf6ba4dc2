package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// gpuctlCatalog adds gpuctl's four-pool plan to the test catalog.
func gpuctlCatalog() catalog {
	cat := testCatalog()
	for name, typ := range map[string]v1alpha1.PoolType{
		"training-pool": v1alpha1.PoolTypeTraining, "inference-pool": v1alpha1.PoolTypeInference,
		"dev-pool": v1alpha1.PoolTypeDevelopment, "compute-pool": v1alpha1.PoolTypeCompute,
	} {
		p := pool(name, "A10-24G", 1)
		p.Spec.Type = typ
		cat.pools[name] = PoolInfo{Name: name, Object: p, Members: 1, GPUTypes: []string{"A10-24G"}}
	}
	return cat
}

func TestMutatePodGpuctlJobTypes(t *testing.T) {
	tests := []struct {
		name, pool, jobType, owner string
		wantErr                    string
		warnings                   []string
	}{
		{name: "notebook StatefulSet in a Development pool", pool: "dev-pool", jobType: "notebook", owner: "StatefulSet"},
		{name: "notebook in a Training pool (it takes development work)", pool: "training-pool", jobType: "notebook", owner: "StatefulSet"},
		{name: "training Job in a Training pool", pool: "training-pool", jobType: "training", owner: "Job"},
		{name: "inference ReplicaSet in an Inference pool", pool: "inference-pool", jobType: "inference", owner: "ReplicaSet"},
		{name: "compute ReplicaSet in a Compute pool: job-type beats the owner", pool: "compute-pool", jobType: "compute", owner: "ReplicaSet"},
		{name: "inference in a Development pool is cross-type", pool: "dev-pool", jobType: "inference", owner: "ReplicaSet",
			wantErr: `[P3] pool "dev-pool" (type Development) does not accept inference work (label runwhere.ai/job-type=inference): it accepts development; use a pool that takes inference work`},
		{name: "notebook in an Inference pool is cross-type", pool: "inference-pool", jobType: "notebook", owner: "StatefulSet",
			wantErr: `[P3] pool "inference-pool" (type Inference) does not accept development work (label runwhere.ai/job-type=notebook): it accepts inference; use a pool that takes development work`},
		{name: "unknown job type", pool: "training-pool", jobType: "batch", owner: "Job",
			wantErr: `[P3] label runwhere.ai/job-type (gpuctl's job type): unknown job type "batch": must be one of compute, inference, notebook, training; or set label runwhere.ai/workload-type (training, inference, development, compute)`},
		{name: "unlabelled StatefulSet is no proof of inference", pool: "dev-pool", owner: "StatefulSet",
			warnings: []string{`[P3] pod declares no workload type: set label runwhere.ai/workload-type to one that pool "dev-pool" accepts (development)`}},
	}
	cat := gpuctlCatalog()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []podOpt{podLabels(LabelPool, tt.pool, LabelPriority, "medium", LabelNamespace, "ai-team"), ownedBy(tt.owner)}
			if tt.jobType != "" {
				opts = append(opts, podLabels(LabelJobType, tt.jobType))
			}
			_, warnings, err := MutatePod(testPod(opts...), ns("ai-team"), cat, Accelerators{})
			assert.Equal(t, tt.warnings, warnings)
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
		})
	}
}

func TestWorkloadTypeOf(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want v1alpha1.WorkloadType
	}{
		{"workload-type wins over job-type", testPod(podLabels(LabelWorkloadType, "training", LabelJobType, "notebook")), v1alpha1.WorkloadTraining},
		{"notebook is development", testPod(podLabels(LabelJobType, "notebook"), ownedBy("StatefulSet")), v1alpha1.WorkloadDevelopment},
		{"compute is compute", testPod(podLabels(LabelJobType, "compute"), ownedBy("ReplicaSet")), v1alpha1.WorkloadCompute},
		{"training is training", testPod(podLabels(LabelJobType, "training")), v1alpha1.WorkloadTraining},
		{"inference is inference", testPod(podLabels(LabelJobType, "inference")), v1alpha1.WorkloadInference},
		{"owner Job, last resort", testPod(ownedBy("Job")), v1alpha1.WorkloadTraining},
		{"owner ReplicaSet, last resort", testPod(ownedBy("ReplicaSet")), v1alpha1.WorkloadInference},
		{"owner StatefulSet says nothing", testPod(ownedBy("StatefulSet")), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, WorkloadTypeOf(tt.pod)) })
	}
}

// gpuctl pods ask for a model with the nodeSelector runwhere.ai/gpuType.
func TestMutatePodGpuctlGPUTypeSelector(t *testing.T) {
	cat := gpuctlCatalog()
	base := []podOpt{podLabels(LabelPool, "training-pool", LabelJobType, "training")}
	_, _, err := MutatePod(testPod(append(base, nodeSelector(LabelPool, "training-pool", LabelGPUTypeCamel, "A100-80G"))...), ns("ai-team"), cat, Accelerators{})
	assert.EqualError(t, err, `[P5] nodeSelector runwhere.ai/gpuType=A100-80G does not match pool "training-pool", whose nodes are runwhere.ai/gpu-type=A10-24G: ask for runwhere.ai/gpuType=A10-24G or use a pool of the gpu-type you need`)
	patch, _, err := MutatePod(testPod(append(base, nodeSelector(LabelPool, "training-pool", LabelGPUTypeCamel, "A10-24G"))...), ns("ai-team"), cat, Accelerators{})
	require.NoError(t, err)
	assert.True(t, patch.Empty(), "the pod already selects its pool: %+v", patch)
}

// gpuctl's default-pool pods: label default plus a required DoesNotExist affinity.
func TestMutatePodGpuctlDefaultPool(t *testing.T) {
	pod := testPod(podLabels(LabelPool, DefaultPool, LabelJobType, "training"), affinity(LabelPool, corev1.NodeSelectorOpDoesNotExist))
	patch, warnings, err := MutatePod(pod, ns("ai-team"), gpuctlCatalog(), Accelerators{})
	require.NoError(t, err)
	assert.Empty(t, warnings)
	assert.True(t, patch.Empty())
}

// Issue 9: an empty pool label is no way out of the namespace's default pool.
func TestMutatePodEmptyPoolLabelIsAbsent(t *testing.T) {
	cat := testCatalog()
	pod := testPod(podLabels(LabelPool, "", LabelWorkloadType, "training"))
	patch, _, err := MutatePod(pod, ns("ai-team", LabelPool, "train-a100"), cat, Accelerators{})
	require.NoError(t, err)
	assert.Equal(t, PodPatch{Labels: map[string]string{LabelPool: "train-a100"}, NodeSelector: map[string]string{LabelPool: "train-a100"}}, patch)

	_, _, err = MutatePod(testPod(podLabels(LabelPool, "", LabelWorkloadType, "inference")), ns("ai-team", LabelPool, "train-a100"), cat, Accelerators{})
	assert.ErrorContains(t, err, `[P3] pool "train-a100" (type Training) does not accept inference work`)
	_, _, err = MutatePod(testPod(podLabels(LabelPool, "", LabelWorkloadType, "development")), ns("ai-team", LabelPool, "dev-sandbox"), cat, Accelerators{})
	assert.ErrorContains(t, err, `[P4] namespace "ai-team" may not use pool "dev-sandbox"`)
}

// Issue 9: a container asking for two accelerator resources is judged on all of them,
// the same way every time (map order once picked one at random).
func TestCheckPodAcceleratorJudgesEveryResource(t *testing.T) {
	pod := testPod(podLabels(LabelPool, "train-a100", LabelWorkloadType, "training"))
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{
		"nvidia.com/gpu": resource.MustParse("1"), "huawei.com/Ascend910": resource.MustParse("1"), "amd.com/gpu": resource.MustParse("1"),
	}
	want := "[P5] pod requests amd.com/gpu but pool \"train-a100\" provides nvidia.com/gpu: request nvidia.com/gpu or use a pool of amd.com/gpu nodes\n" +
		"[P5] pod requests huawei.com/Ascend910 but pool \"train-a100\" provides nvidia.com/gpu: request nvidia.com/gpu or use a pool of huawei.com/Ascend910 nodes"
	for range 30 {
		_, _, err := MutatePod(pod, nil, testCatalog(), Accelerators{})
		require.EqualError(t, err, want)
	}
	assert.Equal(t, []corev1.ResourceName{"amd.com/gpu", "huawei.com/Ascend910", "nvidia.com/gpu"}, Accelerators{}.PodAcceleratorResources(pod))
}
