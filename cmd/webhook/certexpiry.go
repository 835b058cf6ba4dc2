package main

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/runwhere-ai/litepool/pkg/admission"
)

// certificateExpiryEvery is how often the serving certificate's expiry is read again: a
// rotation shows within a minute, far inside the alert's days of warning.
const certificateExpiryEvery = time.Minute

// addCertificateExpiry reports when the certificate in --cert-dir expires
// (litepool_webhook_certificate_expiry_timestamp_seconds, docs/runbook.md).
func addCertificateExpiry(mgr manager.Manager, o options) error {
	return mgr.Add(admission.CertificateExpiry{Dir: o.certDir, Every: certificateExpiryEvery})
}
