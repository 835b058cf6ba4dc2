package controller

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/runwhere-ai/litepool/pkg/admission"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

var monitoringDir = filepath.Join("..", "..", "deploy", "monitoring")

// litepoolMetric finds the litepool metric names a PromQL expression reads.
var litepoolMetric = regexp.MustCompile(`\blitepool_[a-z_]+\b`)

// apiserverWebhookMetric finds the API server's admission-webhook metrics an alert reads;
// litepoolWebhooks is the filter each such read must carry, so that an alert on litepool
// does not fire for another product's webhook.
var (
	apiserverWebhookMetric = regexp.MustCompile(`\bapiserver_admission_webhook_[a-z_]+\{[^}]*\}`)
	litepoolWebhooks       = `name=~".+[.]runwhere[.]ai"`
)

// checkExpr says what is wrong with one expression: a litepool metric neither the
// controller nor the webhook registers, an API server webhook metric read without
// litepool's filter, or no metric of litepool's at all.
func checkExpr(t *testing.T, where, expr string) {
	t.Helper()
	names := litepoolMetric.FindAllString(expr, -1)
	apiserver := apiserverWebhookMetric.FindAllString(expr, -1)
	assert.NotEmpty(t, append(names, apiserver...), "%s: %q reads no litepool metric", where, expr)
	for _, n := range names {
		assert.True(t, slices.Contains(MetricNames, n) || n == admission.CertificateExpiryMetric,
			"%s: %q reads %s, which neither the controller nor the webhook registers", where, expr, n)
	}
	for _, sel := range apiserver {
		assert.Contains(t, sel, litepoolWebhooks, "%s: %q reads the API server's webhook metrics of every webhook, not litepool's", where, expr)
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
	for _, want := range []string{"LitepoolPoolBelowMinNodes", "LitepoolPoolDegraded", "LitepoolRolloutStalled",
		"LitepoolControllerStatusStale", "LitepoolWebhookCallsFailing", "LitepoolWebhookErrors", "LitepoolWebhookSlow",
		"LitepoolWebhookCertificateExpiresSoon", "LitepoolRolloutPastDeadline", "LitepoolHealthBreakerOpenTooLong"} {
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

// The domain gauges follow the pools' domains, and the series of a domain that is gone
// (its members relabelled, or the pool's topology removed) are deleted.
func TestDomainMetrics(t *testing.T) {
	node := func(name, rack string, ready bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{policy.LabelPool: "m-train", "rack": rack}}}
		n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
		st := corev1.ConditionTrue
		if !ready {
			st = corev1.ConditionFalse
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
		return n
	}
	build := func(nodes ...*corev1.Node) *inventory.Inventory {
		b := inventory.NewBuilder()
		b.Topologies = map[string]inventory.PoolTopology{"m-train": {Topology: policy.Topology{Levels: []string{"rack"}, Unit: "rack", MinNodesPerDomain: 1}}}
		for _, n := range nodes {
			b.AddNode(n)
		}
		return b.Build()
	}
	seen := recordDomains(build(node("a", "r1", true), node("b", "r1", true), node("c", "r2", false)), nil)
	assert.Equal(t, 16.0, testutil.ToFloat64(domainAcceleratorsFree.WithLabelValues("m-train", "r1")))
	assert.Equal(t, 1.0, testutil.ToFloat64(domainNodes.WithLabelValues("m-train", "r2", "total")))
	assert.Equal(t, 0.0, testutil.ToFloat64(domainNodes.WithLabelValues("m-train", "r2", "schedulable")))
	assert.Equal(t, 1.0, testutil.ToFloat64(domainState.WithLabelValues("m-train", "r2", policy.DomainOut)))
	assert.Equal(t, 16.0, testutil.ToFloat64(largestFreeBlock.WithLabelValues("m-train")))

	recordDomains(build(node("a", "r1", true), node("b", "r1", true), node("c", "r1", true)), seen)
	assert.Equal(t, 2, testutil.CollectAndCount(domainNodes), "r2 is gone: only r1's two series")
	assert.Equal(t, 24.0, testutil.ToFloat64(domainAcceleratorsFree.WithLabelValues("m-train", "r1")))
	recordDomains(inventory.NewBuilder().Build(), map[[2]string]bool{{"m-train", ""}: true, {"m-train", "r1"}: true})
	assert.Zero(t, testutil.CollectAndCount(domainNodes))
	assert.Zero(t, testutil.CollectAndCount(largestFreeBlock))
}
