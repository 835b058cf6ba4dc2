package stress

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/nodejob"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

func readyNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{policy.LabelPool: "pool-a"}},
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

func testRun() *v1alpha1.StressRun {
	return &v1alpha1.StressRun{ObjectMeta: metav1.ObjectMeta{Name: "pool-a-1", UID: "u1"},
		Spec: v1alpha1.StressRunSpec{Pool: "pool-a", Image: "stress:1", Tests: []v1alpha1.StressTest{"npu", "hccs"},
			Timeout: &metav1.Duration{Duration: 60_000_000_000}}}
}

func TestTestPodHoldsTheNodesAcceleratorsAndIsOwnedByItsRun(t *testing.T) {
	p := TestPod(testRun(), "litepool-system", readyNode("node-1"), "hccs", policy.Accelerators{})
	assert.Equal(t, "pool-a-1-node-1-hccs", p.Name)
	assert.Equal(t, "litepool-system", p.Namespace)
	assert.Equal(t, "node-1", p.Spec.NodeName)
	assert.Equal(t, int64(60), *p.Spec.ActiveDeadlineSeconds)
	assert.Equal(t, "8", p.Spec.Containers[0].Resources.Limits.Name("huawei.com/Ascend910", resource.DecimalSI).String())
	assert.Equal(t, corev1.EnvVar{Name: "STRESS_TESTS", Value: "hccs"}, p.Spec.Containers[0].Env[0])
	assert.Equal(t, map[string]string{LabelManagedBy: "litepool", LabelComponent: Component, LabelInstance: "pool-a-1"}, p.Labels)
	assert.Equal(t, "StressRun", p.OwnerReferences[0].Kind)
	assert.True(t, *p.OwnerReferences[0].Controller)
}

// A test pod holds an extra accelerator only when the run is told it is one.
func TestTestPodHoldsExtraAcceleratorsWhenConfigured(t *testing.T) {
	n := readyNode("x1")
	n.Status.Allocatable = corev1.ResourceList{"vendor.example/xpu": resource.MustParse("4")}
	limits := TestPod(testRun(), "ns", n, "npu", policy.NewAccelerators("vendor.example/xpu")).Spec.Containers[0].Resources.Limits
	assert.Len(t, limits, 1)
	assert.Equal(t, "4", limits.Name("vendor.example/xpu", resource.DecimalSI).String())
	assert.Empty(t, TestPod(testRun(), "ns", n, "npu", policy.Accelerators{}).Spec.Containers[0].Resources.Limits)
}

// Pod names are fixed by run, node and test, and stay valid for long node names.
func TestPodNameIsDeterministicAndBounded(t *testing.T) {
	assert.Equal(t, PodName("r", "n", "npu"), PodName("r", "n", "npu"))
	long := PodName("pool-a-20261122-120000", strings.Repeat("node", 30), "storage")
	assert.LessOrEqual(t, len(long), 63)
	assert.NotEqual(t, long, PodName("pool-a-20261122-120000", strings.Repeat("node", 30), "npu"))
}

func TestPodOutcome(t *testing.T) {
	p := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: "roce port 2 down"}}}}}}
	o, code, msg := PodOutcome(p)
	assert.Equal(t, v1alpha1.StressOutcomeFailed, o)
	assert.Equal(t, int32(3), *code)
	assert.Equal(t, "exit 3 (Error): roce port 2 down", msg)
	o, code, msg = PodOutcome(&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded", Message: "Pod was active on the node longer than the specified deadline"}})
	assert.Equal(t, v1alpha1.StressOutcomeFailed, o)
	assert.Nil(t, code)
	assert.Equal(t, "DeadlineExceeded Pod was active on the node longer than the specified deadline", msg)
	o, _, _ = PodOutcome(&corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	assert.Equal(t, v1alpha1.StressOutcomeRunning, o)
}

// A test pod is node work built by nodejob: litepool's (so no drain or busy count
// takes it for a tenant's), with no host access and no token, whatever the run says.
func TestATestPodIsNodeWorkWithoutHostAccess(t *testing.T) {
	p := TestPod(testRun(), "litepool-system", readyNode("node-1"), "npu", policy.Accelerators{})
	assert.True(t, nodejob.IsNodeWork(p, "litepool-system"))
	assert.False(t, p.Spec.HostPID)
	assert.Empty(t, p.Spec.Volumes)
	assert.Nil(t, p.Spec.Containers[0].SecurityContext)
	assert.False(t, *p.Spec.AutomountServiceAccountToken)
	assert.Equal(t, "npu", p.Annotations[AnnotationTest])
	assert.Equal(t, "node-1", p.Annotations[AnnotationNode])
}
