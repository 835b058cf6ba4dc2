package localwebhook

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var webhooksYAML = filepath.Join("..", "..", "deploy", "webhook", "webhooks.yaml")

func TestLoadConfigurationsByURL(t *testing.T) {
	c, err := LoadConfigurations(webhooksYAML)
	require.NoError(t, err)
	assert.Equal(t, "litepool-webhook", c.Mutating.Name)
	assert.Equal(t, "litepool-webhook", c.Validating.Name)
	c.ByURL("127.0.0.1:1234", []byte("CA"))
	var got []string
	for _, w := range c.Mutating.Webhooks {
		assert.Nil(t, w.ClientConfig.Service, w.Name)
		assert.Equal(t, "CA", string(w.ClientConfig.CABundle), w.Name)
		got = append(got, w.Name+" "+*w.ClientConfig.URL)
	}
	for _, w := range c.Validating.Webhooks {
		assert.Nil(t, w.ClientConfig.Service, w.Name)
		assert.Equal(t, "CA", string(w.ClientConfig.CABundle), w.Name)
		got = append(got, w.Name+" "+*w.ClientConfig.URL)
	}
	assert.Equal(t, []string{
		"pods.runwhere.ai https://127.0.0.1:1234/mutate-pods",
		"pods-namespace-default.runwhere.ai https://127.0.0.1:1234/mutate-pods",
		"pods-node-selector.runwhere.ai https://127.0.0.1:1234/mutate-pods",
		"pods-pinned-default-label.runwhere.ai https://127.0.0.1:1234/mutate-pods",
		"jobs.runwhere.ai https://127.0.0.1:1234/mutate-jobs",
		"nodes.runwhere.ai https://127.0.0.1:1234/validate-nodes",
		"node-departures.runwhere.ai https://127.0.0.1:1234/validate-nodes",
		"pod-placement.runwhere.ai https://127.0.0.1:1234/validate-pod-placement",
		"pod-placement-default-label.runwhere.ai https://127.0.0.1:1234/validate-pod-placement",
		"pod-placement-updates.runwhere.ai https://127.0.0.1:1234/validate-pod-placement",
		"pod-placement-bindings.runwhere.ai https://127.0.0.1:1234/validate-pod-placement",
		"pools.runwhere.ai https://127.0.0.1:1234/validate-pools",
		"volcano-queues.runwhere.ai https://127.0.0.1:1234/validate-volcano-queue",
		"operations.runwhere.ai https://127.0.0.1:1234/validate-operations",
	}, got)
}

func TestLoadConfigurationsErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
		return path
	}
	one := write("one.yaml", "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {name: x}\n")
	_, err := LoadConfigurations(one)
	require.Error(t, err)
	assert.Equal(t, one+": want one mutating and one validating webhook configuration, found 1 documents", err.Error())

	unknown := write("unknown.yaml", "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {name: x}\nwebhookz: []\n")
	_, err = LoadConfigurations(unknown)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown field "webhookz"`)
}

// serve serves the files in c.Dir over TLS, reading them at each handshake as the
// webhook's certificate watcher would after a change.
func serve(t *testing.T, c *Certs) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		cert, err := tls.LoadX509KeyPair(filepath.Join(c.Dir, "tls.crt"), filepath.Join(c.Dir, "tls.key"))
		return &cert, err
	}})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_ = conn.(*tls.Conn).Handshake()
			conn.Close()
		}
	}()
	return l.Addr().String()
}

func TestCertsServeAndRotate(t *testing.T) {
	c, err := NewCerts(filepath.Join(t.TempDir(), "certs"))
	require.NoError(t, err)
	ca, err := os.ReadFile(filepath.Join(c.Dir, "ca.crt"))
	require.NoError(t, err)
	assert.Equal(t, string(c.CAPEM), string(ca), "ca.crt is the CA the configurations trust")

	addr := serve(t, c)
	serial, err := c.ServedSerial(addr)
	require.NoError(t, err)
	assert.Equal(t, int64(FirstSerial), serial)
	require.NoError(t, c.Issue(101))
	serial, err = c.ServedSerial(addr)
	require.NoError(t, err)
	assert.Equal(t, int64(101), serial)

	other, err := NewCerts(t.TempDir())
	require.NoError(t, err)
	_, err = other.ServedSerial(addr)
	require.Error(t, err, "a certificate of another CA is not trusted")
	assert.Contains(t, err.Error(), "certificate signed by unknown authority")
}

func TestFreePort(t *testing.T) {
	port, err := FreePort()
	require.NoError(t, err)
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	require.NoError(t, err, "the port is free to listen on")
	l.Close()
}

// TestFreePortsDistinctAndAvoided: the ports of one call differ (the kernel's picks,
// each closed at once, repeat: 200 picks out of Linux's ~14,000 odd ephemeral ports
// would repeat about once a run) and none is one the caller said to avoid (400 avoided:
// about 6 of 200 picks would be among them).
func TestFreePortsDistinctAndAvoided(t *testing.T) {
	avoid, err := FreePorts(400)
	require.NoError(t, err)
	ports, err := FreePorts(200, avoid...)
	require.NoError(t, err)
	require.Len(t, ports, 200)
	seen := map[int]bool{}
	for _, port := range ports {
		assert.False(t, seen[port], "port %d given twice", port)
		assert.NotContains(t, avoid, port)
		seen[port] = true
	}
}

// TestBalancerRoundRobinSkipsDeadBackends: connections go to the backends in turn, and
// a backend that refuses (a killed replica) or is not ready is skipped.
func TestBalancerRoundRobinSkipsDeadBackends(t *testing.T) {
	echo := func(reply string) (string, func()) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte(reply))
				c.Close()
			}
		}()
		return l.Addr().String(), func() { l.Close() }
	}
	a, closeA := echo("a")
	b, closeB := echo("b")
	defer closeB()
	dead, closeDead := echo("x")
	closeDead()
	lb, err := NewBalancer(a, dead, b)
	require.NoError(t, err)
	defer func() { _ = lb.Close() }()
	read := func() string {
		c, err := net.Dial("tcp", lb.Addr)
		require.NoError(t, err)
		defer c.Close()
		buf := make([]byte, 1)
		n, _ := c.Read(buf)
		return string(buf[:n])
	}
	var got []string
	for range 6 {
		got = append(got, read())
	}
	// Turns go a, dead, b; the dead backend's turn goes to the next one.
	assert.ElementsMatch(t, []string{"a", "a", "b", "b", "b", "b"}, got, "every connection reaches a live backend, in turn")
	assert.Zero(t, lb.Connections[1].Load(), "the dead backend got nothing")
	closeA()
	lb.Ready = func(i int) bool { return i != 2 } // b not ready, a dead
	assert.Equal(t, "", read(), "no backend: the connection is closed")
	lb.Ready = nil
	assert.Equal(t, "b", read())
}
