package floor

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const superPodLabel = "huawei.com/topotree.superpodid"

// TestDomainFloorUnderConcurrentDepartures: pool domain-a (Ascend preset,
// minNodesPerDomain 2, minNodes 1) has super nodes sp-a and sp-b of 4 nodes each. All 4
// members of sp-a are sent 2 departures each at once (a merge patch that removes the
// pool label and a delete: 8 departures from one domain of 4) straight to the API
// server, with the webhook as 2 replicas behind a round-robin load balancer. sp-a keeps
// exactly 2 members: 2 nodes leave, and every refusal is N3's domain floor. Then, once
// the 2 that stay are cordoned, they may leave: a domain leaves whole.
func TestDomainFloorUnderConcurrentDepartures(t *testing.T) {
	kube := framework.C.Kube
	rs, crt := startReplicasN(t, 2)
	registerByURL(t, kube, rs.Balancer.Addr, crt.CAPEM)
	require.NoError(t, localwebhook.WaitEffective(ctx, kube, "default", 30*time.Second))

	fp := floorPool{name: "domain-a", minNodes: 1}
	_, err := poolclient.New(framework.C.Dynamic).Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: fp.name},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1,
			Topology: &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend, MinNodesPerDomain: 2}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for i := range rs.Procs {
		waitReplica(t, rs, crt, i, fp, 0)
	}
	var spA []string
	for _, d := range []string{"sp-a", "sp-b"} {
		for i := range 4 {
			name := fmt.Sprintf("domain-%s-%d", d, i)
			createDomainNode(t, kube, name, fp.name, d)
			if d == "sp-a" {
				spA = append(spA, name)
			}
		}
	}
	framework.WaitInService(t, kube, spA...)
	// The replicas' caches follow one ordered watch of nodes: once each of them counts
	// a ninth member, created after every sp-a node was seen in service, each of them
	// sees sp-a in service too. The probe belongs to no domain, so no domain floor
	// counts it, and the pool's minNodes (1) is kept by sp-b.
	createDomainNode(t, kube, "domain-probe", fp.name, "")
	for i := range rs.Procs {
		waitReplica(t, rs, crt, i, fp, 9)
	}

	start := make(chan struct{})
	results := make(chan outcome, 2*len(spA))
	var wg sync.WaitGroup
	for _, n := range spA {
		for _, remove := range []bool{true, false} {
			wg.Go(func() {
				<-start
				results <- depart(kube, fp.name, n, remove)
			})
		}
	}
	close(start)
	wg.Wait()
	close(results)
	denied := 0
	for r := range results {
		switch {
		case r.allowed:
		case apierrors.IsNotFound(r.err): // the node's other departure (its delete) came first
		case r.err != nil && slices.Contains(policy.RulesOfStatus(r.err), "N3"):
			assert.Contains(t, r.err.Error(), "below minNodesPerDomain 2", "an idle node is denied only by the domain floor")
			denied++
		default:
			t.Errorf("a departure neither went through nor was denied by N3: %v", r.err)
		}
	}
	stay := domainMembers(t, fp.name, "sp-a")
	t.Logf("sp-a keeps %v; %d departures denied; connections per replica %v", stay, denied, connections(rs))
	// Never below the floor. Not always at it: a node's label removal granted a moment
	// before its own delete won the race keeps its reservation until it expires, which
	// can only keep a member more (the reservation errs on the side of the floor).
	assert.GreaterOrEqual(t, len(stay), 2, "sp-a never goes below its floor")
	assert.Less(t, len(stay), len(spA), "the departures the floor allows go through")
	assert.GreaterOrEqual(t, denied, 2, "the 2 members that stay were each refused at least once")
	assert.Len(t, domainMembers(t, fp.name, "sp-b"), 4, "the other domain is untouched")

	// The domain leaves whole: cordoned first, its last members hold no capacity.
	for _, n := range stay {
		_, err := kube.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	for _, n := range stay {
		require.Eventually(t, func() bool { return depart(kube, fp.name, n, true).allowed }, 30*time.Second, 200*time.Millisecond,
			"a cordoned member of sp-a leaves once every replica's cache sees the cordon")
	}
	assert.Empty(t, domainMembers(t, fp.name, "sp-a"))
	cleanDomainNodes(t, kube, "domain-")
}

// domainMembers are the nodes of pool in super node d, as the API server has them.
func domainMembers(t *testing.T, pool, d string) []string {
	t.Helper()
	list, err := framework.C.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: policy.LabelPool + "=" + pool + "," + superPodLabel + "=" + d})
	require.NoError(t, err)
	var out []string
	for _, n := range list.Items {
		out = append(out, n.Name)
	}
	return out
}

// createDomainNode makes a Ready member of pool in super node d (no domain label when
// d is empty).
func createDomainNode(t *testing.T, kube kubernetes.Interface, name, pool, d string) {
	t.Helper()
	labels := map[string]string{policy.LabelPool: pool, "type": "kwok"}
	if d != "" {
		labels[superPodLabel] = d
	}
	_, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels:      labels,
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Status: corev1.NodeStatus{Conditions: readyCondition}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// cleanDomainNodes deletes the nodes named with prefix, members with the audited override.
func cleanDomainNodes(t *testing.T, kube kubernetes.Interface, prefix string) {
	t.Helper()
	list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, n := range list.Items {
		if !strings.HasPrefix(n.Name, prefix) {
			continue
		}
		if _, member := n.Labels[policy.LabelPool]; member {
			_, err := kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"`+policy.AnnotationForce+`":"e2e: end of test"}}}`), metav1.PatchOptions{})
			require.NoError(t, err)
		}
		if err := kube.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
			require.NoError(t, err)
		}
	}
}
