package restore

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
)

// saved is what `kubectl get pools,driverrollouts,stressruns -o yaml` prints: a List,
// with the old cluster's uid, resourceVersion, generation and ownerReferences.
const saved = `apiVersion: v1
kind: List
items:
- apiVersion: runwhere.ai/v1alpha1
  kind: StressRun
  metadata: {name: burn-in, uid: u3, resourceVersion: "30", generation: 1}
  spec: {pool: train, image: stress:1, tests: [gpu-burn]}
  status: {phase: Succeeded, observedGeneration: 1, total: 2, passed: 2}
- apiVersion: runwhere.ai/v1alpha1
  kind: DriverRollout
  metadata:
    name: train-550
    uid: u2
    resourceVersion: "20"
    generation: 4
    ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: x, uid: old}]
  spec: {pool: train}
  status: {phase: Succeeded, observedGeneration: 4, done: 2, total: 2}
- apiVersion: runwhere.ai/v1alpha1
  kind: Pool
  metadata: {name: train, uid: u1, resourceVersion: "10", labels: {team: a}}
  spec: {type: Training}
  status: {nodeCount: 2, nodeHealth: [{node: n1}]}
`

func TestParseRefusesWhatIsNotLitepools(t *testing.T) {
	_, err := Parse([]byte(saved + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n"))
	require.Error(t, err)
	assert.Equal(t, `object 4 is v1 ConfigMap "cm": restore takes only Pools, DriverRollouts and StressRuns of runwhere.ai/v1alpha1 (the output of kubectl get pools,driverrollouts,stressruns -o yaml)`, err.Error())
	objs, err := Parse([]byte(saved))
	require.NoError(t, err)
	assert.Len(t, objs, 3)
}

func TestCleanKeepsNameLabelsAndSpecOnly(t *testing.T) {
	objs, err := Parse([]byte(saved))
	require.NoError(t, err)
	c := Clean(objs[1])
	assert.Equal(t, map[string]any{"apiVersion": "runwhere.ai/v1alpha1", "kind": "DriverRollout",
		"metadata": map[string]any{"name": "train-550"}, "spec": map[string]any{"pool": "train"}}, c.Object)
	assert.Equal(t, map[string]any{"phase": "Succeeded", "observedGeneration": int64(1), "done": int64(2), "total": int64(2)},
		Status(objs[1].Object["status"].(map[string]any), 1), "observedGeneration counts the new object's generations")
}

// Restore creates Pools first, then the rest, and writes back the status of rollouts and
// stress runs (a finished one stays finished), not of Pools.
func TestRestoreCreatesInOrderWithStatus(t *testing.T) {
	f := kittest.NewFactory(t)
	file := writeSaved(t)
	res := kittest.RunContext(context.Background(), f, NewCmdRestore, "", "-f", file)
	require.NoError(t, res.Err, res.ErrOut)
	assert.Equal(t, `pools/train created (status: the controller recomputes it; the health loop's memory of 1 node(s), status.nodeHealth, is lost)
driverrollouts/train-550 created, status restored (phase Succeeded)
stressruns/burn-in created, status restored (phase Succeeded)
Restored. Start litepool's controller again: kubectl -n litepool-system scale deployment/litepool-controller --replicas=2
`, res.Out)
	var order []string
	for _, a := range f.Dynamic.Actions() {
		if a.GetVerb() == "create" || a.GetVerb() == "update" {
			order = append(order, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
		}
	}
	assert.Equal(t, []string{"create pools/", "create driverrollouts/", "update driverrollouts/status", "create stressruns/", "update stressruns/status"}, order)
	ro, err := f.Dynamic.Resource(v1alpha1.DriverRolloutResource).Get(context.Background(), "train-550", metav1.GetOptions{})
	require.NoError(t, err)
	phase, _, _ := unstructured.NestedString(ro.Object, "status", "phase")
	assert.Equal(t, "Succeeded", phase)
	assert.Empty(t, ro.GetOwnerReferences(), "the old cluster's owners are not carried over")

	again := kittest.RunContext(context.Background(), f, NewCmdRestore, "", "-f", file)
	require.NoError(t, again.Err, again.ErrOut)
	assert.Contains(t, again.Out, "driverrollouts/train-550 exists: left as it is")
}

// While a controller holds its Lease, restore refuses and creates nothing: the
// controller would start a rollout it saw before its status.
func TestRestoreRefusesWhileTheControllerRuns(t *testing.T) {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "litepool-controller", Namespace: "litepool-system"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("c-1"), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: &metav1.MicroTime{Time: kittest.Now.Add(-5 * time.Second)}}}
	f := kittest.NewFactory(t, lease)
	res := kittest.RunContext(context.Background(), f, NewCmdRestore, "", "-f", writeSaved(t))
	require.Error(t, res.Err)
	assert.Contains(t, res.Err.Error(), "litepool's controller is running, or you may not read its Lease litepool-system/litepool-controller")
	assert.Contains(t, res.Err.Error(), "kubectl -n litepool-system scale deployment/litepool-controller --replicas=0")
	for _, a := range f.Dynamic.Actions() {
		assert.NotEqual(t, "create", a.GetVerb(), "nothing is created")
	}
}

func writeSaved(t *testing.T) string {
	t.Helper()
	path := t.TempDir() + "/backup.yaml"
	require.NoError(t, writeFile(path, strings.NewReader(saved)))
	return path
}

func writeFile(path string, r *strings.Reader) error {
	b := make([]byte, r.Len())
	_, _ = r.Read(b)
	return os.WriteFile(path, b, 0o600)
}
