package kueue

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// A Job whose pod template names no pool (in a namespace with no default pool), queued
// to an exclusive pool's queue: Kueue admits it and its flavor pins the pods to the
// pool with the pool's toleration; litepool's webhook labels them with the pool
// (entry pods-node-selector.runwhere.ai), judges them as the pool's pods, and they run
// on the pool's nodes. Before, P6 refused them and the Job held its quota with no pod.
func TestAnUnlabelledJobRunsOnAnExclusivePool(t *testing.T) {
	const pool, ns = "qnolabel", "q-nolabel"
	createNamespace(t, ns, nil)
	nodes := queuePool(t, pool, 1, ns)
	waitQuota(t, pool, "8")

	createJob(t, gpuJob(ns, "plain", pool, 1, 8, map[string]string{policy.LabelWorkloadType: "training"}, false))
	waitAdmitted(t, ns, "plain")
	for _, pod := range waitJobPodsRunning(t, ns, "plain", 1) {
		assert.Equal(t, pool, pod.Labels[policy.LabelPool], "labelled with the pool Kueue pinned it to")
		assert.Contains(t, nodes, pod.Spec.NodeName)
	}
	waitJobDone(t, ns, "plain")
}
