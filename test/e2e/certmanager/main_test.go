// Package certmanager installs deploy/webhook with its cert-manager component and runs it
// against cert-manager's own controller and CA injector (built from the module
// hack/tools-certmanager pins, run as local processes): cert-manager issues litepool's
// CA, serving and metrics certificates, the CA injector fills the CA bundles, the
// webhook serves the issued files and the API server trusts it; /metrics is verified
// against the issued CA as deploy/monitoring's ServiceMonitors verify it; the serving
// certificate rotates, and the CA is replaced, under two replicas while clients create
// pods; the webhook runs with only the rights the component leaves it, the guard holds
// the CA injector (run as its chart's ServiceAccount) to the CA bundles, and tenants'
// cert-manager objects and Secrets choose no CA (the attack matrix's "39" rows).
//
// kwok plays the kubelet, so the test does a kubelet's part: it writes the Secrets'
// files into each replica's certificate directory, one replica at a time.
package certmanager

import (
	"fmt"
	"os"
	"testing"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

var cm *framework.CertManager

func TestMain(m *testing.M) {
	framework.MainWith(m, "certmanager", "cert-manager", func(c *framework.Cluster) (func(), error) {
		var err error
		cm, err = framework.StartCertManager(c)
		if err != nil {
			return nil, err
		}
		return func() {
			if exited := cm.Exited(); exited != "" {
				fmt.Fprintf(os.Stderr, "e2e: cert-manager's %s exited early (logs: %v)\n", exited, cm.Logs)
			}
			cm.Stop()
		}, nil
	})
}
