package attack

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

var ctx = context.Background()

// The fixture: an exclusive pool that admits one namespace, a pool with a floor, a pool
// that becomes exclusive later, and a namespace of the attacker's own.
const (
	exclPool, ownNS, foreignNS = "at-excl", "at-own", "at-foreign"
	floorPool, laterPool       = "at-floor", "at-later"
	statusPool, statusNode     = "at-status", "at-status-1" // minNodes 1, one member
	healthPool, healthNode     = "at-health", "at-health-1" // spec.health, one member
)

var (
	exclNodes  = []string{"at-excl-1", "at-excl-2", "at-excl-3"}
	floorNodes = []string{"at-floor-1", "at-floor-2", "at-floor-3", "at-floor-4"}
	laterNodes = []string{"at-later-1"}
)

// The identities, each with exactly the right its row names.
const (
	tenant      = "mallory"          // edit in at-foreign
	scheduler2  = "second-scheduler" // create bindings and pods/binding, read pods
	nodePatcher = "node-labeller"    // get, list, patch nodes
	npd         = "node-problem-det" // get nodes, patch nodes/status
	draDriver   = "dra-driver"       // create resourceslices
	poolStatus  = "pool-status"      // read pools, update pools/status
	webhookSA   = "system:serviceaccount:litepool-system:litepool-webhook"
	controlSA   = "system:serviceaccount:litepool-system:litepool-controller"
)

func setupFixture(t *testing.T) {
	t.Helper()
	kube := framework.C.Kube
	pools := poolclient.New(framework.C.Dynamic)
	for _, p := range []*v1alpha1.Pool{
		{ObjectMeta: metav1.ObjectMeta{Name: exclPool}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeDevelopment, Exclusive: true, Namespaces: []string{ownNS}}},
		{ObjectMeta: metav1.ObjectMeta{Name: floorPool}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeDevelopment, MinNodes: 2, Namespaces: []string{ownNS}}},
		{ObjectMeta: metav1.ObjectMeta{Name: laterPool}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeDevelopment, Namespaces: []string{ownNS}}},
		{ObjectMeta: metav1.ObjectMeta{Name: statusPool}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeDevelopment, MinNodes: 1}},
		{ObjectMeta: metav1.ObjectMeta{Name: healthPool}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeDevelopment, Health: &v1alpha1.HealthPolicy{Mode: v1alpha1.HealthEnforce}}},
	} {
		_, err := pools.Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, ns := range []string{ownNS, foreignNS} {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for pool, nodes := range map[string][]string{exclPool: exclNodes, floorPool: floorNodes, laterPool: laterNodes, statusPool: {statusNode}, healthPool: {healthNode}} {
		for _, n := range nodes {
			framework.CreateReadyNode(t, kube, n, pool)
		}
	}
	for _, n := range exclNodes {
		waitTaint(t, kube, n, true)
	}
	_, err := kube.RbacV1().RoleBindings(foreignNS).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: tenant},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: tenant}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.WaitAuthorizedIn(t, foreignNS, tenant, nil, "create", "", "pods")
	grant(t, scheduler2,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"bindings", "pods/binding"}, Verbs: []string{"create"}})
	grant(t, nodePatcher, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "patch"}})
	grant(t, npd,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch", "update"}})
	grant(t, poolStatus,
		rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"pools"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"pools/status"}, Verbs: []string{"get", "update", "patch"}})
	grant(t, draDriver, rbacv1.PolicyRule{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices"}, Verbs: []string{"get", "list", "create", "update"}})
	// The webhook's and the controller's shipped rights, and the guard of their
	// webhook configurations, as deploy/webhook installs them.
	for _, f := range []string{"rbac.yaml", "rbac-exclusive.yaml", "webhook-config-guard.yaml"} {
		path := filepath.Join(framework.Root, "deploy", "webhook", f)
		if _, err := os.Stat(path); err != nil {
			t.Logf("deploy/webhook ships no %s", f)
			continue
		}
		r := framework.C.Kubectl(t, "", "apply", "-n", "litepool-system", "-f", path)
		require.Equal(t, 0, r.ExitCode, "%s: %s", f, r.Stderr)
	}
	waitGuardEnforced(t)
}

// waitGuardEnforced waits until the API server enforces litepool-webhook-config-guard: a
// ValidatingAdmissionPolicy takes effect a moment after it is created (the API server's
// policy cache syncs on its own schedule), and a row run before that would see a change
// the guard refuses once in force. The probe is a dry run, so it changes nothing.
func waitGuardEnforced(t *testing.T) {
	t.Helper()
	adm := as(t, webhookSA, saGroups()...).AdmissionregistrationV1()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cfg, err := adm.MutatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cfg.Webhooks[0].Rules[0].Resources = append(cfg.Webhooks[0].Rules[0].Resources, "pods/exec")
		_, err = adm.MutatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "litepool-webhook-config-guard"), nil
	})
	require.NoError(t, err, "litepool-webhook-config-guard never refused the webhook's identity a change of its rules")
}

// grant gives user the rules cluster-wide, and nothing else.
func grant(t *testing.T, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	kube := framework.C.Kube
	_, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "attack-" + user}, Rules: rules}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "attack-" + user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "attack-" + user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.WaitGranted(t, "", user, rules)
}

// as is a client that holds exactly user's rights (impersonation).
func as(t *testing.T, user string, groups ...string) kubernetes.Interface {
	t.Helper()
	kube, err := kubernetes.NewForConfig(asConfig(user, groups...))
	require.NoError(t, err)
	return kube
}

func asConfig(user string, groups ...string) *rest.Config {
	cfg := rest.CopyConfig(framework.C.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	return cfg
}

// waitTaint polls until node carries its pool's exclusive taint (want) or none.
func waitTaint(t *testing.T, kube kubernetes.Interface, node string, want bool) {
	t.Helper()
	var last []corev1.Taint
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = exclusiveTaints(n)
		if !want {
			return len(last) == 0, nil
		}
		return len(last) == 1 && last[0] == policy.ExclusiveTaint(n.Labels[policy.LabelPool]), nil
	}), "node %s: exclusive taint wanted %v, has %v", node, want, last)
}

func exclusiveTaints(n *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	for _, tt := range n.Spec.Taints {
		if tt.Key == policy.LabelPool {
			out = append(out, tt)
		}
	}
	return out
}

func gpuPod(name string, gpus string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "main", Image: "busybox",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus)}}}}}}
}

var tolerateAll = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}

// podsOn lists the pods of namespace bound to node.
func podsOn(t *testing.T, namespace, node string) []string {
	t.Helper()
	list, err := framework.C.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	require.NoError(t, err)
	var out []string
	for _, p := range list.Items {
		out = append(out, p.Name)
	}
	return out
}
