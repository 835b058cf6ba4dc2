package get

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
)

// queueColumns head the -o wide columns of a pool's scheduler queue (spec.queue,
// docs/queueing.md), shown only when some pool has one: the quota the controller wrote
// (used/quota; a pool with both an accelerator and DRA devices shows both, the
// accelerator's first) and what the scheduler says is admitted and waits.
var queueColumns = []metav1.TableColumnDefinition{
	kit.Column("Queue Quota", "string", true),
	kit.Column("Queue Admitted", "string", true),
	kit.Column("Queue Pending", "string", true),
}

// withQueues adds the queue columns to the table of `get pools`, whose rows are pools.
func withQueues(t *metav1.Table, pools []v1alpha1.Pool) {
	if !slices.ContainsFunc(pools, func(p v1alpha1.Pool) bool { return p.Spec.Queue != nil || p.Status.Queue != nil }) {
		return
	}
	t.ColumnDefinitions = append(t.ColumnDefinitions, queueColumns...)
	for i := range pools {
		t.Rows[i].Cells = append(t.Rows[i].Cells, queueCells(&pools[i])...)
	}
}

func queueCells(p *v1alpha1.Pool) []any {
	q := p.Status.Queue
	if q == nil {
		return []any{"<none>", "<none>", "<none>"}
	}
	quota := fmt.Sprintf("%d/%d", q.Used, q.Quota)
	switch {
	case q.DeviceResource != "" && q.Resource == "":
		quota = fmt.Sprintf("%d/%d", q.DeviceUsed, q.DeviceQuota)
	case q.DeviceResource != "":
		quota += fmt.Sprintf(",%d/%d", q.DeviceUsed, q.DeviceQuota)
	}
	return []any{quota, fmt.Sprint(q.Admitted), fmt.Sprint(q.Pending)}
}
