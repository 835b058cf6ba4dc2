package attack

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// Issue 41's row on Kueue's Workloads: a rollout by domain counts the nodes of an
// admitted Workload's topology assignment as busy before its pods are there
// (pkg/upgrade KueueAdmissions), so whoever may write workloads/status writes a claim
// the rollout reads. Only Kueue's Workload CRD is installed here; no Kueue runs, so
// nothing but the API server's schema judges the writes (Kueue's own webhook would let
// an admission be set, cleared or its topology assignment changed, too).

var kueueWorkloads = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}

const (
	wlStatusWriter = "workload-status-writer" // get workloads, update workloads/status in wlNS
	wlPool, wlNS   = "at-wl", "at-wl-team"
)

// domainOrder records the order in which a pool's super nodes first had a member
// cordoned.
type domainOrder struct {
	mu    sync.Mutex
	order []string
}

func watchDomainOrder(t *testing.T, domainOf map[string]string) *domainOrder {
	o := &domainOrder{}
	c, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		seen := map[string]bool{}
		for c.Err() == nil {
			for n, d := range domainOf {
				node, err := framework.C.Kube.CoreV1().Nodes().Get(c, n, metav1.GetOptions{})
				if err == nil && node.Spec.Unschedulable && !seen[d] {
					seen[d] = true
					o.mu.Lock()
					o.order = append(o.order, d)
					o.mu.Unlock()
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return o
}

func (o *domainOrder) get() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.order...)
}

// tasAdmission is a Workload's status.admission as Kueue writes it for a gang placed
// on hosts by TAS: one pod on each.
func tasAdmission(hosts []string) map[string]any {
	var roots []any
	for _, h := range hosts {
		roots = append(roots, h)
	}
	return map[string]any{"clusterQueue": wlPool, "podSetAssignments": []any{map[string]any{
		"name": "main", "count": int64(len(hosts)), "flavors": map[string]any{"huawei.com/Ascend910": wlPool},
		"topologyAssignment": map[string]any{"levels": []any{corev1.LabelHostname}, "slices": []any{map[string]any{
			"domainCount": int64(len(hosts)), "valuesPerLevel": []any{map[string]any{"individual": map[string]any{"roots": roots}}},
			"podCounts": map[string]any{"universal": int64(1)}}}}}}}
}

// pendingWorkload creates a pending Workload in wlNS (its owner's, not the attacker's).
func pendingWorkload(t *testing.T, name string) {
	t.Helper()
	wl := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": name, "namespace": wlNS},
		"spec": map[string]any{"queueName": wlPool, "podSets": []any{map[string]any{"name": "main", "count": int64(2),
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "registry.example.com/train:1"}}}}}}}}}
	_, err := framework.C.Dynamic.Resource(kueueWorkloads).Namespace(wlNS).Create(ctx, wl, metav1.CreateOptions{})
	require.NoError(t, err)
}

// setAdmission writes (or, with nil, clears) a Workload's status.admission through
// workloads/status, as d's identity.
func setAdmission(t *testing.T, d dynamic.Interface, name string, admission map[string]any) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		wl, err := d.Resource(kueueWorkloads).Namespace(wlNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if admission == nil {
			unstructured.RemoveNestedField(wl.Object, "status", "admission")
		} else if err := unstructured.SetNestedMap(wl.Object, admission, "status", "admission"); err != nil {
			return err
		}
		_, err = d.Resource(kueueWorkloads).Namespace(wlNS).UpdateStatus(ctx, wl, metav1.UpdateOptions{})
		return err
	}), "workloads/status of %s", name)
}

// attackWorkloadStatusMidRollout: a pool of 3 super nodes × 2 (minNodes 4) is rolled
// out by domain (maxUnavailableDomains 1). sp-1, idle, would go first (idle super nodes
// go first, then by name); sp-2 runs a pod; sp-3 is idle. Before the rollout the
// workloads/status writer forges an admission of a pending Workload onto sp-1's
// members, and clears the admission that Kueue (played by the test) gave another
// Workload on sp-2's. The forged claim only reorders: sp-1 goes after sp-3, with sp-2
// last, as a busy super node does; the cleared one changes nothing, sp-2 being busy by
// its pod, which the rollout reads from the pods. At most one super node out at once,
// never fewer than minNodes available, and the rollout succeeds.
func attackWorkloadStatusMidRollout(t *testing.T) {
	require.NoError(t, framework.InstallKueueCRDs(ctx, framework.C, "workloads"))
	nodes, domainOf := superPodPool(t, wlPool)
	members := map[string][]string{}
	for _, n := range nodes {
		members[domainOf[n]] = append(members[domainOf[n]], n)
	}

	_, err := framework.C.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wlNS}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = framework.C.Kube.RbacV1().Roles(wlNS).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: wlStatusWriter},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"workloads"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"workloads/status"}, Verbs: []string{"get", "update", "patch"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = framework.C.Kube.RbacV1().RoleBindings(wlNS).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: wlStatusWriter},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: wlStatusWriter},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: wlStatusWriter}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	framework.WaitAuthorizedIn(t, wlNS, wlStatusWriter, nil, "get", "kueue.x-k8s.io", "workloads")

	// sp-2 runs a pod of the team's, and Kueue admitted the team's gang onto it.
	busy := members["sp-2"][0]
	_, err = framework.C.Kube.CoreV1().Pods(wlNS).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "running"},
		Spec: corev1.PodSpec{NodeName: busy, Containers: []corev1.Container{{Name: "c", Image: "registry.example.com/train:1"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(c context.Context) (bool, error) {
		p, err := framework.C.Kube.CoreV1().Pods(wlNS).Get(c, "running", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	}), "the team's pod runs on %s", busy)
	pendingWorkload(t, "forged")
	pendingWorkload(t, "admitted")
	setAdmission(t, framework.C.Dynamic, "admitted", tasAdmission(members["sp-2"])) // Kueue's write

	// The attack: an admission forged onto the idle sp-1, the real one on sp-2 cleared.
	writer := dynAs(t, wlStatusWriter)
	setAdmission(t, writer, "forged", tasAdmission(members["sp-1"]))
	setAdmission(t, writer, "admitted", nil)

	order := watchDomainOrder(t, domainOf)
	w := watchOut(t, domainOf)
	agent := framework.StartDriverAgent(2 * time.Second)
	t.Cleanup(agent.Stop)
	c, err := client.New(framework.C.Config, client.Options{Scheme: kit.Scheme})
	require.NoError(t, err)
	ro := &v1alpha1.DriverRollout{ObjectMeta: metav1.ObjectMeta{Name: wlPool},
		Spec: v1alpha1.DriverRolloutSpec{Pool: wlPool, Version: "24.1.0.3", MaxUnavailableDomains: ptr.To[int32](1),
			WaitTimeout: &metav1.Duration{Duration: 2 * time.Second}, ForceDrain: true,
			Installer: v1alpha1.DriverInstaller{Image: "registry.example.com/ascend-installer:24.1.0.3"}}}
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(cc context.Context) (bool, error) {
		err := c.Create(cc, ro)
		if err != nil && strings.Contains(err.Error(), "has none (no spec.topology)") {
			return false, nil // the webhook's cache has not seen the topology yet
		}
		return err == nil, err
	}))
	t.Cleanup(func() { _ = c.Delete(context.Background(), ro) })
	endRollout(t, c, ro, w)
	t.Logf("super nodes went out in the order %v", order.get())
	assert.Equal(t, []string{"sp-3", "sp-1", "sp-2"}, order.get(),
		"the forged admission makes the idle sp-1 wait for sp-3 (reordered, nothing more); sp-2, busy by its pod, goes last though its admission was cleared")
}
