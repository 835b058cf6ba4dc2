package controller

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

var monitoringDir = filepath.Join("..", "..", "deploy", "monitoring")

// litepoolMetric finds the litepool metric names a PromQL expression reads.
var litepoolMetric = regexp.MustCompile(`\blitepool_[a-z_]+\b`)

// checkExpr says what is wrong with one expression: a litepool metric the controller
// does not register, or no litepool metric at all.
func checkExpr(t *testing.T, where, expr string) {
	t.Helper()
	names := litepoolMetric.FindAllString(expr, -1)
	assert.NotEmpty(t, names, "%s: %q reads no litepool metric", where, expr)
	for _, n := range names {
		assert.True(t, slices.Contains(MetricNames, n), "%s: %q reads %s, which the controller does not register", where, expr, n)
	}
}

func TestMetricNamesAreTheRegisteredGauges(t *testing.T) {
	require.Len(t, MetricNames, len(Gauges))
	for i, g := range Gauges {
		ch := make(chan *prometheus.Desc, 1)
		g.Describe(ch)
		assert.Contains(t, (<-ch).String(), `fqName: "`+MetricNames[i]+`"`)
	}
}

func TestPrometheusRuleUsesRegisteredMetrics(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(monitoringDir, "prometheusrule.yaml"))
	require.NoError(t, err)
	var rule struct {
		Kind string
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert, Expr, For string
				}
			}
		}
	}
	require.NoError(t, yaml.Unmarshal(b, &rule))
	assert.Equal(t, "PrometheusRule", rule.Kind)
	var alerts []string
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			checkExpr(t, r.Alert, r.Expr)
		}
	}
	for _, want := range []string{"LitepoolPoolBelowMinNodes", "LitepoolPoolDegraded", "LitepoolRolloutStalled"} {
		assert.Contains(t, alerts, want)
	}
}

func TestGrafanaDashboardUsesRegisteredMetrics(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(monitoringDir, "grafana-dashboard.json"))
	require.NoError(t, err)
	var dash any
	require.NoError(t, json.Unmarshal(b, &dash))
	exprs := 0
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "definition") {
					checkExpr(t, path+"."+k, s)
					exprs++
				}
				walk(path+"."+k, x)
			}
		case []any:
			for _, x := range v {
				walk(path+"[]", x)
			}
		}
	}
	walk("dashboard", dash)
	assert.GreaterOrEqual(t, exprs, 8, "the dashboard's panels and variables")
}
