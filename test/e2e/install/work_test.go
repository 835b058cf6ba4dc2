package install

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

var poolsGVR = schema.GroupVersionResource{Group: "runwhere.ai", Version: "v1alpha1", Resource: "pools"}

// launch runs litepool-webhook with the ServiceAccount sa's token as its only
// credential, and waits until it is ready.
func launch(t *testing.T, namespace, sa string, flags ...string) *localwebhook.Process {
	t.Helper()
	logs := &localwebhook.LogBuffer{}
	p, err := localwebhook.Launch(localwebhook.Options{Binary: filepath.Join(framework.BinDir, "litepool-webhook"),
		Kubeconfig: kubeconfigAs(t, namespace, sa), Namespace: namespace, Flags: flags, Output: logs})
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Stop(10 * time.Second) // a leader gives its Lease back
		if t.Failed() {
			t.Logf("litepool-webhook as %s, log:\n%s", sa, logs.String())
		}
	})
	return p
}

// Each identity runs the binary in its Deployment's mode with its own token and no
// other credential, and gets its work done with the rights rbac.yaml grants: the
// webhook issues its certificate into its Secret, injects the CA bundles and answers
// a review from its caches; the controller takes the leader Lease and reports every
// pool. /metrics of both refuses anonymous callers and callers without
// litepool-metrics-reader, and serves one bound to it.
func testAtWork(t *testing.T, namespace string) {
	kube := framework.C.Kube

	certDir := t.TempDir()
	webhook := launch(t, namespace, webhookSA, "--webhook=true", "--controllers=false", "--cert-mode=self", "--cert-dir="+certDir,
		"--extra-dns-names=localhost", "--metrics-secure=true")
	var secret *corev1.Secret
	poll(t, "the webhook writes its certificate into its Secret", func() (bool, error) {
		s, err := kube.CoreV1().Secrets(namespace).Get(ctx, certSecret, metav1.GetOptions{})
		secret = s
		return err == nil && len(s.Data["tls.crt"]) > 0, nil
	})
	for _, name := range []string{"tls.crt", "tls.key"} { // what kubelet does with the mounted Secret
		writeFile(t, filepath.Join(certDir, name), secret.Data[name])
	}
	require.NoError(t, webhook.WaitReady(ctx, waitTimeout))
	poll(t, "the webhook injects its CA into both webhook configurations", func() (bool, error) {
		mut, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		val, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, w := range mut.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, secret.Data["ca.crt"]) {
				return false, nil
			}
		}
		for _, w := range val.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, secret.Data["ca.crt"]) {
				return false, nil
			}
		}
		return true, nil
	})
	review(t, webhook.Addr, secret.Data["ca.crt"])

	pool := staleStatus(t)
	controller := launch(t, namespace, controllerSA, "--webhook=false", "--controllers=true", "--leader-elect=true", "--metrics-secure=true")
	require.NoError(t, controller.WaitReady(ctx, waitTimeout))
	poll(t, "the controller holds the Lease litepool-controller in "+namespace, func() (bool, error) {
		l, err := kube.CoordinationV1().Leases(namespace).Get(ctx, "litepool-controller", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
	})
	poll(t, "the controller writes pool "+pool+"'s status", func() (bool, error) {
		p, err := framework.C.Dynamic.Resource(poolsGVR).Get(ctx, pool, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n, _, _ := unstructured.NestedInt64(p.Object, "status", "nodeCount")
		return n != staleNodeCount, nil
	})

	ensureServiceAccount(t, "default", "metrics-scraper")
	bindMetricsReader(t, "default", "metrics-scraper")
	ensureServiceAccount(t, "default", "no-metrics")
	reader, stranger := token(t, "default", "metrics-scraper"), token(t, "default", "no-metrics")
	for _, tc := range []struct {
		name, addr, metric string
	}{
		{name: "webhook", addr: webhook.Metrics, metric: "litepool_webhook_decisions_total"},
		{name: "controller", addr: controller.Metrics, metric: "litepool_pool_nodes"},
	} {
		t.Run(tc.name+" metrics", func(t *testing.T) {
			url := "https://" + tc.addr + "/metrics"
			code, body := scrape(t, url, "")
			assert.Equal(t, http.StatusUnauthorized, code, "an anonymous scrape is refused: %s", body)
			assert.NotContains(t, body, "litepool_")
			code, body = scrape(t, url, stranger)
			assert.Equal(t, http.StatusForbidden, code, "a token without litepool-metrics-reader is refused: %s", body)
			assert.NotContains(t, body, "litepool_")
			// The Lease is held before the first status pass has set the gauges.
			poll(t, tc.metric+" served to a scraper bound to litepool-metrics-reader", func() (bool, error) {
				code, body = scrape(t, url, reader)
				return code == http.StatusOK && strings.Contains(body, tc.metric), nil
			})
			code, body = localwebhook.Get("http://" + tc.addr + "/metrics")
			assert.NotEqual(t, http.StatusOK, code, "no plain HTTP: %s", body)
		})
	}
}

// staleNodeCount is a pool's node count no controller would write.
const staleNodeCount = 9999

// staleStatus writes, as an administrator, a node count into a sample pool's status that
// no controller would write, and returns the pool's name: the controller started next
// must correct it, which only a status write under its own identity can do.
func staleStatus(t *testing.T) string {
	t.Helper()
	pools := framework.C.Dynamic.Resource(poolsGVR)
	list, err := pools.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, list.Items, "the sample cluster has pools")
	p := &list.Items[0]
	require.NoError(t, unstructured.SetNestedField(p.Object, int64(staleNodeCount), "status", "nodeCount"))
	_, err = pools.UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	return p.GetName()
}

// scrape fetches url with the bearer token (none when empty). Without --metrics-cert-dir
// the metrics certificate is self-signed, so this checks the token alone, which the
// server checks with the API server; test/e2e/certmanager checks the certificate as
// deploy/monitoring's ServiceMonitors do.
func scrape(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed metrics certificate; the token is what is checked
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// review sends the webhook at addr an AdmissionReview of a no-op update of a sample pool,
// over TLS checked against the CA it issued, and expects it to be allowed: the rules
// answered from the caches its identity may fill.
func review(t *testing.T, addr string, caPEM []byte) {
	t.Helper()
	pools, err := framework.C.Dynamic.Resource(poolsGVR).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, pools.Items, "the sample cluster has pools")
	raw, err := json.Marshal(pools.Items[0].Object)
	require.NoError(t, err)
	ar := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: types.UID("e2e-install"),
			Kind:      metav1.GroupVersionKind{Group: "runwhere.ai", Version: "v1alpha1", Kind: "Pool"},
			Resource:  metav1.GroupVersionResource{Group: poolsGVR.Group, Version: poolsGVR.Version, Resource: poolsGVR.Resource},
			Name:      pools.Items[0].GetName(),
			Operation: admissionv1.Update, Object: runtime.RawExtension{Raw: raw}, OldObject: runtime.RawExtension{Raw: raw}}}
	body, err := json.Marshal(ar)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	_, port, _ := strings.Cut(addr, ":")
	client := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12}}}
	resp, err := client.Post("https://localhost:"+port+"/validate-pools", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var got admissionv1.AdmissionReview
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	require.NotNil(t, got.Response)
	assert.Equal(t, ar.Request.UID, got.Response.UID)
	assert.True(t, got.Response.Allowed, "a no-op update of pool %s: %+v", pools.Items[0].GetName(), got.Response.Result)
}
