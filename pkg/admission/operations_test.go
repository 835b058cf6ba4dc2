package admission

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/compat"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// operationsHandler judges against a pool train-snt9b of two Snt9B nodes (declaring no
// software), a label-only pool infer-a10 and a node in no pool.
func operationsHandler(t *testing.T) *OperationsHandler {
	cat := catalogOf(t,
		&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-snt9b"}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1,
			Accelerator: v1alpha1.AcceleratorSpec{Type: "Snt9B", ResourceName: "huawei.com/Ascend910"}}},
		testNode("snt9b-node-1", "Snt9B", "train-snt9b"), testNode("snt9b-node-2", "Snt9B", "train-snt9b"),
		testNode("a10-node-1", "A10-24G", "infer-a10"), testNode("spare-1", "Snt9B", ""),
		&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-racks"}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 3,
			Accelerator: v1alpha1.AcceleratorSpec{Type: "Snt9B", ResourceName: "huawei.com/Ascend910"},
			Topology:    &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyNVIDIA}}},
		rackNode("rack-a-1", "a"), rackNode("rack-a-2", "a"), rackNode("rack-b-1", "b"), rackNode("rack-b-2", "b"), rackNode("rack-c-1", "c"), rackNode("rack-c-2", "c"))
	return &OperationsHandler{Catalog: cat, Matrix: func(context.Context) (*compat.Matrix, error) { return compat.Embedded() }}
}

// rackNode is a Snt9B member of train-racks in NVLink clique rack.
func rackNode(name, rack string) *corev1.Node {
	n := testNode(name, "Snt9B", "train-racks")
	n.Labels["nvidia.com/gpu.clique"] = "cluster." + rack
	return n
}

func operationRequest(t *testing.T, kind string, obj any) admissionv1.AdmissionRequest {
	return admissionv1.AdmissionRequest{Kind: metav1.GroupVersionKind{Group: "runwhere.ai", Version: "v1alpha1", Kind: kind},
		Operation: admissionv1.Create, Object: raw(t, obj), UserInfo: authenticationv1.UserInfo{Username: "alice"}}
}

func TestOperationsHandlerRollouts(t *testing.T) {
	h := operationsHandler(t)
	rollout := func(spec v1alpha1.DriverRolloutSpec, force string) *v1alpha1.DriverRollout {
		ro := &v1alpha1.DriverRollout{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Spec: spec}
		if force != "" {
			ro.Annotations = map[string]string{policy.AnnotationForce: force}
		}
		return ro
	}
	installer := v1alpha1.DriverInstaller{Image: "registry.example/installer:1"}
	for _, tc := range []struct {
		name    string
		ro      *v1alpha1.DriverRollout
		denied  string // a substring of the denial; empty: allowed
		warning string
	}{
		{name: "a published driver for the pool's model", ro: rollout(v1alpha1.DriverRolloutSpec{Pool: "train-snt9b", Version: "24.1.0.3", Installer: installer}, "")},
		{name: "a driver the matrix does not know", ro: rollout(v1alpha1.DriverRolloutSpec{Pool: "train-snt9b", Version: "99.9.9", Installer: installer}, ""),
			denied: "[C1] version chain is"},
		{name: "forced past C1, said who and why", ro: rollout(v1alpha1.DriverRolloutSpec{Pool: "train-snt9b", Version: "99.9.9", Installer: installer}, "alice: vendor hotfix"),
			warning: `[C1] overridden by runwhere.ai/force="alice: vendor hotfix" (request by alice)`},
		{name: "forced without saying why", ro: rollout(v1alpha1.DriverRolloutSpec{Pool: "train-snt9b", Version: "99.9.9", Installer: installer}, "yes"),
			denied: "does not say who forces and why"},
		{name: "a version no label can hold", ro: rollout(v1alpha1.DriverRolloutSpec{Pool: "train-snt9b", Version: "24.1 rc2", Installer: installer}, ""),
			denied: `[U2] invalid spec.version "24.1 rc2"`},
		{name: "a pool without nodes", ro: rollout(v1alpha1.DriverRolloutSpec{Pool: "train-h100", Version: "24.1.0.3", Installer: installer}, ""),
			denied: `[U5] spec.pool "train-h100" has no nodes`},
		{name: "a canary outside the pool", ro: rollout(v1alpha1.DriverRolloutSpec{Pool: "train-snt9b", Canary: "spare-1", Version: "24.1.0.3", Installer: installer}, ""),
			denied: `[U5] spec.canary "spare-1" is not a member of pool "train-snt9b": name one of snt9b-node-1, snt9b-node-2`},
		{name: "nodes that do not exist", ro: rollout(v1alpha1.DriverRolloutSpec{Nodes: []string{"spare-1", "ghost"}, Version: "24.1.0.3", Installer: installer}, ""),
			denied: "[U5] spec.nodes names nodes that do not exist: ghost"},
		{name: "by domain, one rack of three out leaves minNodes", ro: rollout(v1alpha1.DriverRolloutSpec{Pool: "train-racks", MaxUnavailableDomains: ptr.To[int32](1), Version: "24.1.0.3", Installer: installer}, "")},
		{name: "by domain, two racks out would go below minNodes", ro: rollout(v1alpha1.DriverRolloutSpec{Pool: "train-racks", MaxUnavailableDomains: ptr.To[int32](2), Version: "24.1.0.3", Installer: installer}, ""),
			denied: `[U6] spec.maxUnavailableDomains 2 would leave 2 of pool "train-racks"'s 6 nodes available (its 2 largest domains hold 4), below its minNodes 3; accepted: at most 1`},
		{name: "by domain on a pool without topology", ro: rollout(v1alpha1.DriverRolloutSpec{Pool: "train-snt9b", MaxUnavailableDomains: ptr.To[int32](1), Version: "24.1.0.3", Installer: installer}, ""),
			denied: `[U6] spec.maxUnavailableDomains applies to a pool with a topology, and pool "train-snt9b" has none`},
		{name: "a node outside any pool, judged by its own model", ro: rollout(v1alpha1.DriverRolloutSpec{Nodes: []string{"spare-1"}, Version: "24.1.0.3", Installer: installer}, "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := review(t, h, operationRequest(t, "DriverRollout", tc.ro))
			if tc.denied != "" {
				require.False(t, resp.Allowed)
				assert.Contains(t, resp.Result.Message, tc.denied)
				return
			}
			require.True(t, resp.Allowed, "%v", resp.Result)
			if tc.warning != "" {
				require.Len(t, resp.Warnings, 1)
				assert.True(t, strings.HasPrefix(resp.Warnings[0], tc.warning), resp.Warnings[0])
			}
		})
	}
}

func TestOperationsHandlerStressRuns(t *testing.T) {
	h := operationsHandler(t)
	run := func(pool string, nodes ...string) *v1alpha1.StressRun {
		return &v1alpha1.StressRun{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: v1alpha1.StressRunSpec{Pool: pool, Nodes: nodes,
			Tests: []v1alpha1.StressTest{"hccl"}, Image: "registry.example/stress:1"}}
	}
	assert.True(t, review(t, h, operationRequest(t, "StressRun", run("train-snt9b"))).Allowed)
	assert.True(t, review(t, h, operationRequest(t, "StressRun", run("infer-a10", "a10-node-1"))).Allowed, "a pool made of labels")
	resp := review(t, h, operationRequest(t, "StressRun", run("train-snt9b", "snt9b-node-1", "spare-1")))
	require.False(t, resp.Allowed)
	assert.Equal(t, `[T3] spec.nodes spare-1 are not members of pool "train-snt9b": name members (snt9b-node-1, snt9b-node-2) or leave spec.nodes out to test them all`, resp.Result.Message)
	resp = review(t, h, operationRequest(t, "StressRun", run("train-h100")))
	require.False(t, resp.Allowed)
	assert.Contains(t, resp.Result.Message, `[T3] spec.pool "train-h100" does not exist`)

	// By domain (T4): only a pool with a topology; the denial names the field.
	byDomain := func(pool string) *v1alpha1.StressRun { r := run(pool); r.Spec.Domains = true; return r }
	assert.True(t, review(t, h, operationRequest(t, "StressRun", byDomain("train-racks"))).Allowed)
	for _, pool := range []string{"train-snt9b", "infer-a10"} {
		resp = review(t, h, operationRequest(t, "StressRun", byDomain(pool)))
		require.False(t, resp.Allowed, pool)
		assert.Equal(t, `[T4] spec.domains tests a pool by unit domain, and pool "`+pool+`" has no topology (no spec.topology): run without --domains (spec.domains) to test node by node, or declare the pool's topology first`, resp.Result.Message)
		require.NotNil(t, resp.Result.Details, pool)
		assert.Equal(t, []metav1.StatusCause{{Type: "runwhere.ai/rule", Message: "T4", Field: policy.FieldStressDomains}}, resp.Result.Details.Causes)
	}

	update := operationRequest(t, "StressRun", run("train-snt9b", "spare-1"))
	update.Operation = admissionv1.Update
	assert.True(t, review(t, h, update).Allowed, "updates (abort) are not judged: the spec is immutable where T3 looks")
}
