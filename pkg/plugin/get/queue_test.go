package get

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
)

// The queue's columns show only in -o wide, only when some pool has a queue; a pool
// without one (or whose queue is not written yet) shows <none>.
func TestPoolTableQueueColumns(t *testing.T) {
	pools := samplePools()
	assert.NotContains(t, printPools(t, "wide", false, pools), "QUEUE")

	other := kit.SynthesizedPool("infer")
	queued := pools[0]
	queued.Spec.Queue = &v1alpha1.QueueSpec{Scheduler: v1alpha1.QueueKueue}
	queued.Status.Queue = &v1alpha1.QueueStatus{Scheduler: v1alpha1.QueueKueue, Quota: 16, Used: 8, Admitted: 1, Pending: 2}
	waiting := kit.SynthesizedPool("waiting")
	waiting.ObjectMeta = metav1.ObjectMeta{Name: "waiting"}
	waiting.Spec.Queue = &v1alpha1.QueueSpec{}
	out := printPools(t, "wide", false, []v1alpha1.Pool{queued, other, waiting})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	assert.Regexp(t, `QUEUE QUOTA\s+QUEUE ADMITTED\s+QUEUE PENDING$`, lines[0])
	assert.Regexp(t, `8/16\s+1\s+2$`, lines[1])
	assert.Regexp(t, `<none>\s+<none>\s+<none>$`, lines[2])
	assert.Regexp(t, `<none>\s+<none>\s+<none>$`, lines[3])
	assert.NotContains(t, printPools(t, "", false, []v1alpha1.Pool{queued}), "QUEUE", "not in the default table")
}

// The QUEUE QUOTA cell: the accelerator's used/quota, the DRA devices' for a pool of
// devices only, and both (accelerator first) for a pool with both.
func TestQueueCellsDevices(t *testing.T) {
	p := &v1alpha1.Pool{}
	assert.Equal(t, []any{"<none>", "<none>", "<none>"}, queueCells(p))
	p.Status.Queue = &v1alpha1.QueueStatus{Resource: "nvidia.com/gpu", Used: 8, Quota: 16, Admitted: 1, Pending: 2}
	assert.Equal(t, []any{"8/16", "1", "2"}, queueCells(p))
	p.Status.Queue.DeviceResource, p.Status.Queue.DeviceUsed, p.Status.Queue.DeviceQuota = "example.com/gpu", 4, 24
	assert.Equal(t, "8/16,4/24", queueCells(p)[0])
	p.Status.Queue.Resource = ""
	assert.Equal(t, "4/24", queueCells(p)[0])
}
