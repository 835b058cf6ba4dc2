package webhook

import (
	"context"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// newCerts makes a CA and a serving certificate for 127.0.0.1 (serial 100), as files
// the webhook serves with --cert-mode=files.
func newCerts(t *testing.T) *localwebhook.Certs {
	t.Helper()
	c, err := localwebhook.NewCerts(t.TempDir())
	require.NoError(t, err)
	return c
}

// webhookProc is the litepool-webhook binary running as a local process.
type webhookProc struct{ *localwebhook.Process }

// startWebhook runs the webhook with the files of c (--cert-mode=files) and waits
// until it is ready.
func startWebhook(t *testing.T, c *localwebhook.Certs) (webhookProc, *localwebhook.LogBuffer) {
	t.Helper()
	p, logs := launchWebhook(t, "--cert-mode=files", "--cert-dir="+c.Dir)
	waitReady(t, p, logs)
	return p, logs
}

// launchWebhook runs _output/bin/litepool-webhook against the cluster on free loopback
// ports, with extra flags.
func launchWebhook(t *testing.T, flags ...string) (webhookProc, *localwebhook.LogBuffer) {
	t.Helper()
	logs := &localwebhook.LogBuffer{}
	require.NoError(t, localwebhook.EnsureNamespace(context.Background(), framework.C.Kube, localwebhook.Namespace))
	p, err := localwebhook.Launch(localwebhook.Options{Binary: filepath.Join(framework.BinDir, "litepool-webhook"),
		Kubeconfig: framework.C.Kubeconfig, Namespace: localwebhook.Namespace, Flags: append(framework.AgentNamespaceFlags(), flags...), Output: logs})
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("webhook log:\n%s", logs.String())
		}
	})
	return webhookProc{p}, logs
}

// waitReady waits until /readyz says the caches have synced and the certificate serves.
func waitReady(t *testing.T, p webhookProc, logs *localwebhook.LogBuffer) {
	t.Helper()
	require.NoError(t, p.WaitReady(context.Background(), 60*time.Second), logs.String())
}

func get(url string) (int, string) { return localwebhook.Get(url) }

// decisions sums litepool_webhook_decisions_total for one webhook from /metrics.
func (p webhookProc) decisions(t *testing.T, webhook string) int {
	t.Helper()
	return p.decisionsOf(t, webhook, "")
}

// decisionsOf counts the webhook's decisions that name rule ("": every rule).
func (p webhookProc) decisionsOf(t *testing.T, webhook, rule string) int {
	t.Helper()
	code, body := get("http://" + p.Metrics + "/metrics")
	require.Equal(t, http.StatusOK, code, body)
	re := regexp.MustCompile(`(?m)^litepool_webhook_decisions_total\{([^}]*)\} (\d+)`)
	total := 0
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		if strings.Contains(m[1], `webhook="`+webhook+`"`) && (rule == "" || strings.Contains(m[1], `rule="`+rule+`"`)) {
			n, _ := strconv.Atoi(m[2])
			total += n
		}
	}
	return total
}

// registerWebhooks creates deploy/webhook's own webhook configurations, unchanged but
// for the client config: the local process by URL, trusted through the test CA.
func registerWebhooks(t *testing.T, kube kubernetes.Interface, addr string, caPEM []byte) {
	t.Helper()
	cfgs, err := localwebhook.LoadConfigurations(filepath.Join(framework.Root, "deploy", "webhook", "webhooks.yaml"))
	require.NoError(t, err)
	require.Len(t, cfgs.Mutating.Webhooks, 5)
	require.Len(t, cfgs.Validating.Webhooks, 9)
	cfgs.ByURL(addr, caPEM)
	t.Cleanup(func() { // leave the cluster usable, whatever the test did to the process
		_ = cfgs.Unregister(context.Background(), kube)
	})
	require.NoError(t, cfgs.Register(context.Background(), kube))
}
