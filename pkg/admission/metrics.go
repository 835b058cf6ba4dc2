package admission

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Outcomes of one admission decision.
const (
	OutcomeAllowed = "allowed" // admitted unchanged
	OutcomeMutated = "mutated" // admitted with a patch (P1)
	OutcomeDenied  = "denied"  // refused by a rule
	OutcomeForced  = "forced"  // a denial overridden by runwhere.ai/force (N3)
	OutcomeError   = "error"   // the request could not be judged (malformed, cache error)
)

var (
	decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "litepool_webhook_decisions_total",
		Help: "Admission decisions by webhook, rule and outcome. A request denied by several rules counts once for each.",
	}, []string{"webhook", "rule", "outcome"})
	latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "litepool_webhook_decision_duration_seconds",
		Help: "Time to judge one admission request, from decoded request to answer, by webhook and outcome.",
		// Sub-millisecond buckets: decisions come from memory, a slow one is news.
		Buckets: []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 1, 2.5},
	}, []string{"webhook", "outcome"})
)

// departureCalls counts the API calls departures make on their ConfigMap: the cost of
// the reservation (reads, and writes that granted or lost a race).
var departureCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "litepool_webhook_departure_api_calls_total",
	Help: "API calls made to reserve node departures, by verb (get, create, update) and result (ok, conflict, error).",
}, []string{"verb", "result"})

func init() {
	metrics.Registry.MustRegister(decisions, latency, departureCalls)
}

// countDepartureCall records one API call of a reservation.
func countDepartureCall(verb string, err error) {
	result := "ok"
	switch {
	case retriable(err):
		result = "conflict"
	case err != nil && !apierrors.IsNotFound(err):
		result = "error"
	}
	departureCalls.WithLabelValues(verb, result).Inc()
}

// observe records a decision: its rules (all passed: "none"), outcome and duration.
func observe(webhook string, rules []string, outcome string, start time.Time) {
	if len(rules) == 0 {
		rules = []string{"none"}
	}
	for _, r := range rules {
		decisions.WithLabelValues(webhook, r, outcome).Inc()
	}
	latency.WithLabelValues(webhook, outcome).Observe(time.Since(start).Seconds())
}
