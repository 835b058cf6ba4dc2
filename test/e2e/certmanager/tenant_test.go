package certmanager

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	tenantNamespace = "tenant-certs"
	tenantUser      = "tenant-certs-admin"
)

var issuersGVR = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "issuers"}

// TestTenantCertificatesChooseNoCA (attack matrix, row "39"): a tenant who may create
// cert-manager Issuers and Certificates in their own namespace makes a CA of their own
// and, from it, Certificates named as litepool's (`litepool-ca`, `litepool-webhook-cert`,
// for litepool's Service names), one annotated cert-manager.io/inject-ca-from with
// litepool's CA Certificate. The CA injector, which reconciles both configurations
// after these exist (the probe entries, emptied, are filled again), injects litepool's
// CA alone: it reads what the configurations' own annotation names, in litepool's
// namespace, and the tenant may not write that annotation (RBAC; the guard for
// litepool's identities and the injector).
func TestTenantCertificatesChooseNoCA(t *testing.T) {
	install(t)
	injected(t, issued(t, caSecret).Data["ca.crt"])
	litepoolCA := issued(t, caSecret).Data["ca.crt"]
	tenant := tenantDynamic(t)

	apply := func(gvr schema.GroupVersionResource, obj map[string]any) {
		t.Helper()
		_, err := tenant.Resource(gvr).Namespace(tenantNamespace).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		require.NoError(t, err, "the tenant creates %s", gvr.Resource)
	}
	apply(issuersGVR, cmObject("Issuer", "tenant-selfsigned", nil, map[string]any{"selfSigned": map[string]any{}}))
	apply(certificatesGVR, cmObject("Certificate", caSecret, nil, map[string]any{"isCA": true, "commonName": "litepool-ca",
		"secretName": caSecret, "issuerRef": map[string]any{"kind": "Issuer", "name": "tenant-selfsigned"}}))
	apply(issuersGVR, cmObject("Issuer", caSecret, nil, map[string]any{"ca": map[string]any{"secretName": caSecret}}))
	apply(certificatesGVR, cmObject("Certificate", servingSecret,
		map[string]any{"cert-manager.io/inject-ca-from": namespace + "/" + caSecret},
		map[string]any{"secretName": servingSecret, "issuerRef": map[string]any{"kind": "Issuer", "name": caSecret},
			"dnsNames": []any{webhookName, webhookName + ".cluster.local", "localhost"}}))
	var tenantCA []byte
	poll(t, "cert-manager issues the tenant's Certificates", func() (bool, error) {
		s, err := framework.C.Kube.CoreV1().Secrets(tenantNamespace).Get(ctx, servingSecret, metav1.GetOptions{})
		if err != nil || len(s.Data["ca.crt"]) == 0 {
			return false, nil
		}
		tenantCA = s.Data["ca.crt"]
		return true, nil
	})
	require.NotEqual(t, litepoolCA, tenantCA)

	_, err := as(t, tenantUser).AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, configName, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"cert-manager.io/inject-ca-from":"`+tenantNamespace+`/`+caSecret+`"}}}`), metav1.PatchOptions{})
	assert.True(t, apierrors.IsForbidden(err), "the tenant may not point the injector at their CA: %v", err)

	emptyProbes(t)
	bundlesHold(t, "the injector fills the probe entries with litepool's CA alone", litepoolCA)
}

// TestTenantSecretsChooseNoCA (attack matrix, row "39"): a tenant who may create and
// update Secrets in their own namespace writes Secrets named as litepool's
// (`litepool-ca`, `litepool-webhook-cert`) holding a CA, key and certificate of their own
// for litepool's Service names, annotated as cert-manager's
// (cert-manager.io/certificate-name) and for direct injection
// (cert-manager.io/allow-direct-injection). The injector, after reconciling both
// configurations, injects litepool's CA alone; the webhook's pods mount the Secret of
// their own namespace (a pod cannot mount another's), so nothing serves the tenant's.
func TestTenantSecretsChooseNoCA(t *testing.T) {
	install(t)
	litepoolCA := issued(t, caSecret).Data["ca.crt"]
	injected(t, litepoolCA)
	caPEM, leafPEM, leafKeyPEM := tenantCertificates(t)
	secrets := as(t, tenantUser).CoreV1().Secrets(tenantNamespace)
	tenantRights(t)
	// The names litepool's Secrets carry: made, or (where the tenant's Certificates of
	// the row above made them) rewritten.
	for _, name := range []string{caSecret, servingSecret} {
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name,
				Annotations: map[string]string{"cert-manager.io/certificate-name": name, "cert-manager.io/allow-direct-injection": "true"}},
				Data: map[string][]byte{"ca.crt": caPEM, "tls.crt": leafPEM, "tls.key": leafKeyPEM}}, metav1.CreateOptions{})
			require.NoError(t, err)
			continue
		}
		require.NoError(t, err)
		s.Annotations["cert-manager.io/allow-direct-injection"] = "true"
		s.Data["ca.crt"] = append(s.Data["ca.crt"], caPEM...)
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
		require.NoError(t, err, "the tenant rewrites Secret %s", name)
	}

	emptyProbes(t)
	bundlesHold(t, "the injector fills the probe entries with litepool's CA alone", litepoolCA)
}

// tenantRights makes tenantNamespace and gives tenantUser, there only, cert-manager's
// Issuers and Certificates and Secrets (all verbs).
func tenantRights(t *testing.T) {
	t.Helper()
	kube := framework.C.Kube
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNamespace}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	_, err = kube.RbacV1().Roles(tenantNamespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant-certs"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"cert-manager.io"}, Resources: []string{"issuers", "certificates"}, Verbs: []string{"*"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"*"}},
	}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	_, err = kube.RbacV1().RoleBindings(tenantNamespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-certs"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant-certs"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: tenantUser}}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	framework.WaitAuthorizedIn(t, tenantNamespace, tenantUser, nil, "create", "cert-manager.io", "certificates")
}

func tenantDynamic(t *testing.T) dynamic.Interface {
	t.Helper()
	tenantRights(t)
	cfg := rest.CopyConfig(framework.C.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: tenantUser, Groups: []string{"system:authenticated"}}
	d, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	return d
}

func cmObject(kind, name string, annotations, spec map[string]any) map[string]any {
	meta := map[string]any{"name": name, "namespace": tenantNamespace}
	if annotations != nil {
		meta["annotations"] = annotations
	}
	return map[string]any{"apiVersion": "cert-manager.io/v1", "kind": kind, "metadata": meta, "spec": spec}
}

// tenantCertificates are a CA of the tenant's and a certificate it signed for
// litepool's Service names, in PEM.
func tenantCertificates(t *testing.T) (caPEM, leafPEM, leafKeyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "litepool-ca"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), DNSNames: []string{webhookName, "localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caTmpl, &leafKey.PublicKey, caKey)
	require.NoError(t, err)
	return pemOf("CERTIFICATE", caDER), pemOf("CERTIFICATE", leafDER), pemKey(t, leafKey)
}

func pemOf(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

func pemKey(t *testing.T, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(k)
	require.NoError(t, err)
	return pemOf("EC PRIVATE KEY", der)
}
