package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStressScheduleSplitsTheTimeZone(t *testing.T) {
	for expr, want := range map[string][2]string{
		"0 2 * * 0":                            {"0 2 * * 0", ""},
		"@daily":                               {"@daily", ""},
		"CRON_TZ=Asia/Shanghai 0 2 * * 0":      {"0 2 * * 0", "Asia/Shanghai"},
		"TZ=UTC @weekly":                       {"@weekly", "UTC"},
		"  CRON_TZ=Europe/Berlin 30 1 * * *  ": {"30 1 * * *", "Europe/Berlin"},
	} {
		sched, zone, err := ParseStressSchedule(expr)
		require.NoError(t, err, expr)
		assert.Equal(t, want, [2]string{sched, zone}, expr)
	}
}

func TestParseStressScheduleRefusals(t *testing.T) {
	for expr, msg := range map[string]string{
		"CRON_TZ=Mars/Olympus 0 2 * * 0": `[T1] invalid --cron "CRON_TZ=Mars/Olympus 0 2 * * 0": unknown time zone "Mars/Olympus"; use an IANA zone name such as "CRON_TZ=Asia/Shanghai 0 2 * * 0" (it becomes the CronJob's spec.timeZone)`,
		"TZ=Local 0 2 * * 0":             `[T1] invalid --cron "TZ=Local 0 2 * * 0": unknown time zone "Local"; use an IANA zone name such as "CRON_TZ=Asia/Shanghai 0 2 * * 0" (it becomes the CronJob's spec.timeZone)`,
		"CRON_TZ=UTC TZ=UTC 0 2 * * 0":   `[T1] invalid --cron "CRON_TZ=UTC TZ=UTC 0 2 * * 0": a time zone may only come first, once, as CRON_TZ=<zone> or TZ=<zone>`,
	} {
		_, _, err := ParseStressSchedule(expr)
		assert.EqualError(t, err, msg)
	}
	_, _, err := ParseStressSchedule("every sunday")
	assert.ErrorContains(t, err, `[T1] invalid --cron "every sunday"`)
}
