package controller

import (
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	waitInterval = 250 * time.Millisecond
	waitTimeout  = 60 * time.Second
)

// replica is one litepool-webhook process with its controllers on.
type replica struct{ *framework.Litepool }

// startReplica runs litepool-webhook with the webhook, --controllers and
// --leader-elect, serving certs, and waits until it is ready (caches synced).
func startReplica(t *testing.T, certs *localwebhook.Certs, extra ...string) *replica {
	t.Helper()
	return &replica{framework.LaunchLitepool(t, certs.Dir, append([]string{"--controllers=true", "--leader-elect=true"}, extra...)...)}
}

// registerWebhooks points deploy/webhook's configurations at the replica.
func registerWebhooks(t *testing.T, r *replica, certs *localwebhook.Certs) {
	t.Helper()
	cfgs, err := localwebhook.LoadConfigurations(filepath.Join(framework.Root, "deploy", "webhook", "webhooks.yaml"))
	require.NoError(t, err)
	cfgs.ByURL(r.Addr, certs.CAPEM)
	t.Cleanup(func() { _ = cfgs.Unregister(context.Background(), framework.C.Kube) })
	require.NoError(t, cfgs.Register(context.Background(), framework.C.Kube))
	require.NoError(t, localwebhook.WaitEffective(context.Background(), framework.C.Kube, "default", 30*time.Second))
}

// series is one scraped sample: its labels and value.
type series struct {
	labels map[string]string
	value  float64
}

var sampleLine = regexp.MustCompile(`(?m)^([a-z_]+)\{([^}]*)\} (\S+)$`)
var labelPair = regexp.MustCompile(`([a-z_]+)="([^"]*)"`)

// scrape reads the replica's /metrics and returns the samples of the litepool_pool_
// metrics by name.
func (r *replica) scrape(t *testing.T) map[string][]series {
	t.Helper()
	body := framework.Scrape(t, r.Metrics)
	out := map[string][]series{}
	for _, m := range sampleLine.FindAllStringSubmatch(body, -1) {
		v, err := strconv.ParseFloat(m[3], 64)
		require.NoError(t, err)
		s := series{labels: map[string]string{}, value: v}
		for _, l := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.labels[l[1]] = l[2]
		}
		out[m[1]] = append(out[m[1]], s)
	}
	return out
}
