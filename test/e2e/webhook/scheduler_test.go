package webhook

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	secondScheduler      = "second-scheduler"
	ssNS, ssPool, ssNode = "ss-team", "ss-excl", "ss-node-1"
	// ssAgentNS holds the DaemonSet: a namespace the shipped webhook trusts with node
	// agents (--agent-namespace), whose agents the conditions leave out while it is down.
	ssAgentNS                  = "monitoring"
	ssSA, ssSANamespace        = "second-scheduler", "default"
	ssOpenPool, ssOpenNode     = "ss-open", "ss-node-2"
	ssOpenNodeB                = "ss-node-3"
	schedulerWaitForBinding    = 90 * time.Second
	schedulerWaitForWebhookOff = 20 * time.Second
)

// TestSecondSchedulerWithWebhookDown: a second kube-scheduler, authenticated as a
// ServiceAccount bound to the system:kube-scheduler and system:volume-scheduler
// ClusterRoles (not as the user system:kube-scheduler), keeps binding while the webhook
// is down: ordinary pods and a tolerate-all DaemonSet's pods are scheduled on every node
// but the exclusive pool's, whose binding waits for the webhook and goes through once
// it is back; a pool departure (N3) is refused meanwhile. With the webhook up, a binding
// onto the exclusive node by that identity is refused.
func TestSecondSchedulerWithWebhookDown(t *testing.T) {
	kube := framework.C.Kube
	t.Cleanup(func() { removeSchedulerFixture(kube) })
	crt := newCerts(t)
	port, err := localwebhook.FreePort()
	require.NoError(t, err)
	// The same port each time: the registered configurations point at it.
	start := func() *localwebhook.Process { return launchOnPort(t, port, crt, "--controllers") }
	require.NoError(t, localwebhook.EnsureNamespace(ctx, kube, localwebhook.Namespace))
	proc := start()
	registerWebhooks(t, kube, proc.Addr, crt.CAPEM)
	require.NoError(t, localwebhook.WaitEffective(ctx, kube, ns, 30*time.Second))

	pools := poolclient.New(framework.C.Dynamic)
	_, err = pools.Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: ssPool},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeDevelopment, Exclusive: true}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = pools.Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: ssOpenPool},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ssNS}}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.CreateReadyNode(t, kube, ssNode, ssPool)
	framework.CreateReadyNode(t, kube, ssOpenNode, ssOpenPool)
	framework.CreateReadyNode(t, kube, ssOpenNodeB, ssOpenPool)
	waitTaint(t, kube, ssNode, true)
	waitBindingTargetsInclude(t, kube, ssNode)

	schedKube, schedKubeconfig := schedulerIdentity(t, kube)
	runSecondScheduler(t, schedKubeconfig)

	t.Run("with the webhook up, a binding onto an exclusive node by a non-scheduler identity is refused", func(t *testing.T) {
		p := newPod("hand-bound-ss", nil, nil)
		p.Spec.SchedulerName = "no-such-scheduler"
		_, err := createPod(kube, ssNS, p)
		require.NoError(t, err)
		err = schedKube.CoreV1().Pods(ssNS).Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "hand-bound-ss"},
			Target: corev1.ObjectReference{Kind: "Node", Name: ssNode}}, metav1.CreateOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), `admission webhook "pod-placement-bindings.runwhere.ai" denied the request: [P6] pod ss-team/hand-bound-ss may not run on node "ss-node-1": it is bound to the node`)
		assert.Equal(t, []string{"P6"}, policy.RulesOfStatus(err))
	})

	// The webhook stops; its configurations stay registered, pointing at nothing.
	proc.Kill()
	<-proc.Done()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, schedulerWaitForWebhookOff, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Labels: map[string]string{policy.LabelPool: localwebhook.ProbePool}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "failed calling webhook"), nil
	}), "the webhook is down")

	t.Run("webhook down: ordinary pods are scheduled by the second scheduler", func(t *testing.T) {
		for i := range 3 {
			p := newPod(fmt.Sprintf("ordinary-%d", i), nil, nil)
			p.Spec.SchedulerName = secondScheduler
			_, err := createPod(kube, ssNS, p)
			require.NoError(t, err)
		}
		for i := range 3 {
			waitBound(t, kube, ssNS, fmt.Sprintf("ordinary-%d", i))
		}
	})
	t.Run("webhook down: a tolerate-all DaemonSet is scheduled on every node but the exclusive one", func(t *testing.T) {
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent"}, Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ss-agent"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "ss-agent"}}, Spec: corev1.PodSpec{
				SchedulerName: secondScheduler,
				Tolerations:   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers:    []corev1.Container{{Name: "agent", Image: "busybox"}}}}}}
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ssAgentNS}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
		_, err = kube.AppsV1().DaemonSets(ssAgentNS).Create(ctx, ds, metav1.CreateOptions{})
		require.NoError(t, err)
		nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		var want []string
		for _, n := range nodes.Items {
			if n.Name != ssNode {
				want = append(want, n.Name)
			}
		}
		var bound map[string]string
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, schedulerWaitForBinding, true, func(ctx context.Context) (bool, error) {
			bound = daemonPods(t, kube)
			for _, n := range want {
				if bound[n] == "" {
					return false, nil
				}
			}
			return true, nil
		}), "every node but %s runs a pod of the DaemonSet: want %v, bound %v", ssNode, want, bound)
		assert.Empty(t, bound[ssNode], "the binding onto the exclusive node waits for the webhook")
		t.Logf("webhook down: the second scheduler bound the DaemonSet's pods on %d nodes", len(want))
	})
	t.Run("webhook down: a pool departure is refused", func(t *testing.T) {
		_, err := kube.CoreV1().Nodes().Patch(ctx, ssOpenNodeB, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"`+policy.LabelPool+`":null}}}`), metav1.PatchOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), `failed calling webhook "node-departures.runwhere.ai"`)
		n, err := kube.CoreV1().Nodes().Get(ctx, ssOpenNodeB, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, ssOpenPool, n.Labels[policy.LabelPool])
	})
	t.Run("webhook back: the DaemonSet's pod on the exclusive node is bound", func(t *testing.T) {
		start()
		var bound map[string]string
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, schedulerWaitForBinding, true, func(ctx context.Context) (bool, error) {
			bound = daemonPods(t, kube)
			return bound[ssNode] != "", nil
		}), "the DaemonSet's pod on %s: %v", ssNode, bound)
	})
}

// daemonPods maps node to the DaemonSet pod bound to it.
func daemonPods(t *testing.T, kube kubernetes.Interface) map[string]string {
	t.Helper()
	pods, err := kube.CoreV1().Pods(ssAgentNS).List(ctx, metav1.ListOptions{LabelSelector: "app=ss-agent"})
	require.NoError(t, err)
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			out[p.Spec.NodeName] = p.Name
		}
	}
	return out
}

func waitBound(t *testing.T, kube kubernetes.Interface, namespace, name string) {
	t.Helper()
	var node string
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, schedulerWaitForBinding, true, func(ctx context.Context) (bool, error) {
		p, err := kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = p.Spec.NodeName
		return node != "", nil
	}), "pod %s/%s was never bound", namespace, name)
}

// waitBindingTargetsInclude waits until the controller lists node in P6's binding
// match condition.
func waitBindingTargetsInclude(t *testing.T, kube kubernetes.Interface, node string) {
	t.Helper()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		cfg, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "litepool-webhook", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, w := range cfg.Webhooks {
			for _, c := range w.MatchConditions {
				if strings.HasPrefix(c.Name, "binding-onto-an-exclusive-node") && strings.Contains(c.Expression, "'"+node+"'") {
					return true, nil
				}
			}
		}
		return false, nil
	}), "node %s never listed as a binding target", node)
}

// schedulerIdentity makes a ServiceAccount bound to the ClusterRoles a kube-scheduler
// needs, and returns a clientset and a kubeconfig file that authenticate with its token.
func schedulerIdentity(t *testing.T, kube kubernetes.Interface) (kubernetes.Interface, string) {
	t.Helper()
	_, err := kube.CoreV1().ServiceAccounts(ssSANamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ssSA}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, role := range []string{"system:kube-scheduler", "system:volume-scheduler"} {
		_, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + ssSA + "-" + strings.TrimPrefix(role, "system:")},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: ssSA, Namespace: ssSANamespace}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	framework.WaitAuthorized(t, "system:serviceaccount:"+ssSANamespace+":"+ssSA, nil, "create", "", "bindings")
	tok, err := kube.CoreV1().ServiceAccounts(ssSANamespace).CreateToken(ctx, ssSA, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	require.NoError(t, err)

	admin := framework.C.Config
	cluster := &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthority: admin.CAFile, CertificateAuthorityData: admin.CAData}
	if admin.CAFile == "" && len(admin.CAData) == 0 {
		cluster.InsecureSkipTLSVerify = true
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = cluster
	cfg.AuthInfos[ssSA] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: ssSA}
	cfg.CurrentContext = "e2e"
	path := filepath.Join(t.TempDir(), "scheduler.kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	require.NoError(t, err)
	sk, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	review, err := sk.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, "system:serviceaccount:"+ssSANamespace+":"+ssSA, review.Status.UserInfo.Username, "the second scheduler is not system:kube-scheduler")
	return sk, path
}

// runSecondScheduler starts _output/bin/kube-scheduler with a profile of its own.
func runSecondScheduler(t *testing.T, kubeconfig string) {
	t.Helper()
	dir := t.TempDir()
	config := filepath.Join(dir, "scheduler.yaml")
	require.NoError(t, os.WriteFile(config, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: `+kubeconfig+`
leaderElection:
  leaderElect: false
profiles:
- schedulerName: `+secondScheduler+`
`), 0o600))
	logs := &localwebhook.LogBuffer{}
	cmd := exec.Command(filepath.Join(framework.BinDir, "kube-scheduler"), "--config="+config, "--secure-port=0", "-v=2")
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("second scheduler log:\n%s", tail(logs.String(), 6000))
		}
	})
}

// launchOnPort starts litepool-webhook on port with crt's files (and extra flags), killed
// when the test ends, its log shown when the test failed; it returns once the process is
// ready. Tests that restart the webhook pass the same port each time: the registered
// configurations point at it.
func launchOnPort(t *testing.T, port int, crt *localwebhook.Certs, extra ...string) *localwebhook.Process {
	t.Helper()
	logs := &localwebhook.LogBuffer{}
	flags := append(append(framework.AgentNamespaceFlags(), "--cert-mode=files", "--cert-dir="+crt.Dir), extra...)
	p, err := localwebhook.Launch(localwebhook.Options{Binary: filepath.Join(framework.BinDir, "litepool-webhook"), Port: port,
		Kubeconfig: framework.C.Kubeconfig, Namespace: localwebhook.Namespace, Flags: flags, Output: logs})
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("webhook log:\n%s", tail(logs.String(), 6000))
		}
	})
	require.NoError(t, p.WaitReady(ctx, 60*time.Second), logs.String())
	return p
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func removeSchedulerFixture(kube kubernetes.Interface) {
	bg := context.Background()
	_ = kube.AppsV1().DaemonSets(ssAgentNS).Delete(bg, "agent", metav1.DeleteOptions{})
	_ = kube.CoreV1().Namespaces().Delete(bg, ssNS, metav1.DeleteOptions{})
	for _, p := range []string{ssPool, ssOpenPool} {
		_ = poolclient.New(framework.C.Dynamic).Delete(bg, p, metav1.DeleteOptions{})
	}
	for _, n := range []string{ssNode, ssOpenNode, ssOpenNodeB} {
		_ = kube.CoreV1().Nodes().Delete(bg, n, metav1.DeleteOptions{})
	}
	for _, role := range []string{"kube-scheduler", "volume-scheduler"} {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(bg, "e2e-"+ssSA+"-"+role, metav1.DeleteOptions{})
	}
	_ = kube.CoreV1().ServiceAccounts(ssSANamespace).Delete(bg, ssSA, metav1.DeleteOptions{})
}
