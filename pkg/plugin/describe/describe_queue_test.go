package describe

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

func describeQueue(t *testing.T, pool *v1alpha1.Pool) string {
	t.Helper()
	var out bytes.Buffer
	assert.NoError(t, tabbed(&out, func(w prefixWriter) { describePoolQueue(w, pool) }))
	return out.String()
}

func TestDescribePoolQueue(t *testing.T) {
	pool := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train"}}
	assert.Empty(t, describeQueue(t, pool), "no queue: no line")

	pool.Spec.Queue = &v1alpha1.QueueSpec{Scheduler: v1alpha1.QueueKueue}
	pool.Status.Conditions = []metav1.Condition{{Type: "Queue", Status: metav1.ConditionFalse, Reason: "SchedulerNotInstalled",
		Message: "Kueue is not installed: the cluster does not serve kueue.x-k8s.io/v1beta2 ResourceFlavor; litepool changed nothing"}}
	assert.Equal(t, "Queue:  <none> (Kueue is not installed: the cluster does not serve kueue.x-k8s.io/v1beta2 ResourceFlavor; litepool changed nothing)\n",
		describeQueue(t, pool))

	pool.Status.Queue = &v1alpha1.QueueStatus{Scheduler: v1alpha1.QueueKueue, ClusterQueue: "train", Resource: "nvidia.com/gpu",
		Quota: 16, SchedulableNodes: 2, Used: 8, Admitted: 1, Pending: 1, Namespaces: []string{"team-a", "team-b"}}
	pool.Status.Conditions = []metav1.Condition{{Type: "Queue", Status: metav1.ConditionFalse, Reason: "NotOwned",
		Message: "LocalQueue team-c/train exists and is not pool \"train\"'s"}}
	got := describeQueue(t, pool)
	assert.Equal(t, `Queue:            Kueue ClusterQueue train: quota 16 nvidia.com/gpu from 2 schedulable nodes
Queue Workloads:  1 admitted (8 nvidia.com/gpu used), 1 pending
Local Queues:     team-a,team-b
Queue Problem:    LocalQueue team-c/train exists and is not pool "train"'s
`, got)

	pool.Spec.Queue.Devices = &v1alpha1.QueueDevices{Resource: "example.com/gpu", DeviceClassNames: []string{"gpu.example.com"}}
	pool.Status.Queue.DeviceResource, pool.Status.Queue.DeviceQuota = "example.com/gpu", 24
	pool.Status.Conditions = nil
	assert.Contains(t, describeQueue(t, pool), "Queue Devices:    quota 24 example.com/gpu (DRA devices of DeviceClasses gpu.example.com)\n")

	pool.Status.Queue.Shares = []v1alpha1.QueueShareStatus{{Namespace: "team-a", ClusterQueue: "train-team-a", Quota: 8, Used: 16},
		{Namespace: "team-b", ClusterQueue: "train-team-b", Quota: 4}}
	assert.Contains(t, describeQueue(t, pool), "Queue Shares:     team-a 8 (16 used, ClusterQueue train-team-a), team-b 4 (0 used, ClusterQueue train-team-b)\n")
}
