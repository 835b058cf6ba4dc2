package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// A run that ends wakes the runs waiting for its pool, and only those: a waiting run
// starts when the pool is free, not on a timer.
func TestARunThatEndsWakesTheRunsWaitingForItsPool(t *testing.T) {
	run := func(name, pool string, phase v1alpha1.StressRunPhase) *v1alpha1.StressRun {
		return &v1alpha1.StressRun{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.StressRunSpec{Pool: pool},
			Status: v1alpha1.StressRunStatus{Phase: phase}}
	}
	ending := run("a", "p", v1alpha1.StressRunRunning)
	c := exclusiveFixture(t, ending, run("b", "p", v1alpha1.StressRunPending), run("c", "p", ""), run("d", "q", v1alpha1.StressRunPending),
		run("e", "p", v1alpha1.StressRunSucceeded))
	r := &StressReconciler{client: c}
	ended := ending.DeepCopy()
	ended.Status.Phase = v1alpha1.StressRunSucceeded
	assert.True(t, freesPool(ending, ended))
	assert.False(t, freesPool(ending, ending), "a status write of a run under way frees nothing")

	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	r.wakeWaiting(context.Background(), ended, q)
	var woken []string
	for q.Len() > 0 {
		req, _ := q.Get()
		woken = append(woken, req.Name)
		q.Done(req)
	}
	assert.ElementsMatch(t, []string{"b", "c"}, woken)
}
