package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/health"
	"github.com/runwhere-ai/litepool/pkg/podindex"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// A pod's change wakes the pool of its node only while the node is quarantined (a
// drain waits for its pods there); a pod on a node in service, or on no node, wakes
// nothing.
func TestAPodOnAQuarantinedNodeWakesItsPool(t *testing.T) {
	c := exclusiveFixture(t, labelledNode("out", "p", policy.QuarantineTaint(policy.ReasonHeldByHand)), labelledNode("in", "p"))
	r := &HealthReconciler{Reconciler: health.Reconciler{Client: c}}
	ctx := context.Background()
	pod := func(node string) *podindex.Entry { return &podindex.Entry{NodeName: node} }
	assert.Equal(t, []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "p"}}}, r.poolOfPod(ctx, pod("out")))
	assert.Empty(t, r.poolOfPod(ctx, pod("in")))
	assert.Empty(t, r.poolOfPod(ctx, pod("")))
	assert.Empty(t, r.poolOfPod(ctx, pod("gone")))
}
