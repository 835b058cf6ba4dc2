package certmanager

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	namespace     = "litepool-system"
	servingSecret = "litepool-webhook-cert" // also the serving Certificate's name
	metricsSecret = "litepool-metrics-cert"
	configName    = "litepool-webhook"
	// webhookName is the name the API server calls the webhook's Service by.
	webhookName = "litepool-webhook.litepool-system.svc"
	// trafficPool is the sample cluster's pool the traffic's pods ask for; litepool's
	// pods webhook (failure policy Fail) pins each to it.
	trafficPool  = "dev-sandbox"
	waitInterval = 250 * time.Millisecond
	waitTimeout  = 2 * time.Minute
)

var (
	ctx             = context.Background()
	certificatesGVR = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
	installOnce     sync.Once
	installErr      string
)

// install applies, once, an operator's kustomization of deploy/webhook with the
// cert-manager component. One patch of its own: the serving certificate also names
// localhost, where the API server reaches the local webhook processes.
func install(t *testing.T) {
	t.Helper()
	installOnce.Do(func() {
		dir, err := os.MkdirTemp("", "litepool-certmanager-")
		if err != nil {
			installErr = err.Error()
			return
		}
		defer os.RemoveAll(dir)
		base, err := filepath.Rel(dir, filepath.Join(framework.Root, "deploy", "webhook"))
		if err != nil {
			installErr = err.Error()
			return
		}
		overlay := fmt.Sprintf(`resources: [%s]
components: [%s/components/cert-manager]
patches:
- target: {group: cert-manager.io, kind: Certificate, name: litepool-webhook-cert}
  patch: |-
    - op: add
      path: /spec/dnsNames/-
      value: localhost
`, base, base)
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o600); err != nil {
			installErr = err.Error()
			return
		}
		res := framework.C.Kubectl(t, "", "apply", "-k", dir)
		if res.ExitCode != 0 {
			installErr = fmt.Sprintf("kubectl apply -k (cert-manager component):\n%s\n%s", res.Stdout, res.Stderr)
			return
		}
		if err := waitGuardEnforced(t); err != nil {
			installErr = err.Error()
		}
	})
	require.Empty(t, installErr)
}

// TestIssuedAndServed: cert-manager issues the component's CA and, from it, the serving
// and metrics certificates; the CA injector fills both webhook configurations with the
// CA; the webhook serves the issued files (--cert-mode=files) and the API server, with
// the injected bundle only, calls it for a pod; /metrics verifies as deploy/monitoring's
// ServiceMonitor says (its CA Secret and serverName), with no insecureSkipVerify.
func TestIssuedAndServed(t *testing.T) {
	install(t)
	serving := issued(t, servingSecret)
	ca := parseCert(t, serving.Data["ca.crt"])
	assert.True(t, ca.IsCA, "ca.crt is the component's CA, not the serving certificate")
	assert.Equal(t, "litepool-ca", ca.Subject.CommonName)
	leaf := parseCert(t, serving.Data["tls.crt"])
	_, err := leaf.Verify(x509.VerifyOptions{Roots: pool(serving.Data["ca.crt"]), DNSName: webhookName})
	require.NoError(t, err, "the serving certificate is the CA's, for the webhook's Service")
	injected(t, serving.Data["ca.crt"])

	metrics := issued(t, metricsSecret)
	assert.Equal(t, serving.Data["ca.crt"], metrics.Data["ca.crt"], "one CA signs both")

	w := launch(t, "webhook", kubeletFiles(t, serving), "--metrics-secure=true", "--metrics-cert-dir="+kubeletFiles(t, metrics))
	serial, err := servedSerial(w.Addr, serving.Data["ca.crt"])
	require.NoError(t, err)
	assert.Equal(t, leaf.SerialNumber.Int64(), serial, "the webhook serves the issued certificate")
	callAt(t, w.Addr)

	t.Run("a pool pod goes through litepool", func(t *testing.T) {
		got, err := createPod(t, "issued")
		require.NoError(t, err)
		assert.Equal(t, trafficPool, got.Spec.NodeSelector[policy.LabelPool], "litepool's pods webhook pinned the pod to its pool")
		require.NoError(t, localwebhook.WaitEffective(ctx, framework.C.Kube, "default", 30*time.Second),
			"a pod of a pool that does not exist is refused by P2")
	})

	t.Run("metrics verified as deploy/monitoring's ServiceMonitor verifies them", func(t *testing.T) {
		tlsConfig := serviceMonitorTLS(t, "litepool-webhook")
		caSecret, err := framework.C.Kube.CoreV1().Secrets(namespace).Get(ctx, tlsConfig.CA.Secret.Name, metav1.GetOptions{})
		require.NoError(t, err, "the Secret the ServiceMonitor takes its CA from")
		caPEM := caSecret.Data[tlsConfig.CA.Secret.Key]
		token := metricsReaderToken(t)
		target := "https://" + w.Metrics + "/metrics"
		code, body, err := scrape(target, token, caPEM, tlsConfig.ServerName)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, code, body)
		assert.Contains(t, body, "litepool_webhook_decisions_total")
		_, _, err = scrape(target, token, caPEM, "litepool-elsewhere")
		assert.ErrorContains(t, err, "certificate", "a name the certificate does not carry is refused")
		_, _, err = scrape(target, token, serving.Data["tls.crt"], tlsConfig.ServerName)
		assert.ErrorContains(t, err, "certificate", "a CA other than the issuer is refused")
	})
}

// tlsConfig is what a ServiceMonitor endpoint's tlsConfig says here.
type tlsConfig struct {
	InsecureSkipVerify bool   `json:"insecureSkipVerify"`
	ServerName         string `json:"serverName"`
	CA                 struct {
		Secret struct {
			Name string `json:"name"`
			Key  string `json:"key"`
		} `json:"secret"`
	} `json:"ca"`
}

// serviceMonitorTLS is the tlsConfig of deploy/monitoring's ServiceMonitor name, as
// `kubectl kustomize` renders it.
func serviceMonitorTLS(t *testing.T, name string) tlsConfig {
	t.Helper()
	res := framework.C.Kubectl(t, "", "kustomize", filepath.Join(framework.Root, "deploy", "monitoring"))
	require.Zero(t, res.ExitCode, res.Stderr)
	for _, doc := range strings.Split(res.Stdout, "\n---\n") {
		var sm struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
			Spec     struct {
				Endpoints []struct {
					TLSConfig tlsConfig `json:"tlsConfig"`
				} `json:"endpoints"`
			} `json:"spec"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &sm))
		if sm.Kind == "ServiceMonitor" && sm.Metadata.Name == name {
			require.Len(t, sm.Spec.Endpoints, 1)
			c := sm.Spec.Endpoints[0].TLSConfig
			require.False(t, c.InsecureSkipVerify, "the ServiceMonitor verifies the certificate")
			require.NotEmpty(t, c.ServerName)
			require.NotEmpty(t, c.CA.Secret.Name)
			return c
		}
	}
	require.Failf(t, "no ServiceMonitor", "deploy/monitoring has no ServiceMonitor %s", name)
	return tlsConfig{}
}

// issued waits until cert-manager reports the Certificate name Ready and returns its
// Secret.
func issued(t *testing.T, name string) *corev1.Secret {
	t.Helper()
	poll(t, "cert-manager issues Certificate "+name, func() (bool, error) {
		c, err := framework.C.Dynamic.Resource(certificatesGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return conditionTrue(c, "Ready") && !conditionTrue(c, "Issuing"), nil
	})
	s, err := framework.C.Kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	for _, key := range []string{"tls.crt", "tls.key", "ca.crt"} {
		require.NotEmpty(t, s.Data[key], "Secret %s: %s", name, key)
	}
	return s
}

func conditionTrue(obj *unstructured.Unstructured, kind string) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == kind {
			return m["status"] == "True"
		}
	}
	return false
}

// injected waits until every webhook of both configurations carries caPEM, which only
// cert-manager's CA injector writes here.
func injected(t *testing.T, caPEM []byte) {
	t.Helper()
	poll(t, "the CA injector fills both webhook configurations with the CA", func() (bool, error) {
		bundles, err := caBundles()
		if err != nil {
			return false, err
		}
		for _, b := range bundles {
			if !bytes.Equal(b, caPEM) {
				return false, nil
			}
		}
		return len(bundles) > 0, nil
	})
}

// caBundles are the CA bundles of every webhook of litepool's two configurations.
func caBundles() ([][]byte, error) {
	adm := framework.C.Kube.AdmissionregistrationV1()
	mut, err := adm.MutatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	val, err := adm.ValidatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, w := range mut.Webhooks {
		out = append(out, w.ClientConfig.CABundle)
	}
	for _, w := range val.Webhooks {
		out = append(out, w.ClientConfig.CABundle)
	}
	return out, nil
}

// callAt points the installed configurations at addr (https://localhost:PORT, where the
// API server reaches the local processes) and keeps the CA bundles the injector wrote:
// the API server trusts the webhook through them alone. It waits until the API server
// calls it.
func callAt(t *testing.T, addr string) {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	base := "https://localhost:" + port
	adm := framework.C.Kube.AdmissionregistrationV1()
	require.NoError(t, retryConflict(func() error {
		mut, err := adm.MutatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range mut.Webhooks {
			repoint(&mut.Webhooks[i].ClientConfig, base)
		}
		_, err = adm.MutatingWebhookConfigurations().Update(ctx, mut, metav1.UpdateOptions{})
		return err
	}))
	require.NoError(t, retryConflict(func() error {
		val, err := adm.ValidatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range val.Webhooks {
			repoint(&val.Webhooks[i].ClientConfig, base)
		}
		_, err = adm.ValidatingWebhookConfigurations().Update(ctx, val, metav1.UpdateOptions{})
		return err
	}))
	require.NoError(t, localwebhook.WaitEffective(ctx, framework.C.Kube, "default", 60*time.Second))
}

// repoint sends cc's calls to base with the same path; its CA bundle stays.
func repoint(cc *admissionregistrationv1.WebhookClientConfig, base string) {
	path := ""
	if cc.Service != nil {
		path = ptr.Deref(cc.Service.Path, "")
	} else if u, err := url.Parse(ptr.Deref(cc.URL, "")); err == nil {
		path = u.Path
	}
	cc.Service, cc.URL = nil, ptr.To(base+path)
}

func retryConflict(f func() error) error {
	for {
		err := f()
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// kubeletFiles writes the Secret's files into a fresh directory, as kubelet does for a
// mounted Secret, and returns it.
func kubeletFiles(t *testing.T, s *corev1.Secret) string {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, s)
	return dir
}

// writeFiles replaces tls.crt, tls.key and ca.crt in dir, each by write-then-rename.
func writeFiles(t *testing.T, dir string, s *corev1.Secret) {
	t.Helper()
	for _, key := range []string{"tls.key", "tls.crt", "ca.crt"} {
		tmp := filepath.Join(dir, "."+key)
		require.NoError(t, os.WriteFile(tmp, s.Data[key], 0o600))
		require.NoError(t, os.Rename(tmp, filepath.Join(dir, key)))
	}
}

// launch runs litepool-webhook (admission only) with the certificate files in certDir,
// as its ServiceAccount with the rights the component leaves it (impersonated): no
// Secret, no webhook configuration.
func launch(t *testing.T, name, certDir string, flags ...string) *localwebhook.Process {
	t.Helper()
	logs := &localwebhook.LogBuffer{}
	p, err := localwebhook.Launch(localwebhook.Options{Binary: filepath.Join(framework.BinDir, "litepool-webhook"),
		Kubeconfig: kubeconfigAs(t, webhookSA, saGroups...), Namespace: namespace, Output: logs,
		Flags: append([]string{"--cert-mode=files", "--cert-dir=" + certDir, "--controllers=false"}, flags...)})
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, logs.String())
		}
	})
	require.NoError(t, p.WaitReady(ctx, waitTimeout))
	return p
}

func parseCert(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(pemBytes)
	require.NotNil(t, block, "a PEM certificate")
	c, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return c
}

func pool(pemBytes []byte) *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(pemBytes)
	return p
}

// servedSerial is the serial number of the certificate served at addr, verified
// against caPEM for localhost, over a fresh connection.
func servedSerial(addr string, caPEM []byte) (int64, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr,
		&tls.Config{RootCAs: pool(caPEM), ServerName: "localhost", MinVersion: tls.VersionTLS12})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

// createPod creates a pod of trafficPool in default.
func createPod(t *testing.T, name string) (*corev1.Pod, error) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{policy.LabelPool: trafficPool, policy.LabelWorkloadType: "development"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
	t.Cleanup(func() {
		_ = framework.C.Kube.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	return framework.C.Kube.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
}

// metricsReaderToken is a token of a ServiceAccount bound to litepool-metrics-reader, as
// Prometheus's is by deploy/monitoring.
func metricsReaderToken(t *testing.T) string {
	t.Helper()
	kube := framework.C.Kube
	_, err := kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus"}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-prometheus-metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "litepool-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "prometheus"}}}
	_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	tr, err := kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, "prometheus",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr.Status.Token
}

// scrape fetches url as a ServiceMonitor with tlsConfig {ca, serverName} does: the
// certificate verified against caPEM for serverName, the token sent.
func scrape(target, token string, caPEM []byte, serverName string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	client := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool(caPEM), ServerName: serverName, MinVersion: tls.VersionTLS12}}}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func poll(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(context.Context) (bool, error) { return cond() })
	require.NoError(t, err, what)
}
