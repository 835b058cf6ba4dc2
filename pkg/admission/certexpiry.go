package admission

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// CertificateExpiryMetric is the gauge of the serving certificate's end of validity, which
// the LitepoolWebhookCertificateExpiry alerts read (deploy/monitoring).
const CertificateExpiryMetric = "litepool_webhook_certificate_expiry_timestamp_seconds"

var certificateExpiry = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: CertificateExpiryMetric,
	Help: "Unix time the webhook's serving certificate (tls.crt in --cert-dir, the file the server serves and reloads) stops being valid.",
})

func init() {
	metrics.Registry.MustRegister(certificateExpiry)
}

// CertificateExpiry keeps the gauge on the certificate the webhook server serves. It reads
// the file rather than the server's memory because the server reloads that file when it
// changes (self-rotation, cert-manager): what is on disk is what the next handshake gets.
// Every replica runs it (no leader election): each serves its own copy of the Secret.
type CertificateExpiry struct {
	// Dir holds tls.crt.
	Dir string
	// Every is how often the file is read again.
	Every time.Duration
}

// NeedLeaderElection: every replica reports the certificate it serves.
func (CertificateExpiry) NeedLeaderElection() bool { return false }

// Start reads the certificate now and then every c.Every until ctx ends.
func (c CertificateExpiry) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("certificate-expiry")
	tick := time.NewTicker(c.Every)
	defer tick.Stop()
	for {
		if err := c.Observe(); err != nil {
			// Before the first certificate is written (self mode) this is expected; the
			// gauge stays as it was, and an absent gauge is what the alert's runbook names.
			log.V(1).Info("serving certificate not read", "err", err.Error())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Observe sets the gauge from the first certificate of Dir/tls.crt (the leaf).
func (c CertificateExpiry) Observe() error {
	notAfter, err := leafNotAfter(filepath.Join(c.Dir, "tls.crt"))
	if err != nil {
		return err
	}
	certificateExpiry.Set(float64(notAfter.Unix()))
	return nil
}

func leafNotAfter(path string) (time.Time, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return time.Time{}, fmt.Errorf("%s: no PEM CERTIFICATE block", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return time.Time{}, errors.Join(fmt.Errorf("%s: parsing the certificate", path), err)
	}
	return cert.NotAfter, nil
}
