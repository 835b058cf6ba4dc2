package controller

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
)

// A rollout under way reports a deadline for each node in a timed step; a finished one
// reports none, and its old series go.
func TestRolloutDeadlines(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC))
	drain := metav1.Duration{Duration: 7 * time.Minute}
	ro := &v1alpha1.DriverRollout{Spec: v1alpha1.DriverRolloutSpec{Pool: "training", DrainTimeout: &drain}}
	ro.Status.Phase = v1alpha1.RolloutProgressing
	ro.Status.Nodes = []v1alpha1.DriverRolloutNode{
		{Name: "gpu-1", State: "drain", Since: &since},
		{Name: "gpu-2", State: "upgrade-required"}, // no timeout: no series
		{Name: "gpu-3", State: "done", Since: &since},
	}
	recordRolloutDeadlines("r1", ro, upgrade.Active(ro))
	assert.Equal(t, 1, testutil.CollectAndCount(rolloutStepDeadline))
	assert.Equal(t, float64(since.Add(7*time.Minute).Unix()),
		testutil.ToFloat64(rolloutStepDeadline.WithLabelValues("r1", "training", "gpu-1", "drain")))

	ro.Status.Phase = v1alpha1.RolloutSucceeded
	recordRolloutDeadlines("r1", ro, upgrade.Active(ro))
	assert.Equal(t, 0, testutil.CollectAndCount(rolloutStepDeadline))
}
