package stress

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// AnnotationRun on a Pool object records a stress run handed to the in-cluster
// controller (`kubectl litepool stress run` when the controller runs): what to run, and
// how far it got. It lives on the Pool so that it outlives the plugin and any leader.
const AnnotationRun = policy.Prefix + "stress-run"

// States of a recorded run. Pending → Running (claimed by one leader, with an update
// that fails on a concurrent change) → Done; a run found Running by a leader that did
// not start it was cut short by a leader change and becomes Interrupted: it is never
// run twice.
const (
	RunPending     = "Pending"
	RunRunning     = "Running"
	RunDone        = "Done"
	RunInterrupted = "Interrupted"
)

// Run is a stress run recorded on its Pool.
type Run struct {
	ID        string   `json:"id"`
	Image     string   `json:"image"`
	Command   []string `json:"command,omitempty"`
	Tests     []string `json:"tests"`
	Namespace string   `json:"namespace"`
	Timeout   string   `json:"timeout"`
	KeepPods  bool     `json:"keepPods,omitempty"`

	State   string `json:"state"`
	Holder  string `json:"holder,omitempty"` // the controller replica that runs it
	Message string `json:"message,omitempty"`
	// Results, once Done: counts and the nodes that failed (each node's own result is
	// in its runwhere.ai/stress-result annotation).
	Passed      int      `json:"passed,omitempty"`
	Skipped     int      `json:"skipped,omitempty"`
	FailedNodes []string `json:"failedNodes,omitempty"`
}

// Finished: the run will not change any more.
func (r Run) Finished() bool { return r.State == RunDone || r.State == RunInterrupted }

// Encode is the annotation value.
func (r Run) Encode() string {
	b, _ := json.Marshal(r)
	return string(b)
}

// DecodeRun reads the annotation value.
func DecodeRun(s string) (Run, error) {
	var r Run
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return Run{}, fmt.Errorf("%s: %w", AnnotationRun, err)
	}
	return r, nil
}

// Options are the Runner's options for the run on pool.
func (r Run) Options(pool string) (Options, error) {
	timeout, err := time.ParseDuration(r.Timeout)
	if err != nil {
		return Options{}, fmt.Errorf("stress run %s: timeout %q: %w", r.ID, r.Timeout, err)
	}
	return Options{Pool: pool, Image: r.Image, Command: r.Command, Tests: r.Tests, Namespace: r.Namespace,
		Timeout: timeout, KeepPods: r.KeepPods, RunID: r.ID}, nil
}

// Summarize fills the results of a finished run.
func (r *Run) Summarize(results []NodeResult) {
	r.Passed, r.Skipped, r.FailedNodes = 0, 0, nil
	for _, res := range results {
		switch res.Result {
		case Passed:
			r.Passed++
		case Skipped:
			r.Skipped++
		case Failed:
			r.FailedNodes = append(r.FailedNodes, res.Node)
		}
	}
}
