package realnode

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// Issue 38's node agents on the real node: an exclusive pool whose members are the real
// node and a kwok node, admitting only the workloads' namespace; a kwok node of no
// pool; and a tenant with edit in a namespace of its own.
const (
	agentPool   = "rn-excl"
	agentKwok   = "rn-excl-kwok"
	openKwok    = "rn-open-kwok"
	tenantNS    = "rn-tenant"
	tenantUser  = "rn-tenant-user"
	agentDS     = "rn-node-agent"
	tenantDS    = "tenant-agent"
	agentsGrace = int64(1) // linger ignores SIGTERM: cleanup waits this long, not 30 s
)

var containerID = regexp.MustCompile(`^containerd://[0-9a-f]{64}$`)

// testNodeAgents: the webhook is the Deployment deploy/webhook ships, so the list of
// namespaces trusted with node agents is the shipped one (its --agent-namespace flag
// and the same list in the pod-placement conditions). A device-free DaemonSet that
// tolerates every taint, in kube-system and in each listed namespace, runs a real
// container on the exclusive real node (and a pod on the kwok member); a tenant's
// identical DaemonSet, made with edit in its own namespace, gets no pod on either
// member (the DaemonSet controller's creates are refused by P6: FailedCreate) and runs
// on the node of no pool.
func testNodeAgents(t *testing.T) {
	c := framework.C
	kube := c.Kube
	trusted := append([]string{policy.NamespaceKubeSystem}, framework.ShippedAgentNamespaces()...)
	require.Contains(t, trusted, "gpu-operator", "deploy/webhook ships the GPU operator's namespace")
	members := []string{node, agentKwok}

	defer cleanupNodeAgents(t, trusted)
	joinExclusivePool(t)
	tenant := tenantClient(t)
	waitP6Judges(t, tenant)

	for _, ns := range trusted {
		if ns != policy.NamespaceKubeSystem {
			_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			require.True(t, err == nil || apierrors.IsAlreadyExists(err), "namespace %s: %v", ns, err)
		}
		_, err := kube.AppsV1().DaemonSets(ns).Create(ctx, agentDaemonSet(agentDS, members), metav1.CreateOptions{})
		require.NoError(t, err, ns)
	}
	_, err := tenant.AppsV1().DaemonSets(tenantNS).Create(ctx, agentDaemonSet(tenantDS, append(members, openKwok)), metav1.CreateOptions{})
	require.NoError(t, err, "the tenant makes its DaemonSet with edit")

	t.Run("trusted namespaces' agents run on every exclusive member", func(t *testing.T) {
		for _, ns := range trusted {
			pods := waitDaemonPods(t, ns, agentDS, members)
			real := pods[node]
			require.Len(t, real.Status.ContainerStatuses, 1, real.Name)
			cs := real.Status.ContainerStatuses[0]
			assert.True(t, cs.Ready, "%s/%s ready on the real node", ns, real.Name)
			assert.Regexp(t, containerID, cs.ContainerID, "%s/%s is a real container", ns, real.Name)
		}
	})

	t.Run("a tenant's DaemonSet: no pod on an exclusive member, refused by P6; it runs on the node of no pool", func(t *testing.T) {
		// The DaemonSet controller creates a sync's pods in slow-start batches that stop
		// at the first refusal, in its node cache's order, and backs off exponentially
		// after each refused sync. Its map order can put the open node first in as few
		// as one sync in eight, and by the sixteenth sync the backoff is minutes long: a
		// touch of the DaemonSet's annotations brings a sync now (the template, and so
		// the pods, are unchanged), so the open node's turn comes within the wait.
		var refusal string
		var pods map[string]*corev1.Pod
		touches := 0
		require.NoError(t, wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(context.Context) (bool, error) {
			pods = daemonPods(t, tenantNS, tenantDS)
			for _, m := range members {
				if p := pods[m]; p != nil {
					return false, fmt.Errorf("pod %s of the tenant's DaemonSet was made for exclusive member %s (%s)", p.Name, m, p.Status.Phase)
				}
			}
			refusal = failedCreate(t, node)
			open := pods[openKwok]
			if open == nil {
				touches++
				touch := fmt.Sprintf(`{"metadata":{"annotations":{"e2e.runwhere.ai/sync":"%d"}}}`, touches)
				if _, err := kube.AppsV1().DaemonSets(tenantNS).Patch(ctx, tenantDS, types.MergePatchType, []byte(touch), metav1.PatchOptions{}); err != nil {
					return false, err
				}
			}
			return refusal != "" && open != nil && open.Status.Phase == corev1.PodRunning, nil
		}), "the tenant's DaemonSet: pods %v, refusal for %s %q", podNodes(pods), node, refusal)
		// The API server names a pod before admission: the denial names the pod made.
		want := regexp.QuoteMeta(`Error creating: ` + denied("pod-placement.runwhere.ai", fmt.Sprintf(
			`[P6] pod %s/%s-NAME may not run on node %q: it tolerates the pool's taint (operator Exists on every key) and its node affinity allows the node, but the node belongs to exclusive pool %q, which runs only its own pods and node agents (DaemonSet pods that ask for no device, from a namespace the operator trusts with node agents), and the pod asks for no pool; label the pod %s=%s from a namespace the pool admits, or keep it off the pool's nodes`,
			tenantNS, tenantDS, node, agentPool, policy.LabelPool, agentPool)))
		assert.Regexp(t, "^"+strings.Replace(want, "NAME", "[a-z0-9]{5}", 1)+"$", refusal)
		for _, m := range members {
			assert.NotContains(t, pods, m, "no pod of the tenant's DaemonSet is made for %s", m)
			on, err := kube.CoreV1().Pods(tenantNS).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + m})
			require.NoError(t, err)
			assert.Empty(t, on.Items, "no pod of the tenant's on %s", m)
		}
	})
}

// joinExclusivePool makes the exclusive pool of the real node and a kwok node, and a
// kwok node of no pool; it returns once litepool's controller has tainted both members.
func joinExclusivePool(t *testing.T) {
	kube := framework.C.Kube
	_, err := poolclient.New(framework.C.Dynamic).Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: agentPool},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeDevelopment, Exclusive: true, Namespaces: []string{workloads},
			Description: "the real node, exclusive"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.CreateReadyNode(t, kube, agentKwok, agentPool)
	framework.CreateReadyNode(t, kube, openKwok, "")
	_, err = kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(`{"metadata":{"labels":{"`+policy.LabelPool+`":"`+agentPool+`"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	for _, n := range []string{node, agentKwok} {
		waitExclusiveTaint(t, n, true)
	}
}

func waitExclusiveTaint(t *testing.T, name string, want bool) {
	t.Helper()
	taint := policy.ExclusiveTaint(agentPool)
	var last []corev1.Taint
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		n, err := framework.C.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = n.Spec.Taints
		has := false
		for _, tt := range last {
			has = has || tt.MatchTaint(&taint)
		}
		return has == want, nil
	}), "node %s: exclusive taint wanted %v, taints %v", name, want, last)
}

// tenantClient is a user with edit in tenantNS and nothing else, as the API server
// sees it (impersonated).
func tenantClient(t *testing.T) kubernetes.Interface {
	kube := framework.C.Kube
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.RbacV1().RoleBindings(tenantNS).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-edit"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: tenantUser}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.WaitAuthorizedIn(t, tenantNS, tenantUser, nil, "create", "apps", "daemonsets")
	cfg := rest.CopyConfig(framework.C.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: tenantUser, Groups: []string{"system:authenticated"}}
	tenant, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return tenant
}

// waitP6Judges waits until every webhook replica knows the real node is an exclusive
// member: a tenant's pod that tolerates every taint, placed on the real node or the
// node of no pool, is refused by P6 in a row of server dry runs (each may reach another
// replica; none is stored). Without it, a replica whose cache is behind could admit the
// tenant's DaemonSet pod and the test would judge the cache, not the rule. (A pod
// placed on the real node alone is pinned to its pool, judged as its pod by P4.)
func waitP6Judges(t *testing.T, tenant kubernetes.Interface) {
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "p6-probe-"}, Spec: corev1.PodSpec{
		Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		Affinity:    onHosts(node, openKwok),
		Containers:  []corev1.Container{{Name: "main", Image: lingerImage}}}}
	const inARow = 10
	refused := 0
	var err error
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, err = tenant.CoreV1().Pods(tenantNS).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "[P6]") {
			refused++
		} else {
			refused = 0
		}
		return refused == inARow, nil
	}), "the webhook never refused a tolerate-all pod placed on the exclusive real node %d times in a row; last: %v", inARow, err)
}

// onHosts is a required node affinity on the nodes' hostname labels (every node here
// is labelled with its name).
func onHosts(nodes ...string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: nodes}}}}}}}
}

// agentDaemonSet is a node agent as a tenant or an operator writes one: no device asked
// for, every taint tolerated, limited to nodes (the tier's other nodes are not part of
// the test). Its container is the linger image, imported on the real node.
func agentDaemonSet(name string, nodes []string) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Affinity:                      onHosts(nodes...),
			TerminationGracePeriodSeconds: ptrTo(agentsGrace),
			Containers:                    []corev1.Container{{Name: "agent", Image: lingerImage, ImagePullPolicy: corev1.PullNever}},
		}}}}
}

// daemonPods maps the nodes the DaemonSet's pods in namespace are made for (the
// controller pins each to its node by matchFields) to the pod.
func daemonPods(t *testing.T, namespace, name string) map[string]*corev1.Pod {
	t.Helper()
	list, err := framework.C.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	require.NoError(t, err)
	out := map[string]*corev1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		a := p.Spec.Affinity
		if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
			continue
		}
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range term.MatchFields {
				for _, n := range f.Values {
					out[n] = p
				}
			}
		}
	}
	return out
}

// waitDaemonPods waits until the DaemonSet has a Running pod on each of nodes, bound there.
func waitDaemonPods(t *testing.T, namespace, name string, nodes []string) map[string]*corev1.Pod {
	t.Helper()
	var pods map[string]*corev1.Pod
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		pods = daemonPods(t, namespace, name)
		for _, n := range nodes {
			p := pods[n]
			if p == nil || p.Spec.NodeName != n || p.Status.Phase != corev1.PodRunning {
				return false, nil
			}
		}
		return true, nil
	}), "%s/%s runs on every one of %v: %v", namespace, name, nodes, podNodes(pods))
	return pods
}

func podNodes(pods map[string]*corev1.Pod) map[string]string {
	out := map[string]string{}
	for n, p := range pods {
		out[n] = fmt.Sprintf("%s %s", p.Name, p.Status.Phase)
	}
	return out
}

// failedCreate is the message of the tenant's DaemonSet's FailedCreate event for a pod
// on node, or "".
func failedCreate(t *testing.T, node string) string {
	t.Helper()
	list, err := framework.C.Kube.CoreV1().Events(tenantNS).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=DaemonSet,involvedObject.name=" + tenantDS + ",reason=FailedCreate"})
	require.NoError(t, err)
	for _, e := range list.Items {
		if strings.Contains(e.Message, fmt.Sprintf("may not run on node %q", node)) {
			return e.Message
		}
	}
	return ""
}

// cleanupNodeAgents removes what testNodeAgents made. The real node stays labelled with
// the pool, which is no longer exclusive: it runs litepool's own pods, workload pods
// to N3, so it may not leave while litepool runs there (the steps after relabel it with
// litepool uninstalled); an untainted member changes nothing for them.
func cleanupNodeAgents(t *testing.T, trusted []string) {
	kube := framework.C.Kube
	bg := context.Background()
	for _, ns := range trusted {
		_ = kube.AppsV1().DaemonSets(ns).Delete(bg, agentDS, metav1.DeleteOptions{})
		if ns != policy.NamespaceKubeSystem {
			_ = kube.CoreV1().Namespaces().Delete(bg, ns, metav1.DeleteOptions{})
		}
	}
	_ = kube.CoreV1().Namespaces().Delete(bg, tenantNS, metav1.DeleteOptions{})
	_, err := poolclient.New(framework.C.Dynamic).Patch(bg, agentPool, types.MergePatchType, []byte(`{"spec":{"exclusive":false}}`), metav1.PatchOptions{})
	if err == nil {
		waitExclusiveTaint(t, node, false)
	}
	// The agents' pods leave the nodes before the nodes go (N3 would wait for none of
	// them, they are DaemonSet pods, but kwok must not be asked to run pods of a node
	// that is gone).
	_ = wait.PollUntilContextTimeout(bg, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		for _, ns := range trusted {
			if len(daemonPods(t, ns, agentDS)) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	for _, n := range []string{agentKwok, openKwok} {
		_ = kube.CoreV1().Nodes().Delete(bg, n, metav1.DeleteOptions{})
	}
}
