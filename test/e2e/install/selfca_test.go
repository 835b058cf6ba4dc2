package install

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// testSelfManagedCAReplaced shows what docs/webhook.md says of the self-managed CA
// ("The CA, self-managed"): when the webhook's Secret holds no valid CA (an operator
// emptied it, or the CA is within 90 days of its end), the webhook's rotator writes a
// new CA and serving certificate and sets every CA bundle to the new CA alone. There is
// no overlap: until a replica reloads the new files (kubelet's refresh of the mounted
// Secret), the certificate it serves verifies against no CA bundle the API server holds.
// kwok mounts no Secret, so the window's length (kubelet's) is not measured here.
func testSelfManagedCAReplaced(t *testing.T, namespace string) {
	kube := framework.C.Kube
	certDir := t.TempDir()
	webhook := launch(t, namespace, webhookSA, "--webhook=true", "--controllers=false", "--cert-mode=self", "--cert-dir="+certDir,
		"--extra-dns-names=localhost")
	old := mountedSecret(t, namespace, certDir, nil)
	require.NoError(t, webhook.WaitReady(ctx, waitTimeout))
	bundlesAre(t, old.Data["ca.crt"])

	require.NoError(t, retryConflict(func() error {
		s, err := kube.CoreV1().Secrets(namespace).Get(ctx, certSecret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Data = nil
		_, err = kube.CoreV1().Secrets(namespace).Update(ctx, s, metav1.UpdateOptions{})
		return err
	}), "the operator empties the webhook's Secret")
	var renewed *corev1.Secret
	poll(t, "the rotator writes a new CA", func() (bool, error) {
		s, err := kube.CoreV1().Secrets(namespace).Get(ctx, certSecret, metav1.GetOptions{})
		renewed = s
		return err == nil && len(s.Data["ca.crt"]) > 0 && !bytes.Equal(s.Data["ca.crt"], old.Data["ca.crt"]), nil
	})
	bundlesAre(t, renewed.Data["ca.crt"])

	_, err := servedVerified(webhook.Addr, renewed.Data["ca.crt"])
	assert.Error(t, err, "before its reload the replica serves a certificate the new bundle does not trust: no overlap")
	_, err = servedVerified(webhook.Addr, old.Data["ca.crt"])
	assert.NoError(t, err, "(the old CA's)")
	mountedSecret(t, namespace, certDir, renewed)
	poll(t, "after its reload the replica serves the new CA's certificate", func() (bool, error) {
		_, err := servedVerified(webhook.Addr, renewed.Data["ca.crt"])
		return err == nil, nil
	})
}

// mountedSecret does kubelet's part: it waits for the webhook's Secret (s, when given,
// or whatever the rotator has written) and writes its tls.crt and tls.key into certDir.
func mountedSecret(t *testing.T, namespace, certDir string, s *corev1.Secret) *corev1.Secret {
	t.Helper()
	if s == nil {
		poll(t, "the webhook writes its certificate into its Secret", func() (bool, error) {
			got, err := framework.C.Kube.CoreV1().Secrets(namespace).Get(ctx, certSecret, metav1.GetOptions{})
			s = got
			return err == nil && len(got.Data["tls.crt"]) > 0, nil
		})
	}
	for _, name := range []string{"tls.crt", "tls.key"} {
		writeFile(t, filepath.Join(certDir, name), s.Data[name])
	}
	return s
}

// bundlesAre waits until every webhook of both configurations carries caPEM alone.
func bundlesAre(t *testing.T, caPEM []byte) {
	t.Helper()
	adm := framework.C.Kube.AdmissionregistrationV1()
	poll(t, "every CA bundle is the webhook's CA alone", func() (bool, error) {
		mut, err := adm.MutatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		val, err := adm.ValidatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, w := range mut.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, caPEM) {
				return false, nil
			}
		}
		for _, w := range val.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, caPEM) {
				return false, nil
			}
		}
		return true, nil
	})
}

// servedVerified dials addr afresh and verifies what it serves against caPEM for
// localhost, as the API server verifies against a CA bundle.
func servedVerified(addr string, caPEM []byte) (*x509.Certificate, error) {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr,
		&tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

func retryConflict(f func() error) error {
	for {
		if err := f(); !apierrors.IsConflict(err) {
			return err
		}
	}
}
