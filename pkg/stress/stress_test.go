package stress

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

func readyNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Allocatable: corev1.ResourceList{"huawei.com/Ascend910": resource.MustParse("8"), "cpu": resource.MustParse("192")},
		},
	}
}

func TestSkipReason(t *testing.T) {
	n := readyNode("a")
	assert.Equal(t, "", skipReason(n, nil))
	assert.Equal(t, "busy: 2 workload pod(s): ns/a, ns/b", skipReason(n, []string{"ns/b", "ns/a"}))
	n.Spec.Unschedulable = true
	assert.Equal(t, "cordoned", skipReason(n, nil))
	n.Status.Conditions[0].Status = corev1.ConditionFalse
	assert.Equal(t, "NotReady", skipReason(n, nil))
}

func TestTestPodHoldsTheNodesAccelerators(t *testing.T) {
	p := TestPod(Options{Pool: "p", Image: "stress:1", Tests: []string{"npu", "hccs"}, Namespace: "ops", Timeout: time.Minute}, "r1", readyNode("node-1"))
	assert.Equal(t, "litepool-stress-node-1-", p.GenerateName)
	assert.Equal(t, "ops", p.Namespace)
	assert.Equal(t, "node-1", p.Spec.NodeName)
	assert.Equal(t, int64(60), *p.Spec.ActiveDeadlineSeconds)
	assert.Equal(t, "8", p.Spec.Containers[0].Resources.Limits.Name("huawei.com/Ascend910", resource.DecimalSI).String())
	assert.Equal(t, corev1.EnvVar{Name: "STRESS_TESTS", Value: "npu,hccs"}, p.Spec.Containers[0].Env[0])
	assert.Equal(t, map[string]string{LabelManagedBy: "litepool", LabelComponent: Component, LabelInstance: "r1"}, p.Labels)
}

// A test pod holds an extra accelerator only when the run is told it is one.
func TestTestPodHoldsExtraAcceleratorsWhenConfigured(t *testing.T) {
	n := readyNode("x1")
	n.Status.Allocatable = corev1.ResourceList{"vendor.example/xpu": resource.MustParse("4")}
	o := Options{Pool: "p", Image: "stress:1", Tests: []string{"npu"}, Accelerators: policy.NewAccelerators("vendor.example/xpu")}
	limits := TestPod(o, "r1", n).Spec.Containers[0].Resources.Limits
	assert.Len(t, limits, 1)
	assert.Equal(t, "4", limits.Name("vendor.example/xpu", resource.DecimalSI).String())
	o.Accelerators = policy.Accelerators{}
	assert.Empty(t, TestPod(o, "r1", n).Spec.Containers[0].Resources.Limits)
}

func TestValidateTests(t *testing.T) {
	assert.NoError(t, ValidateTests([]string{"npu", "roce"}))
	assert.EqualError(t, ValidateTests([]string{"npu", "gpu"}), `[T1] unknown stress test "gpu": choose from npu, hccs, roce, storage`)
	assert.EqualError(t, ValidateTests(nil), "[T1] no stress tests given: choose from npu, hccs, roce, storage")
}

func TestFailureDetail(t *testing.T) {
	p := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: "roce port 2 down"}}}}}}
	assert.Equal(t, "exit 3 (Error): roce port 2 down", failureDetail(p))
	assert.Equal(t, "DeadlineExceeded Pod was active on the node longer than the specified deadline",
		failureDetail(&corev1.Pod{Status: corev1.PodStatus{Reason: "DeadlineExceeded", Message: "Pod was active on the node longer than the specified deadline"}}))
}
