package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	defaultNamespace = "litepool-system"
	otherNamespace   = "gpu-ops"
	webhookSA        = "litepool-webhook"
	controllerSA     = "litepool-controller"
	certSecret       = "litepool-webhook-cert"
	configName       = "litepool-webhook"
	waitInterval     = 250 * time.Millisecond
	waitTimeout      = 90 * time.Second
	tokenDuration    = "2h"
)

var ctx = context.Background()

// TestInstall applies deploy/webhook as a user would, then checks, in order: what was
// installed, what each identity may do, and each identity at work under its own token,
// with its /metrics. The webhook configurations it installs send pool pods, pool writes
// and node departures to a Service whose pods kwok only pretends to run, so they are
// deleted at the end (this keeps a LITEPOOL_E2E_KEEP cluster usable).
func TestInstall(t *testing.T) {
	testInstall(t, defaultNamespace, filepath.Join(framework.Root, "deploy", "webhook"))
}

// TestInstallIntoAnotherNamespace installs litepool into gpu-ops with the overlay
// docs/install.md shows ("Into another namespace"), and checks the same as TestInstall:
// RBAC binds the ServiceAccounts of gpu-ops, the API server calls the webhook there,
// both identities work under their tokens, and the guard holds them to the CA bundle
// (without the overlay's transformer it held the ServiceAccounts of litepool-system).
func TestInstallIntoAnotherNamespace(t *testing.T) {
	testInstall(t, otherNamespace, writeDocOverlay(t))
}

// testInstall applies the kustomization dir, which installs litepool into namespace,
// and checks the install.
func testInstall(t *testing.T, namespace, dir string) {
	res := framework.C.Kubectl(t, "", "apply", "-k", dir)
	require.Zero(t, res.ExitCode, "kubectl apply -k %s:\n%s\n%s", dir, res.Stdout, res.Stderr)
	t.Cleanup(removeWebhookConfigurations)
	t.Run("applied", func(t *testing.T) { testApplied(t, namespace) })
	t.Run("webhook identity", func(t *testing.T) { testWebhookIdentity(t, namespace) })
	t.Run("controller identity", func(t *testing.T) { testControllerIdentity(t, namespace) })
	t.Run("at work", func(t *testing.T) { testAtWork(t, namespace) })
	t.Run("guard", func(t *testing.T) { testGuard(t, namespace) })
	t.Run("self-managed CA replaced", func(t *testing.T) { testSelfManagedCAReplaced(t, namespace) })
}

func removeWebhookConfigurations() {
	kube := framework.C.Kube
	_ = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, configName, metav1.DeleteOptions{})
	_ = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, configName, metav1.DeleteOptions{})
}

// After `kubectl apply -k deploy/webhook` both Deployments, their ServiceAccounts and
// their PDBs exist as rendered.
func testApplied(t *testing.T, namespace string) {
	kube := framework.C.Kube
	for name, account := range map[string]string{"litepool-webhook": webhookSA, "litepool-controller": controllerSA} {
		d, err := kube.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, account, d.Spec.Template.Spec.ServiceAccountName)
		_, err = kube.CoreV1().ServiceAccounts(namespace).Get(ctx, account, metav1.GetOptions{})
		assert.NoError(t, err, "ServiceAccount %s", account)
		_, err = kube.PolicyV1().PodDisruptionBudgets(namespace).Get(ctx, name, metav1.GetOptions{})
		assert.NoError(t, err, "PodDisruptionBudget %s", name)
	}
}

// canI is one `kubectl auth can-i` question and its expected answer.
type canI struct {
	verb, resource, subresource, namespace string
	want                                   bool
}

func (c canI) String() string {
	s := c.verb + " " + c.resource
	if c.subresource != "" {
		s += "/" + c.subresource
	}
	if c.namespace != "" {
		s += " -n " + c.namespace
	}
	return s
}

// ask runs `kubectl auth can-i` as the ServiceAccount sa, with the groups its token
// carries (impersonating the user alone would leave out what the groups are granted).
func ask(t *testing.T, namespace, sa string, q canI) bool {
	t.Helper()
	args := []string{"auth", "can-i", q.verb, q.resource,
		"--as=system:serviceaccount:" + namespace + ":" + sa,
		"--as-group=system:serviceaccounts", "--as-group=system:serviceaccounts:" + namespace, "--as-group=system:authenticated"}
	if q.subresource != "" {
		args = append(args, "--subresource="+q.subresource)
	}
	if q.namespace != "" {
		args = append(args, "-n", q.namespace)
	}
	res := framework.C.Kubectl(t, "", args...)
	answer := strings.TrimSpace(res.Stdout)
	require.Contains(t, []string{"yes", "no"}, answer, "kubectl %s: %s", strings.Join(args, " "), res.Stderr)
	return answer == "yes"
}

func everyNamespace(namespace string) []string {
	return []string{"default", "kube-system", namespace}
}

// The webhook's identity reads what the rules read and writes its certificate, its
// two webhook configurations and departure ConfigMaps: it cannot create a pod or a Job
// anywhere, patch a node, evict or delete a pod, or read any other Secret.
func testWebhookIdentity(t *testing.T, namespace string) {
	var table []canI
	for _, ns := range everyNamespace(namespace) {
		table = append(table,
			canI{verb: "create", resource: "pods", namespace: ns},
			canI{verb: "create", resource: "jobs.batch", namespace: ns},
			canI{verb: "delete", resource: "pods", namespace: ns},
			canI{verb: "create", resource: "pods", subresource: "eviction", namespace: ns},
			canI{verb: "list", resource: "secrets", namespace: ns},
			canI{verb: "list", resource: "pods", namespace: ns, want: true},
		)
	}
	table = append(table,
		canI{verb: "get", resource: "secrets", namespace: "kube-system"},
		canI{verb: "get", resource: "secrets", namespace: "default"},
		canI{verb: "get", resource: "secrets/some-other-secret", namespace: namespace},
		canI{verb: "get", resource: "secrets/" + certSecret, namespace: namespace, want: true},
		canI{verb: "update", resource: "secrets/" + certSecret, namespace: namespace, want: true},
		canI{verb: "patch", resource: "nodes"},
		canI{verb: "update", resource: "nodes"},
		canI{verb: "list", resource: "nodes", want: true},
		canI{verb: "list", resource: "namespaces", want: true},
		canI{verb: "list", resource: "pools.runwhere.ai", want: true},
		canI{verb: "update", resource: "pools.runwhere.ai"},
		canI{verb: "patch", resource: "pools.runwhere.ai", subresource: "status"},
		canI{verb: "update", resource: "mutatingwebhookconfigurations/" + configName, want: true},
		canI{verb: "update", resource: "validatingwebhookconfigurations/" + configName, want: true},
		canI{verb: "update", resource: "validatingwebhookconfigurations/someone-elses"},
		canI{verb: "create", resource: "validatingwebhookconfigurations"},
		canI{verb: "create", resource: "configmaps", namespace: namespace, want: true},
		canI{verb: "create", resource: "configmaps", namespace: "kube-system"},
		canI{verb: "create", resource: "leases.coordination.k8s.io", namespace: namespace},
		canI{verb: "create", resource: "tokenreviews.authentication.k8s.io", want: true},
		canI{verb: "create", resource: "subjectaccessreviews.authorization.k8s.io", want: true},
		// P5 for claims reads a pod's claim or template and its DeviceClass by name.
		canI{verb: "get", resource: "resourceclaimtemplates.resource.k8s.io", namespace: "team-a", want: true},
		canI{verb: "get", resource: "resourceclaims.resource.k8s.io", namespace: "team-a", want: true},
		canI{verb: "get", resource: "deviceclasses.resource.k8s.io", want: true},
		canI{verb: "list", resource: "resourceclaims.resource.k8s.io", namespace: "team-a"},
		canI{verb: "create", resource: "resourceclaims.resource.k8s.io", namespace: "team-a"},
	)
	check(t, namespace, webhookSA, table)
}

// The controller's identity patches nodes and evicts pods anywhere, and creates pods
// and Jobs only in litepool's own namespace; it reads no Secret at all.
func testControllerIdentity(t *testing.T, namespace string) {
	var table []canI
	for _, ns := range everyNamespace(namespace) {
		mine := ns == namespace
		table = append(table,
			canI{verb: "create", resource: "pods", namespace: ns, want: mine},
			canI{verb: "delete", resource: "pods", namespace: ns, want: mine},
			canI{verb: "create", resource: "jobs.batch", namespace: ns, want: mine},
			canI{verb: "delete", resource: "jobs.batch", namespace: ns, want: mine},
			canI{verb: "create", resource: "pods", subresource: "eviction", namespace: ns, want: true},
			canI{verb: "get", resource: "secrets", namespace: ns},
			canI{verb: "list", resource: "secrets", namespace: ns},
		)
	}
	table = append(table,
		canI{verb: "create", resource: "pods", subresource: "eviction", namespace: "team-a", want: true},
		canI{verb: "create", resource: "pods", namespace: "team-a"},
		canI{verb: "patch", resource: "nodes", want: true},
		canI{verb: "update", resource: "nodes", want: true},
		canI{verb: "delete", resource: "nodes"},
		canI{verb: "patch", resource: "pools.runwhere.ai", subresource: "status", want: true},
		canI{verb: "create", resource: "events.events.k8s.io", namespace: "default", want: true},
		canI{verb: "create", resource: "leases.coordination.k8s.io", namespace: namespace, want: true},
		canI{verb: "update", resource: "leases.coordination.k8s.io/litepool-controller", namespace: namespace, want: true},
		canI{verb: "update", resource: "leases.coordination.k8s.io/kube-scheduler", namespace: "kube-system"},
		canI{verb: "update", resource: "mutatingwebhookconfigurations/" + configName},
		canI{verb: "update", resource: "validatingwebhookconfigurations/" + configName},
		canI{verb: "create", resource: "configmaps", namespace: namespace},
		canI{verb: "create", resource: "tokenreviews.authentication.k8s.io", want: true},
		canI{verb: "create", resource: "subjectaccessreviews.authorization.k8s.io", want: true},
	)
	check(t, namespace, controllerSA, table)
}

func check(t *testing.T, namespace, sa string, table []canI) {
	t.Helper()
	var report strings.Builder
	for _, q := range table {
		got := ask(t, namespace, sa, q)
		fmt.Fprintf(&report, "%-60s %v\n", q, yesNo(got))
		assert.Equal(t, q.want, got, "kubectl auth can-i %s --as=system:serviceaccount:%s:%s", q, namespace, sa)
	}
	t.Logf("%s:\n%s", sa, report.String())
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// token is a fresh token of the ServiceAccount namespace/sa (`kubectl create token`).
func token(t *testing.T, ns, sa string) string {
	t.Helper()
	res := framework.C.Kubectl(t, "", "create", "token", sa, "-n", ns, "--duration="+tokenDuration)
	require.Zero(t, res.ExitCode, res.Stderr)
	return strings.TrimSpace(res.Stdout)
}

// kubeconfigAs writes a kubeconfig for the cluster that authenticates with the
// ServiceAccount's token alone, so a process run with it has that identity's rights.
func kubeconfigAs(t *testing.T, namespace, sa string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(framework.C.Kubeconfig)
	require.NoError(t, err)
	cur := cfg.Contexts[cfg.CurrentContext]
	require.NotNil(t, cur, "current context of %s", framework.C.Kubeconfig)
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{sa: {Token: token(t, namespace, sa)}}
	cur.AuthInfo = sa
	path := filepath.Join(t.TempDir(), sa+".kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// ensureServiceAccount creates namespace/name unless it exists.
func ensureServiceAccount(t *testing.T, ns, name string) {
	t.Helper()
	_, err := framework.C.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// bindMetricsReader binds ClusterRole litepool-metrics-reader to namespace/sa, as
// deploy/monitoring does for Prometheus.
func bindMetricsReader(t *testing.T, ns, sa string) {
	t.Helper()
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + sa + "-metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "litepool-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}}
	_, err := framework.C.Kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

func poll(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(context.Context) (bool, error) { return cond() })
	require.NoError(t, err, what)
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, b, 0o600))
}
