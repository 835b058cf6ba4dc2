package webhook

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// certs is a CA and a serving certificate for 127.0.0.1, written as files the webhook
// serves with --cert-mode=files.
type certs struct {
	dir   string
	caPEM []byte
	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
}

func newCerts(t *testing.T) *certs {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "litepool-e2e-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	c := &certs{dir: t.TempDir(), ca: ca, caKey: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	c.issue(t, 100)
	return c
}

// issue writes a fresh serving certificate with the given serial number, signed by the
// CA, the way a rotation would.
func (c *certs) issue(t *testing.T, serial int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca, &key.PublicKey, c.caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	// Write-then-rename so the watcher never reads half a file.
	write := func(name string, data []byte) {
		tmp := filepath.Join(c.dir, "."+name)
		require.NoError(t, os.WriteFile(tmp, data, 0o600))
		require.NoError(t, os.Rename(tmp, filepath.Join(c.dir, name)))
	}
	write("tls.key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	write("tls.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// servedSerial is the serial number of the certificate the webhook presents.
func (c *certs) servedSerial(addr string) (int64, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.caPEM)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

// webhookProc is the litepool-webhook binary running as a local process.
type webhookProc struct {
	cmd                  *exec.Cmd
	addr, metrics, probe string
	log                  *bytes.Buffer
	done                 chan struct{}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type syncBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.String()
}

// startWebhook runs the webhook with the files of c (--cert-mode=files) and waits
// until it is ready.
func startWebhook(t *testing.T, c *certs) (*webhookProc, *syncBuffer) {
	t.Helper()
	p, logs := launchWebhook(t, "--cert-mode=files", "--cert-dir="+c.dir)
	waitReady(t, p, logs)
	return p, logs
}

// launchWebhook runs _output/bin/litepool-webhook against the cluster on free loopback
// ports, with extra flags.
func launchWebhook(t *testing.T, flags ...string) (*webhookProc, *syncBuffer) {
	t.Helper()
	bin := filepath.Join(framework.BinDir, "litepool-webhook")
	_, err := os.Stat(bin)
	require.NoError(t, err, "build the webhook first: make build")
	port, mport, pport := freePort(t), freePort(t), freePort(t)
	p := &webhookProc{addr: fmt.Sprintf("127.0.0.1:%d", port), metrics: fmt.Sprintf("127.0.0.1:%d", mport),
		probe: fmt.Sprintf("127.0.0.1:%d", pport), done: make(chan struct{})}
	logs := &syncBuffer{}
	args := append([]string{"--host=127.0.0.1", "--port=" + strconv.Itoa(port),
		"--metrics-bind-address=" + p.metrics, "--health-probe-bind-address=" + p.probe, "--kubeconfig=" + framework.C.Kubeconfig}, flags...)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = logs, logs
	require.NoError(t, p.cmd.Start())
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("webhook log:\n%s", logs.String())
		}
	})
	return p, logs
}

// waitReady waits until /readyz says the caches have synced and the certificate serves.
func waitReady(t *testing.T, p *webhookProc, logs *syncBuffer) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		select {
		case <-p.done:
			return false, fmt.Errorf("the webhook exited: %s", logs.String())
		default:
		}
		code, _ := get("http://" + p.probe + "/readyz")
		return code == http.StatusOK, nil
	})
	require.NoError(t, err, "webhook never became ready:\n%s", logs.String())
}

func (p *webhookProc) kill() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// decisions sums litepool_webhook_decisions_total for one webhook from /metrics.
func (p *webhookProc) decisions(t *testing.T, webhook string) int {
	t.Helper()
	code, body := get("http://" + p.metrics + "/metrics")
	require.Equal(t, http.StatusOK, code, body)
	re := regexp.MustCompile(`(?m)^litepool_webhook_decisions_total\{([^}]*)\} (\d+)`)
	total := 0
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		if strings.Contains(m[1], `webhook="`+webhook+`"`) {
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
	raw, err := os.ReadFile(filepath.Join(framework.Root, "deploy", "webhook", "webhooks.yaml"))
	require.NoError(t, err)
	var mut admissionregistrationv1.MutatingWebhookConfiguration
	var val admissionregistrationv1.ValidatingWebhookConfiguration
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		switch {
		case strings.Contains(doc, "kind: MutatingWebhookConfiguration"):
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &mut))
		case strings.Contains(doc, "kind: ValidatingWebhookConfiguration"):
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &val))
		}
	}
	require.Len(t, mut.Webhooks, 2)
	require.Len(t, val.Webhooks, 2)
	byURL := func(cc *admissionregistrationv1.WebhookClientConfig) {
		url := "https://" + addr + *cc.Service.Path
		*cc = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM}
	}
	for i := range mut.Webhooks {
		byURL(&mut.Webhooks[i].ClientConfig)
	}
	for i := range val.Webhooks {
		byURL(&val.Webhooks[i].ClientConfig)
	}
	ctx := context.Background()
	t.Cleanup(func() { // leave the cluster usable, whatever the test did to the process
		_ = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, mut.Name, metav1.DeleteOptions{})
		_ = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, val.Name, metav1.DeleteOptions{})
	})
	_, err = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &mut, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &val, metav1.CreateOptions{})
	require.NoError(t, err)
}

// warnings collects the warnings the API server relays from the webhook.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// warningClient is a clientset whose warnings land in w.
func warningClient(t *testing.T, w *warnings) kubernetes.Interface {
	cfg := rest.CopyConfig(framework.C.Config)
	cfg.WarningHandler = w
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return kube
}
