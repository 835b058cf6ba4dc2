package policy

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckUpgradeTransition(t *testing.T) {
	ok := [][2]UpgradeState{
		{"", UpgradeRequired}, {UpgradeDone, UpgradeRequired}, {UpgradeFailed, UpgradeRequired},
		{UpgradeRequired, UpgradeCordon}, {UpgradeCordon, UpgradeWaitJobs}, {UpgradeWaitJobs, UpgradeDrain},
		{UpgradeDrain, UpgradeInstall}, {UpgradeInstall, UpgradeValidate}, {UpgradeValidate, UpgradeUncordon},
		{UpgradeUncordon, UpgradeDone}, {UpgradeValidate, UpgradeFailed}, {UpgradeRequired, UpgradeFailed},
	}
	for _, tr := range ok {
		assert.NoError(t, CheckUpgradeTransition(tr[0], tr[1]), "%s → %s", tr[0], tr[1])
	}
	bad := map[[2]UpgradeState]string{
		{UpgradeValidate, UpgradeDone}:    `[U1] a node cannot go from upgrade state "validate" to "done": states follow upgrade-required → cordon → wait-for-jobs → drain → install → validate → uncordon → done, any step may fail, and a failed node is re-marked upgrade-required`,
		{UpgradeInstall, UpgradeUncordon}: `[U1] a node cannot go from upgrade state "install" to "uncordon": states follow upgrade-required → cordon → wait-for-jobs → drain → install → validate → uncordon → done, any step may fail, and a failed node is re-marked upgrade-required`,
		{"", UpgradeCordon}:               `[U1] a node cannot go from upgrade state "(none)" to "cordon": states follow upgrade-required → cordon → wait-for-jobs → drain → install → validate → uncordon → done, any step may fail, and a failed node is re-marked upgrade-required`,
		{UpgradeDone, UpgradeFailed}:      `[U1] a node cannot go from upgrade state "done" to "failed": states follow upgrade-required → cordon → wait-for-jobs → drain → install → validate → uncordon → done, any step may fail, and a failed node is re-marked upgrade-required`,
		{UpgradeDrain, "reboot"}:          `[U1] unknown upgrade state "reboot"`,
	}
	for tr, msg := range bad {
		assert.EqualError(t, CheckUpgradeTransition(tr[0], tr[1]), msg)
	}
}

func TestMaxUnavailable(t *testing.T) {
	cases := []struct {
		in    string
		total int
		want  int
	}{
		{"2", 6, 2}, {"25%", 6, 2}, {"10%", 6, 1}, {"1%", 3, 1}, {"50%", 5, 3}, {"100%", 6, 6}, {"10", 6, 10},
	}
	for _, c := range cases {
		v, err := ParseMaxUnavailable(c.in)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, MaxUnavailableNodes(v, c.total), "%s of %d", c.in, c.total)
	}
	for in, msg := range map[string]string{
		"0":    `[U2] invalid --max-unavailable "0": want a node count of at least 1 or a percentage such as 25%`,
		"-1":   `[U2] invalid --max-unavailable "-1": want a node count of at least 1 or a percentage such as 25%`,
		"two":  `[U2] invalid --max-unavailable "two": want a node count of at least 1 or a percentage such as 25%`,
		"0%":   `[U2] invalid --max-unavailable "0%": a percentage must be 1%-100%`,
		"150%": `[U2] invalid --max-unavailable "150%": a percentage must be 1%-100%`,
	} {
		_, err := ParseMaxUnavailable(in)
		assert.EqualError(t, err, msg)
	}
}

func upgradePool(n int, state UpgradeState) []UpgradeNode {
	var out []UpgradeNode
	for i := 1; i <= n; i++ {
		out = append(out, UpgradeNode{Name: fmt.Sprintf("n%d", i), State: state, Ready: true})
	}
	return out
}

func TestPlanUpgradeWave(t *testing.T) {
	t.Run("fresh pool: max-unavailable nodes start", func(t *testing.T) {
		p := PlanUpgradeWave(upgradePool(6, UpgradeRequired), 2, "")
		assert.Equal(t, []string{"n1", "n2"}, p.Start)
		assert.Equal(t, []string{"n3", "n4", "n5", "n6"}, p.Waiting)
		assert.Equal(t, 6, p.Total)
	})
	t.Run("nodes cordoned by someone else count against the budget", func(t *testing.T) {
		nodes := upgradePool(6, UpgradeRequired)
		nodes[5].State, nodes[5].Unavailable = "", true // not upgraded, but cordoned
		p := PlanUpgradeWave(nodes, 2, "")
		assert.Equal(t, []string{"n1"}, p.Start)
	})
	t.Run("a pending node already cordoned starts without a slot, idle before busy", func(t *testing.T) {
		nodes := upgradePool(4, UpgradeRequired)
		nodes[3].Unavailable = true
		nodes[0].Busy = true
		p := PlanUpgradeWave(nodes, 2, "")
		assert.Equal(t, []string{"n4", "n2"}, p.Start)
		assert.Equal(t, []string{"n3", "n1"}, p.Waiting) // idle n3 is next
	})
	t.Run("interrupted nodes are finished first and hold their slots", func(t *testing.T) {
		nodes := upgradePool(6, UpgradeRequired)
		nodes[0].State, nodes[1].State = UpgradeDone, UpgradeDone
		nodes[2].State, nodes[2].Unavailable = UpgradeInstall, true
		p := PlanUpgradeWave(nodes, 2, "")
		assert.Equal(t, []string{"n3"}, p.Continue)
		assert.Equal(t, []string{"n4"}, p.Start)
		assert.Equal(t, 2, p.Done)
	})
	t.Run("a failed node stops the rollout", func(t *testing.T) {
		nodes := upgradePool(4, UpgradeRequired)
		nodes[1].State = UpgradeFailed
		nodes[2].State = UpgradeDrain
		p := PlanUpgradeWave(nodes, 2, "")
		assert.Equal(t, []string{"n2"}, p.Failed)
		assert.True(t, p.Finished())
	})
	t.Run("the canary goes alone and first", func(t *testing.T) {
		nodes := upgradePool(4, UpgradeRequired)
		p := PlanUpgradeWave(nodes, 3, "n3")
		assert.Equal(t, []string{"n3"}, p.Start)
		nodes[2].State, nodes[2].Unavailable = UpgradeValidate, true
		p = PlanUpgradeWave(nodes, 3, "n3")
		assert.Equal(t, []string{"n3"}, p.Continue)
		assert.Empty(t, p.Start)
		nodes[2].State, nodes[2].Unavailable = UpgradeDone, false
		p = PlanUpgradeWave(nodes, 3, "n3")
		assert.Equal(t, []string{"n1", "n2", "n4"}, p.Start)
	})
	t.Run("a budget taken by nodes cordoned by someone else stalls, and says so", func(t *testing.T) {
		nodes := upgradePool(3, UpgradeRequired)
		nodes[2].State, nodes[2].Unavailable = "", true
		p := PlanUpgradeWave(nodes, 1, "")
		assert.True(t, p.Stalled())
		assert.Equal(t, []string{"n3"}, p.Unavailable)
		assert.Equal(t, []string{"n1", "n2"}, p.NoSlot)
		assert.False(t, PlanUpgradeWave(nodes, 2, "").Stalled())
	})
	t.Run("NotReady nodes wait rather than stall the rollout", func(t *testing.T) {
		nodes := upgradePool(3, UpgradeRequired)
		nodes[0].Ready = false
		p := PlanUpgradeWave(nodes, 2, "")
		assert.Equal(t, []string{"n2"}, p.Start) // n1 NotReady takes one of the two slots
		assert.Equal(t, []string{"n1", "n3"}, p.Waiting)
		assert.Equal(t, []string{"n1"}, p.NotReady)
		nodes[1].State, nodes[2].State = UpgradeDone, UpgradeDone
		p = PlanUpgradeWave(nodes, 2, "")
		assert.True(t, p.Finished())
		assert.False(t, p.Stalled(), "only NotReady nodes left: done for now, not stalled")
	})
}

func TestPredictUpgradeWaves(t *testing.T) {
	waves, waiting := PredictUpgradeWaves(upgradePool(6, UpgradeRequired), 2, "")
	assert.Equal(t, [][]string{{"n1", "n2"}, {"n3", "n4"}, {"n5", "n6"}}, waves)
	assert.Empty(t, waiting)
	waves, _ = PredictUpgradeWaves(upgradePool(5, UpgradeRequired), 2, "n5")
	assert.Equal(t, [][]string{{"n5"}, {"n1", "n2"}, {"n3", "n4"}}, waves)
}

func TestAbortOnlyBeforeTheStart(t *testing.T) {
	assert.NoError(t, CheckUpgradeTransition(UpgradeRequired, UpgradeAborted))
	assert.Error(t, CheckUpgradeTransition(UpgradeDrain, UpgradeAborted), "a started node finishes")
	assert.Error(t, CheckUpgradeTransition(UpgradeAborted, UpgradeFailed))
	assert.Error(t, CheckUpgradeTransition(UpgradeAborted, UpgradeCordon))
	plan := PlanUpgradeWave([]UpgradeNode{{Name: "a", State: UpgradeAborted, Ready: true}, {Name: "b", State: UpgradeRequired, Ready: true}}, 1, "")
	assert.Equal(t, []string{"b"}, plan.Start)
	assert.Equal(t, 1, plan.Total, "an aborted node is no longer the rollout's")
}

func TestValidateDriverVersion(t *testing.T) {
	assert.NoError(t, ValidateDriverVersion("24.1.0.3"))
	assert.EqualError(t, ValidateDriverVersion(""), "[U2] --version is required: the driver version to install (as the node's driver-version label will read it)")
	assert.ErrorContains(t, ValidateDriverVersion("24 1"), `[U2] invalid --version "24 1": invalid value "24 1" for label "runwhere.ai/driver-version"`)
}
