package get

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
)

// addHealthColumn appends HEALTH: each node's place in its pool's health loop
// (status.nodeHealth of the Pools; docs/health.md), "State (reason)", or <none> for a
// node the loop holds nothing about. Like the MIG column it is shown only when one of
// the listed nodes has something to show.
func (o *GetNodesOptions) addHealthColumn(ctx context.Context, t *metav1.Table) {
	health := map[string]string{}
	if pools, err := o.clients.Pools.List(ctx); err == nil {
		for _, p := range pools {
			for _, e := range p.Status.NodeHealth {
				cell := string(e.State)
				if e.Reason != "" {
					cell += " (" + e.Reason + ")"
				}
				health[e.Node] = cell
			}
		}
	}
	shown := false
	for i := range t.Rows {
		if name, _ := t.Rows[i].Cells[0].(string); health[name] != "" {
			shown = true
		}
	}
	if !shown {
		return
	}
	t.ColumnDefinitions = append(t.ColumnDefinitions, kit.Column("Health", "string", false))
	for i := range t.Rows {
		name, _ := t.Rows[i].Cells[0].(string)
		t.Rows[i].Cells = append(t.Rows[i].Cells, kit.None(health[name]))
	}
}
