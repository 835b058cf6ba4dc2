package policy

import (
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// stateOrder is the path a node takes through a driver upgrade.
var stateOrder = []UpgradeState{UpgradeRequired, UpgradeCordon, UpgradeWaitJobs, UpgradeDrain,
	UpgradeInstall, UpgradeValidate, UpgradeUncordon, UpgradeDone}

// UpgradeStates is the success path, in order.
func UpgradeStates() []UpgradeState { return append([]UpgradeState(nil), stateOrder...) }

// NextUpgradeState is the state after s on the success path; done and failed have none.
func NextUpgradeState(s UpgradeState) (UpgradeState, bool) {
	for i, st := range stateOrder[:len(stateOrder)-1] {
		if st == s {
			return stateOrder[i+1], true
		}
	}
	return "", false
}

// ValidUpgradeState says whether s is a state of the machine.
func ValidUpgradeState(s UpgradeState) bool {
	return s == UpgradeFailed || s == UpgradeAborted || stateIndex(s) >= 0
}

func stateIndex(s UpgradeState) int {
	for i, st := range stateOrder {
		if st == s {
			return i
		}
	}
	return -1
}

// CheckUpgradeTransition is rule U1: a node moves one step forward on the success path;
// any state but done may fail; a failed node starts over only when an operator re-marks
// it (failed → upgrade-required, `upgrade resume --retry-failed`); a done or unmarked
// node may be marked upgrade-required for a new rollout; a node that has not started
// leaves an aborted rollout (upgrade-required → aborted). Nothing else: in particular no
// step is skipped, so a node is never uncordoned before its driver was validated.
func CheckUpgradeTransition(from, to UpgradeState) error {
	if !ValidUpgradeState(to) {
		return Violationf("U1", "unknown upgrade state %q", to)
	}
	if from != "" && !ValidUpgradeState(from) {
		return Violationf("U1", "unknown upgrade state %q", from)
	}
	switch {
	case to == UpgradeRequired && (from == "" || from == UpgradeDone || from == UpgradeFailed):
		return nil
	case to == UpgradeFailed && from != "" && from != UpgradeDone && from != UpgradeFailed && from != UpgradeAborted:
		return nil
	case to == UpgradeAborted && from == UpgradeRequired:
		return nil
	}
	if next, ok := NextUpgradeState(from); ok && next == to {
		return nil
	}
	return Violationf("U1", "a node cannot go from upgrade state %q to %q: states follow %s, any step may fail, and a failed node is re-marked upgrade-required",
		orEmpty(from), to, upgradePath())
}

func orEmpty(s UpgradeState) string {
	if s == "" {
		return "(none)"
	}
	return string(s)
}

func upgradePath() string {
	var parts []string
	for _, s := range stateOrder {
		parts = append(parts, string(s))
	}
	return strings.Join(parts, " → ")
}

// UpgradeStarted says whether a node has begun its upgrade (past upgrade-required and
// not finished): such a node is finished before anything new starts.
func UpgradeStarted(s UpgradeState) bool {
	i := stateIndex(s)
	return i > 0 && s != UpgradeDone
}

// ParseMaxUnavailable reads --max-unavailable: a count ("2") or a percentage of the
// pool's nodes ("25%").
func ParseMaxUnavailable(s string) (intstr.IntOrString, error) {
	s = strings.TrimSpace(s)
	if strings.HasSuffix(s, "%") {
		n, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
		if err != nil || n < 1 || n > 100 {
			return intstr.IntOrString{}, Violationf("U2", "invalid --max-unavailable %q: a percentage must be 1%%-100%%", s)
		}
		return intstr.FromString(s), nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return intstr.IntOrString{}, Violationf("U2", "invalid --max-unavailable %q: want a node count of at least 1 or a percentage such as 25%%", s)
	}
	return intstr.FromInt32(int32(n)), nil
}

// MaxUnavailableNodes turns --max-unavailable into a node count for a pool of total
// nodes, as NVIDIA's upgrade library does: a percentage is rounded up, and the result
// is at least 1 so that a rollout can always make progress.
func MaxUnavailableNodes(v intstr.IntOrString, total int) int {
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, total, true)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// UpgradeNode is what the planner knows of one node of a pool.
type UpgradeNode struct {
	Name  string
	State UpgradeState // "" when the node is not part of the rollout
	// Unavailable: cordoned or NotReady, whoever did it. Such nodes count against
	// --max-unavailable.
	Unavailable bool
	Ready       bool
	// Busy: runs workload pods. Idle nodes go first.
	Busy bool
}

// WavePlan is what a rollout does next.
type WavePlan struct {
	// Continue are nodes already in an upgrade (a rollout was interrupted): finished first.
	Continue []string
	// Start are nodes to begin now.
	Start []string
	// Waiting are marked nodes that cannot start now: NotReady ones, nodes waiting for
	// the canary, and nodes for which max-unavailable leaves no slot.
	Waiting []string
	// NotReady are the waiting nodes that are NotReady (an upgrade would only time out
	// on them): they wait for a later resume rather than stall the rollout.
	NotReady []string
	// NoSlot are the waiting nodes that could start but for max-unavailable.
	NoSlot []string
	// Unavailable are the pool's nodes that count against max-unavailable now.
	Unavailable []string
	// Failed are nodes in state failed: the rollout stops.
	Failed []string
	// Done and Total count the rollout's nodes.
	Done, Total int
}

// Finished says whether nothing is left to do now.
func (p WavePlan) Finished() bool { return len(p.Continue) == 0 && len(p.Start) == 0 }

// Stalled says whether nodes that could be upgraded wait only because max-unavailable
// is taken by nodes that are already unavailable (cordoned or NotReady by someone else):
// nothing is running that would free a slot.
func (p WavePlan) Stalled() bool {
	return p.Finished() && len(p.Failed) == 0 && len(p.NoSlot) > 0
}

// tally counts n into the plan's figures (Unavailable, Total, Done, Failed, Continue)
// and says whether the rollout holds it at all, and whether it waits to start.
func (p *WavePlan) tally(n UpgradeNode) (inRollout, waits bool) {
	if n.Unavailable || !n.Ready {
		p.Unavailable = append(p.Unavailable, n.Name)
	}
	if n.State == "" || n.State == UpgradeAborted {
		return false, false
	}
	p.Total++
	switch {
	case n.State == UpgradeDone:
		p.Done++
	case n.State == UpgradeFailed:
		p.Failed = append(p.Failed, n.Name)
	case UpgradeStarted(n.State):
		p.Continue = append(p.Continue, n.Name)
	default:
		return true, true
	}
	return true, false
}

// PlanUpgradeWave decides the next wave (rule U2): nodes already in progress are
// finished; a failed node stops everything; the canary, when given, goes alone and
// first; otherwise pending nodes start while the pool's unavailable nodes (cordoned or
// NotReady for any reason, in-progress upgrades included) stay within maxUnavailable. A
// pending node that is already unavailable starts without taking a slot. Idle nodes go
// before busy ones, then by name.
func PlanUpgradeWave(nodes []UpgradeNode, maxUnavailable int, canary string) WavePlan {
	var plan WavePlan
	var pending []UpgradeNode
	canaryDone := true
	for _, n := range nodes {
		if n.Name == canary && n.State != "" && n.State != UpgradeDone {
			canaryDone = false
		}
	}
	for _, n := range nodes {
		if _, waits := plan.tally(n); waits {
			pending = append(pending, n)
		}
	}
	unavailable := len(plan.Unavailable)
	if len(plan.Failed) > 0 {
		plan.Continue, plan.Waiting = nil, upgradeNodeNames(pending)
		return plan
	}
	sort.SliceStable(pending, func(i, j int) bool {
		a, b := pending[i], pending[j]
		if a.Name == canary || b.Name == canary {
			return a.Name == canary
		}
		if a.Unavailable != b.Unavailable {
			return a.Unavailable
		}
		if a.Busy != b.Busy {
			return !a.Busy
		}
		return a.Name < b.Name
	})
	slots := maxUnavailable - unavailable
	for _, n := range pending {
		switch {
		case !n.Ready:
			plan.Waiting = append(plan.Waiting, n.Name)
			plan.NotReady = append(plan.NotReady, n.Name)
		case !canaryDone && (n.Name != canary || len(plan.Continue) > 0 || len(plan.Start) > 0):
			plan.Waiting = append(plan.Waiting, n.Name)
		case n.Unavailable:
			plan.Start = append(plan.Start, n.Name)
		case slots > 0:
			plan.Start = append(plan.Start, n.Name)
			slots--
		default:
			plan.Waiting = append(plan.Waiting, n.Name)
			plan.NoSlot = append(plan.NoSlot, n.Name)
		}
	}
	return plan
}

func upgradeNodeNames(nodes []UpgradeNode) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	return out
}

// PredictUpgradeWaves lists the waves a rollout will run if every node succeeds (for
// --dry-run): each wave's nodes become available again before the next starts.
func PredictUpgradeWaves(nodes []UpgradeNode, maxUnavailable int, canary string) (waves [][]string, waiting []string) {
	return predictWaves(nodes, func(cur []UpgradeNode) WavePlan { return PlanUpgradeWave(cur, maxUnavailable, canary) })
}

// predictWaves runs plan until it starts nothing more or a node fails, taking each
// wave's nodes as done before the next.
func predictWaves(nodes []UpgradeNode, plan func([]UpgradeNode) WavePlan) (waves [][]string, waiting []string) {
	cur := append([]UpgradeNode(nil), nodes...)
	for {
		p := plan(cur)
		wave := append(append([]string{}, p.Continue...), p.Start...)
		if len(wave) == 0 || len(p.Failed) > 0 {
			return waves, p.Waiting
		}
		waves = append(waves, wave)
		in := map[string]bool{}
		for _, n := range wave {
			in[n] = true
		}
		for i := range cur {
			if in[cur[i].Name] {
				cur[i].State, cur[i].Unavailable = UpgradeDone, false
			}
		}
	}
}

// ValidateDriverVersion checks a target version: one label value (it is compared with
// the node's driver-version label).
func ValidateDriverVersion(v string) error { return validateDriverVersion("--version", v) }

// validateDriverVersion is ValidateDriverVersion for a version given as what (a flag or
// a field).
func validateDriverVersion(what, v string) error {
	if v == "" {
		return Violationf("U2", "%s is required: the driver version to install (as the node's driver-version label will read it)", what)
	}
	if err := ValidateLabel(LabelDriverVersion, v); err != nil {
		return Violationf("U2", "invalid %s %q: %s", what, v, messageOf(err))
	}
	return nil
}

// RolloutHold is a node of another unfinished driver rollout, as rule U4 reads it.
type RolloutHold struct {
	Rollout, Node, State string
}

// CheckNotInAnotherRollout is rule U4: a node is in at most one unfinished driver
// rollout. holds are the nodes of the other rollouts that have not ended; a node of
// theirs that is done or aborted no longer holds it.
func CheckNotInAnotherRollout(need []string, holds []RolloutHold) error {
	for _, h := range holds {
		if h.State == string(UpgradeDone) || h.State == string(UpgradeAborted) || !slices.Contains(need, h.Node) {
			continue
		}
		return Violationf("U4", "node %q is already in driver rollout %s (state %s): finish it with `kubectl litepool upgrade resume %s` or stop it with `kubectl litepool upgrade abort %s` first",
			h.Node, h.Rollout, h.State, h.Rollout, h.Rollout)
	}
	return nil
}
