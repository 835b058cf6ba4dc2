// Package install checks deploy/webhook as it is installed: `kubectl apply -k` on a
// local control plane, then what each of litepool's two identities may and may not do
// (`kubectl auth can-i` as their ServiceAccounts), then the binary run as each identity
// (its own token, the rights rbac.yaml grants and no more) until it works: the webhook
// issues its certificate and answers a review, the controller takes the Lease and
// writes Pool status. /metrics answers only a caller bound to litepool-metrics-reader.
//
// kwok plays the kubelet, so the Deployments' pods only appear Running; the processes
// that matter run locally under the ServiceAccounts' tokens. The package runs in a
// cluster of its own and removes the webhook configurations when it is done.
package install

import (
	"testing"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

func TestMain(m *testing.M) { framework.Main(m, "install") }
