package admission

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeCert(t *testing.T, dir string, notAfter time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "litepool-webhook.litepool-system.svc"},
		NotBefore: notAfter.Add(-24 * time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
}

// The gauge follows the file the server serves: a rotated certificate moves it.
func TestCertificateExpiryFollowsTheServedFile(t *testing.T) {
	dir := t.TempDir()
	c := CertificateExpiry{Dir: dir, Every: time.Minute}
	first := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	writeCert(t, dir, first)
	require.NoError(t, c.Observe())
	assert.Equal(t, float64(first.Unix()), testutil.ToFloat64(certificateExpiry))

	rotated := first.Add(90 * 24 * time.Hour)
	writeCert(t, dir, rotated)
	require.NoError(t, c.Observe())
	assert.Equal(t, float64(rotated.Unix()), testutil.ToFloat64(certificateExpiry))
}

// A missing or broken file says which, and leaves the last value: a reading error is
// not an expiry.
func TestCertificateExpiryBadFileKeepsTheGauge(t *testing.T) {
	dir := t.TempDir()
	c := CertificateExpiry{Dir: dir, Every: time.Minute}
	at := time.Date(2027, 5, 1, 0, 0, 0, 0, time.UTC)
	writeCert(t, dir, at)
	require.NoError(t, c.Observe())

	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), []byte("not a certificate"), 0o600))
	assert.ErrorContains(t, c.Observe(), "no PEM CERTIFICATE block")
	assert.ErrorContains(t, CertificateExpiry{Dir: t.TempDir()}.Observe(), "tls.crt")
	assert.Equal(t, float64(at.Unix()), testutil.ToFloat64(certificateExpiry))
}
