package certmanager

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// caSecret is the CA Certificate's Secret: the CA Issuer signs with it, and the CA
// injector reads its ca.crt (the component's cert-manager.io/inject-ca-from).
const caSecret = "litepool-ca"

// Entries no traffic of these tests reaches: the drop of the old CA empties their CA
// bundles, and the injector filling them again shows it has seen the drop.
const (
	probeMutating   = "pods-namespace-default.runwhere.ai"
	probeValidating = "operations.runwhere.ai"
)

// TestCAReplacementWithoutDowntime replaces litepool's CA (a new key, as after a leak)
// by docs/webhook.md's procedure, while two replicas serve and clients create pool
// pods without pause:
//  1. the CA's Secret is deleted: cert-manager issues a new CA with a new key, and the
//     CA injector adds it to every CA bundle beside the old one (it merges);
//  2. the serving and metrics certificates are renewed (from the new CA) and each
//     replica reloads the serving one in turn, as kubelet would, with a burst of
//     creates after each;
//  3. the administrator sets every CA bundle to the new CA alone: the injector never
//     removes a CA that has not expired, and does not put the old one back.
//
// No admission may fail, and at the end the old CA verifies nothing the replicas serve.
func TestCAReplacementWithoutDowntime(t *testing.T) {
	install(t)
	serving := issued(t, servingSecret)
	oldCA := serving.Data["ca.crt"]
	injected(t, oldCA)
	oldSerial := parseCert(t, serving.Data["tls.crt"]).SerialNumber.Int64()

	dirs, replicas, b, tr := servedByTwo(t, serving)
	defer tr.stop()

	// 1. A new CA, with a new key, trusted beside the old one.
	deleted := time.Now()
	require.NoError(t, framework.C.Kube.CoreV1().Secrets(namespace).Delete(ctx, caSecret, metav1.DeleteOptions{}))
	newCA := newCAIssued(t, oldCA)
	bundlesHold(t, "the CA injector adds the new CA beside the old", oldCA, newCA)
	t.Logf("the new CA was in every CA bundle %v after its Secret was deleted", time.Since(deleted).Round(100*time.Millisecond))
	now, err := framework.C.Kube.CoreV1().Secrets(namespace).Get(ctx, servingSecret, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, oldSerial, parseCert(t, now.Data["tls.crt"]).SerialNumber.Int64(),
		"a new CA reissues nothing by itself: the serving certificate waits for its renewal")
	tr.waitFor(t, tr.created.Load()+20)

	// 2. The serving certificate from the new CA, replica by replica.
	renew(t, servingSecret)
	renewed := reissued(t, oldSerial)
	require.Equal(t, newCA, renewed.Data["ca.crt"], "the serving certificate is the new CA's")
	leaf := parseCert(t, renewed.Data["tls.crt"])
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool(newCA), DNSName: webhookName})
	require.NoError(t, err, "the new serving certificate verifies against the new CA")
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool(oldCA), DNSName: webhookName})
	require.Error(t, err, "and not against the old one")
	renew(t, metricsSecret)
	poll(t, "cert-manager renews the metrics certificate from the new CA", func() (bool, error) {
		s, err := framework.C.Kube.CoreV1().Secrets(namespace).Get(ctx, metricsSecret, metav1.GetOptions{})
		return err == nil && string(s.Data["ca.crt"]) == string(newCA), nil
	})
	for i := range replicas {
		writeFiles(t, dirs[i], renewed)
		poll(t, fmt.Sprintf("replica %d serves the new CA's certificate", i), func() (bool, error) {
			s, err := servedSerial(replicas[i].Addr, newCA)
			return err == nil && s == leaf.SerialNumber.Int64(), nil
		})
		b.SendNewTo(i)
		tr.burst(t, 16+int(b.Connections[0].Load()+b.Connections[1].Load()))
		b.SendNewTo(-1)
	}

	// 3. The old CA dropped by the administrator; the injector leaves it out.
	dropOldCA(t, newCA)
	bundlesHold(t, "the injector fills the emptied probe entries with the new CA alone", newCA)
	for i := range replicas {
		_, err := servedSerial(replicas[i].Addr, oldCA)
		assert.Error(t, err, "replica %d serves nothing the old CA verifies", i)
	}
	tr.burst(t, 16+int(b.Connections[0].Load()+b.Connections[1].Load()))
	tr.waitFor(t, tr.created.Load()+20)

	tr.stop()
	created, failures := tr.created.Load(), tr.failures()
	t.Logf("%d pods admitted through the CA replacement (%d connections to replica 0, %d to replica 1), %d failures",
		created, b.Connections[0].Load(), b.Connections[1].Load(), len(failures))
	assert.Empty(t, failures, "no admission failed while the CA was replaced")
	assert.GreaterOrEqual(t, created, int64(100), "traffic ran throughout")
}

// newCAIssued waits until cert-manager has issued the CA Certificate again, with a key
// other than old's, and returns the new CA.
func newCAIssued(t *testing.T, old []byte) []byte {
	t.Helper()
	oldCert := parseCert(t, old)
	poll(t, "cert-manager issues a new CA", func() (bool, error) {
		s, err := framework.C.Kube.CoreV1().Secrets(namespace).Get(ctx, caSecret, metav1.GetOptions{})
		if err != nil || len(s.Data["tls.crt"]) == 0 {
			return false, nil
		}
		c := parseCert(t, s.Data["tls.crt"])
		return c.IsCA && !samePublicKey(oldCert.PublicKey, c.PublicKey), nil
	})
	s := issued(t, caSecret)
	require.Equal(t, s.Data["tls.crt"], s.Data["ca.crt"], "a self-signed CA is its own ca.crt")
	return s.Data["ca.crt"]
}

func samePublicKey(a, b any) bool {
	k, ok := a.(interface{ Equal(x any) bool })
	return ok && k.Equal(b)
}

// bundlesHold waits until every CA bundle of both configurations holds exactly the
// certificates of cas (in any order).
func bundlesHold(t *testing.T, what string, cas ...[]byte) {
	t.Helper()
	var want [][]byte
	for _, ca := range cas {
		want = append(want, certsOf(ca)...)
	}
	poll(t, what, func() (bool, error) {
		bundles, err := caBundles()
		if err != nil {
			return false, err
		}
		for _, b := range bundles {
			got := certsOf(b)
			if len(got) != len(want) {
				return false, nil
			}
			for _, w := range want {
				if !slices.ContainsFunc(got, func(g []byte) bool { return string(g) == string(w) }) {
					return false, nil
				}
			}
		}
		return len(bundles) > 0, nil
	})
}

// certsOf are the DER certificates of a PEM bundle.
func certsOf(bundle []byte) [][]byte {
	var out [][]byte
	for {
		var block *pem.Block
		block, bundle = pem.Decode(bundle)
		if block == nil {
			return out
		}
		out = append(out, block.Bytes)
	}
}

// dropOldCA is the procedure's last step, as the administrator: hack/set-ca-bundle.sh
// sets every CA bundle to the new CA. Then the probe entries are emptied, so that the
// injector's filling them shows it has reconciled both configurations since the drop.
func dropOldCA(t *testing.T, newCA []byte) {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(framework.Root, "hack", "set-ca-bundle.sh"), namespace)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+framework.C.Kubeconfig)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "hack/set-ca-bundle.sh: %s", out)
	bundlesHold(t, "hack/set-ca-bundle.sh set every CA bundle to the new CA", newCA)
	emptyProbes(t)
}

// emptyProbes empties the CA bundles of the probe entries, which the CA injector fills
// again when it next reconciles the configurations: what it writes then shows what it
// reads.
func emptyProbes(t *testing.T) {
	t.Helper()
	adm := framework.C.Kube.AdmissionregistrationV1()
	require.NoError(t, retryConflict(func() error {
		mut, err := adm.MutatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i, w := range mut.Webhooks {
			if w.Name == probeMutating {
				mut.Webhooks[i].ClientConfig.CABundle = nil
			}
		}
		_, err = adm.MutatingWebhookConfigurations().Update(ctx, mut, metav1.UpdateOptions{})
		return err
	}))
	require.NoError(t, retryConflict(func() error {
		val, err := adm.ValidatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i, w := range val.Webhooks {
			if w.Name == probeValidating {
				val.Webhooks[i].ClientConfig.CABundle = nil
			}
		}
		_, err = adm.ValidatingWebhookConfigurations().Update(ctx, val, metav1.UpdateOptions{})
		return err
	}))
}
