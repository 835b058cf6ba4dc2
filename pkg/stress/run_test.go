package stress

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunRoundTripsAndGivesTheRunnerItsOptions(t *testing.T) {
	run := Run{ID: "20261123-001500", Image: "stress:1", Command: []string{"sh", "-c", "true"}, Tests: []string{"npu", "hccs"},
		Namespace: "ai", Timeout: "90s", KeepPods: true, State: RunPending}
	back, err := DecodeRun(run.Encode())
	require.NoError(t, err)
	assert.Equal(t, run, back)
	o, err := back.Options("p")
	require.NoError(t, err)
	assert.Equal(t, Options{Pool: "p", Image: "stress:1", Command: []string{"sh", "-c", "true"}, Tests: []string{"npu", "hccs"},
		Namespace: "ai", Timeout: 90 * time.Second, KeepPods: true, RunID: "20261123-001500"}, o)

	run.Timeout = "soon"
	_, err = run.Options("p")
	assert.ErrorContains(t, err, `timeout "soon"`)
	_, err = DecodeRun("{")
	assert.Error(t, err)
}

func TestSummarizeCountsResults(t *testing.T) {
	run := Run{FailedNodes: []string{"stale"}}
	run.Summarize([]NodeResult{{Node: "a", Result: Passed}, {Node: "b", Result: Failed}, {Node: "c", Result: Skipped}, {Node: "d", Result: Passed}})
	assert.Equal(t, 2, run.Passed)
	assert.Equal(t, 1, run.Skipped)
	assert.Equal(t, []string{"b"}, run.FailedNodes)
	assert.False(t, run.Finished())
	run.State = RunDone
	assert.True(t, run.Finished())
}
