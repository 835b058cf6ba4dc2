package plugin

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/runwhere-ai/litepool/pkg/cmd/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

func TestUpgradeDriverValidate(t *testing.T) {
	base := func() *UpgradeDriverOptions {
		return &UpgradeDriverOptions{Pool: "p", Version: "24.1.0.3", MaxUnavailable: "25%", WaitTimeout: time.Minute}
	}
	assert.NoError(t, base().Validate())
	cases := map[string]func(o *UpgradeDriverOptions){
		"give exactly one of --pool POOL or --node NODE":                                                              func(o *UpgradeDriverOptions) { o.Node = "n" },
		"[U2] --version is required: the driver version to install (as the node's driver-version label will read it)": func(o *UpgradeDriverOptions) { o.Version = "" },
		`[U2] invalid --max-unavailable "0%": a percentage must be 1%-100%`:                                           func(o *UpgradeDriverOptions) { o.MaxUnavailable = "0%" },
		"--canary applies to a pool rollout (--pool)":                                                                 func(o *UpgradeDriverOptions) { o.Pool, o.Node, o.Canary = "", "n", "m" },
		`invalid --wait-selector "x=y,": found '', expected: identifier after ','`:                                    func(o *UpgradeDriverOptions) { o.WaitSelector = "x=y," },
		"--validate-timeout -1s: must not be negative":                                                                func(o *UpgradeDriverOptions) { o.ValidateTimeout = -time.Second },
	}
	for msg, mutate := range cases {
		o := base()
		mutate(o)
		assert.EqualError(t, o.Validate(), msg)
	}
}

func TestStressScheduleValidate(t *testing.T) {
	o := &StressScheduleOptions{Pool: "train-snt9b", Cron: "0 2 * * 0", Image: "s:1", Tests: []string{"npu"}, Timeout: time.Minute}
	assert.NoError(t, o.Validate())
	for cron, msg := range map[string]string{
		"0 2 * *":    `[T1] invalid --cron "0 2 * *": expected exactly 5 fields, found 4: [0 2 * *]`,
		"0 25 * * *": `[T1] invalid --cron "0 25 * * *": end of range (25) above maximum (23): 25`,
		"@fortnight": `[T1] invalid --cron "@fortnight": unrecognized descriptor: @fortnight`,
	} {
		o.Cron = cron
		err := o.Validate()
		if assert.Error(t, err, cron) {
			assert.True(t, strings.HasPrefix(err.Error(), msg), "%s: %v", cron, err)
		}
	}
}

func TestOverlayChainAndConfirm(t *testing.T) {
	got := overlayChain(policy.SoftwareChain{Hardware: "Snt9B", Driver: "23.0.6", CANN: "8.2.RC1"}, policy.SoftwareChain{Driver: "24.1.0.3"})
	assert.Equal(t, policy.SoftwareChain{Hardware: "Snt9B", Driver: "24.1.0.3", CANN: "8.2.RC1"}, got)

	o := &UpgradeDriverOptions{Pool: "upg", Version: "24.1.0.3", MaxUnavailable: "2", InstallerImage: "inst:1", WaitTimeout: 10 * time.Minute}
	assert.Equal(t, kit.Risk{Level: "high", Operation: "driver upgrade to 24.1.0.3",
		Impact:     []string{"6 node(s) of pool upg will be cordoned, drained and have the driver reinstalled by inst:1, at most 2 unavailable at a time; workload pods still running after 10m0s are evicted"},
		Precaution: []string{"make sure running jobs checkpoint or can restart, and that the installer image fits the nodes' OS"},
	}, o.risk(6))
}
