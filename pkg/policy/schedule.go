package policy

import (
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// ParseStressSchedule is rule T1 for a stress-test schedule. It accepts what a CronJob
// accepts: a five-field cron expression or @hourly/@daily/@weekly/@monthly/@yearly,
// optionally after "CRON_TZ=<zone> " or "TZ=<zone> ". The API server refuses a time
// zone inside spec.schedule (it belongs in spec.timeZone), so the prefix is split off
// and returned as timeZone; the zone must be a name of the IANA database.
func ParseStressSchedule(expr string) (schedule, timeZone string, err error) {
	schedule = strings.TrimSpace(expr)
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		if rest, ok := strings.CutPrefix(schedule, prefix); ok {
			zone, sched, _ := strings.Cut(rest, " ")
			if _, err := time.LoadLocation(zone); err != nil || zone == "" || strings.EqualFold(zone, "local") {
				return "", "", Violationf("T1", "invalid --cron %q: unknown time zone %q; use an IANA zone name such as \"CRON_TZ=Asia/Shanghai 0 2 * * 0\" (it becomes the CronJob's spec.timeZone)", expr, zone)
			}
			schedule, timeZone = strings.TrimSpace(sched), zone
			break
		}
	}
	if strings.Contains(schedule, "TZ=") {
		return "", "", Violationf("T1", "invalid --cron %q: a time zone may only come first, once, as CRON_TZ=<zone> or TZ=<zone>", expr)
	}
	if _, err := cron.ParseStandard(schedule); err != nil {
		return "", "", Violationf("T1", "invalid --cron %q: %v; want five fields (minute hour day-of-month month day-of-week) such as \"0 2 * * 0\", or @hourly/@daily/@weekly/@monthly", expr, err)
	}
	return schedule, timeZone, nil
}
