package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
)

// Webhook is the litepool-webhook the package's tests run under: a local process the
// API server calls by URL through deploy/webhook's own configurations.
type Webhook struct {
	Process *localwebhook.Process
	Log     string // the webhook's log file
	CAPEM   []byte // the CA its serving certificate is issued by
	cfgs    localwebhook.Configurations
	cluster *Cluster
}

// W is the package's webhook, set by MainWithWebhook.
var W *Webhook

// MainWithWebhook is Main with the webhook running for every test: the plugin's
// changes are admitted (or refused) as in a cluster where the webhook is installed.
// flags are added to the webhook's (--controllers runs its controllers too).
func MainWithWebhook(m *testing.M, name string, flags ...string) {
	c, err := Start(name, true)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FATAL: e2e: the local control plane did not start: %v\n", err)
		os.Exit(1)
	}
	C = c
	w, err := StartWebhook(c, flags...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FATAL: e2e: the webhook did not start: %v\n", err)
		_ = c.Stop()
		os.Exit(1)
	}
	W = w
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "e2e: webhook log: %s\n", w.Log)
	}
	w.Stop()
	if os.Getenv("LITEPOOL_E2E_KEEP") == "" {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: stopping cluster %s: %v\n", name, err)
		}
	} else {
		fmt.Fprintf(os.Stderr, "e2e: cluster %s kept; kubeconfig %s\n", name, c.Kubeconfig)
	}
	os.Exit(code)
}

// StartWebhook runs _output/bin/litepool-webhook against c with a fresh certificate,
// registers the configurations by URL and waits until the API server calls it. flags
// are added to the webhook's.
func StartWebhook(c *Cluster, flags ...string) (*Webhook, error) {
	dir := filepath.Join(Root, "_output", "e2e", c.Name, "webhook")
	certs, err := localwebhook.NewCerts(filepath.Join(dir, "certs"))
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "webhook.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	// The webhook's namespace holds its departure reservations (minNodes, N3).
	if err := localwebhook.EnsureNamespace(context.Background(), c.Kube, localwebhook.Namespace); err != nil {
		return nil, err
	}
	p, err := localwebhook.Launch(localwebhook.Options{Binary: filepath.Join(BinDir, "litepool-webhook"),
		Kubeconfig: c.Kubeconfig, Namespace: localwebhook.Namespace, Output: logFile,
		Flags: append(append([]string{"--cert-mode=files", "--cert-dir=" + certs.Dir}, AgentNamespaceFlags()...), flags...)})
	if err != nil {
		return nil, err
	}
	cfgs, err := localwebhook.LoadConfigurations(filepath.Join(Root, "deploy", "webhook", "webhooks.yaml"))
	if err != nil {
		p.Kill()
		return nil, err
	}
	w := &Webhook{Process: p, Log: logPath, CAPEM: certs.CAPEM, cfgs: cfgs, cluster: c}
	ctx := context.Background()
	if err := p.WaitReady(ctx, 60*time.Second); err != nil {
		w.Stop()
		return nil, fmt.Errorf("%w (log %s)", err, logPath)
	}
	cfgs.ByURL(p.Addr, certs.CAPEM)
	if err := cfgs.Register(ctx, c.Kube); err != nil {
		w.Stop()
		return nil, err
	}
	if err := localwebhook.WaitEffective(ctx, c.Kube, "default", 30*time.Second); err != nil {
		w.Stop()
		return nil, err
	}
	return w, nil
}

// Stop removes the configurations (so the cluster stays usable) and the process.
func (w *Webhook) Stop() {
	_ = w.cfgs.Unregister(context.Background(), w.cluster.Kube)
	w.Process.Kill()
}
