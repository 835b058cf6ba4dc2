// Package floor tests that a pool's minNodes holds under concurrent departures with the
// webhook running as several replicas behind a load balancer, including while one
// replica is killed and restarted.
package floor

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/pkg/admission"
	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

func TestMain(m *testing.M) { framework.Main(m, "e2e-floor") }

var ctx = context.Background()

const replicas = 3

// floorPool is a pool under test: its floor and how many fresh nodes each round gives
// it, of which removals leave by losing their label and the rest by being deleted.
type floorPool struct {
	name             string
	minNodes, nodes  int
	removals, delets int
}

var floorPools = []floorPool{
	{name: "floor-a", minNodes: 3, nodes: 6, removals: 3, delets: 3},
	{name: "floor-b", minNodes: 2, nodes: 5, removals: 3, delets: 2},
}

// TestMinNodesUnderConcurrentDepartures: each round gives every pool fresh nodes and
// sends all their departures at once, straight to the API server (merge patches that
// remove the pool label, and node deletes), with the webhook as 3 replicas behind a
// round-robin load balancer. Exactly members-minNodes departures go through in every
// pool and round; the others are denied by N3. A client retries a request that failed
// because a webhook call failed, never one N3 denied. Later rounds kill a replica and
// restart it while the departures are under way.
func TestMinNodesUnderConcurrentDepartures(t *testing.T) {
	kube := framework.C.Kube
	rs, crt := startReplicas(t)
	registerByURL(t, kube, rs.Balancer.Addr, crt.CAPEM)
	require.NoError(t, localwebhook.WaitEffective(ctx, kube, "default", 30*time.Second))

	pools := poolclient.New(framework.C.Dynamic)
	for _, fp := range floorPools {
		_, err := pools.Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: fp.name},
			Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: int32(fp.minNodes)}}, metav1.CreateOptions{})
		require.NoError(t, err)
		for i := range rs.Procs {
			waitReplica(t, rs, crt, i, fp, 0)
		}
	}

	for round := range 5 {
		kill := round >= 3
		t.Run(fmt.Sprintf("round %d kill=%v", round, kill), func(t *testing.T) {
			runRound(t, kube, rs, crt, round, kill)
		})
	}
	used := 0
	for i := range rs.Procs {
		if rs.Balancer.Connections[i].Load() > 0 {
			used++
		}
	}
	assert.GreaterOrEqual(t, used, 2, "the API server's calls were spread over the replicas: %v", connections(rs))
}

func connections(rs *localwebhook.Replicas) []int64 {
	var out []int64
	for i := range rs.Balancer.Connections {
		out = append(out, rs.Balancer.Connections[i].Load())
	}
	return out
}

// outcome of one departure.
type outcome struct {
	pool    string
	allowed bool
	err     error
	retries int
}

func runRound(t *testing.T, kube kubernetes.Interface, rs *localwebhook.Replicas, crt *localwebhook.Certs, round int, kill bool) {
	type op struct {
		pool, node string
		remove     bool
	}
	var ops []op
	for _, fp := range floorPools {
		for i := range fp.nodes {
			name := fmt.Sprintf("%s-r%d-%d", fp.name, round, i)
			createNode(t, kube, name, fp.name)
			ops = append(ops, op{pool: fp.name, node: name, remove: i < fp.removals})
		}
	}
	// Every replica's cache sees the fresh members (and no earlier round's) before
	// the departures start: the reservation subtracts from what the cache sees.
	for _, fp := range floorPools {
		for i := range rs.Procs {
			waitReplica(t, rs, crt, i, fp, fp.nodes)
		}
	}

	start := make(chan struct{})
	results := make(chan outcome, len(ops))
	var wg sync.WaitGroup
	for i, o := range ops {
		wg.Go(func() {
			<-start
			if kill && round%2 == 1 { // spread the departures over the kill and the restart
				time.Sleep(time.Duration(i) * 40 * time.Millisecond)
			}
			results <- depart(kube, o.pool, o.node, o.remove)
		})
	}
	close(start)
	if kill {
		// Mid-round: into the burst of departures, or while spread ones are under way.
		time.Sleep(map[bool]time.Duration{true: 100 * time.Millisecond, false: 15 * time.Millisecond}[round%2 == 1])
		victim := round % replicas
		require.NoError(t, rs.Restart(victim), "restarting replica %d", victim)
	}
	wg.Wait()
	close(results)

	allowed, denied, retries := map[string]int{}, map[string]int{}, 0
	for r := range results {
		retries += r.retries
		switch {
		case r.allowed:
			allowed[r.pool]++
		case r.err != nil && slices.Contains(policy.RulesOfStatus(r.err), "N3"):
			assert.Contains(t, r.err.Error(), "below its minNodes", "an idle node is denied only by the floor")
			denied[r.pool]++
		default:
			t.Errorf("pool %s: a departure neither went through nor was denied by N3: %v", r.pool, r.err)
		}
	}
	t.Logf("round %d: allowed %v, denied %v, client retries after failed webhook calls %d, connections per replica %v", round, allowed, denied, retries, connections(rs))
	for _, fp := range floorPools {
		members, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: policy.LabelPool + "=" + fp.name})
		require.NoError(t, err)
		assert.Len(t, members.Items, fp.minNodes, "pool %s holds exactly its floor", fp.name)
		assert.Equal(t, fp.nodes-fp.minNodes, allowed[fp.name], "pool %s: every departure the floor allows went through", fp.name)
		assert.Equal(t, fp.minNodes, denied[fp.name], "pool %s: the others were denied by N3", fp.name)
	}
	if kill {
		require.NoError(t, rs.WaitReady(ctx, 60*time.Second), "the restarted replica becomes ready")
	}
	cleanRound(t, kube, round)
}

// depart removes node's pool label (remove) or deletes it, retrying only when a
// webhook call failed (a killed replica), never after a denial.
func depart(kube kubernetes.Interface, pool, node string, remove bool) outcome {
	o := outcome{pool: pool}
	for attempt := 0; ; attempt++ {
		var err error
		if remove {
			_, err = kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"`+policy.LabelPool+`":null}}}`), metav1.PatchOptions{})
		} else {
			err = kube.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
		}
		if err == nil {
			o.allowed = true
			return o
		}
		o.err = err
		if slices.Contains(policy.RulesOfStatus(err), "N3") || attempt == 30 {
			return o
		}
		o.retries++
		time.Sleep(200 * time.Millisecond)
	}
}

// createNode makes a Ready member of pool (kwok keeps it Ready): the floor counts Ready
// members, so it is created Ready rather than waiting for kwok's first heartbeat.
func createNode(t *testing.T, kube kubernetes.Interface, name, pool string) {
	t.Helper()
	_, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels:      map[string]string{policy.LabelPool: pool, "type": "kwok"},
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Status: corev1.NodeStatus{Conditions: readyCondition}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

var readyCondition = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}

// cleanRound deletes the round's nodes: the floor's survivors with the audited override.
func cleanRound(t *testing.T, kube kubernetes.Interface, round int) {
	t.Helper()
	list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, n := range list.Items {
		if !strings.Contains(n.Name, fmt.Sprintf("-r%d-", round)) {
			continue
		}
		if _, member := n.Labels[policy.LabelPool]; member {
			_, err := kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"`+policy.AnnotationForce+`":"e2e: end of round"}}}`), metav1.PatchOptions{})
			require.NoError(t, err)
		}
		err := kube.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		if !apierrors.IsNotFound(err) {
			require.NoError(t, err)
		}
	}
}

func startReplicas(t *testing.T) (*localwebhook.Replicas, *localwebhook.Certs) {
	t.Helper()
	return startReplicasN(t, replicas)
}

func startReplicasN(t *testing.T, n int) (*localwebhook.Replicas, *localwebhook.Certs) {
	t.Helper()
	crt, err := localwebhook.NewCerts(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, localwebhook.EnsureNamespace(ctx, framework.C.Kube, localwebhook.Namespace))
	logs := &localwebhook.LogBuffer{}
	rs, err := localwebhook.LaunchReplicas(ctx, localwebhook.Options{Binary: filepath.Join(framework.BinDir, "litepool-webhook"),
		Kubeconfig: framework.C.Kubeconfig, Namespace: localwebhook.Namespace, Output: logs,
		Flags: []string{"--cert-mode=files", "--cert-dir=" + crt.Dir}}, n, 60*time.Second)
	require.NoError(t, err, logs.String())
	t.Cleanup(func() {
		rs.Stop()
		if t.Failed() {
			t.Logf("webhook logs:\n%s", logs.String())
		}
	})
	return rs, crt
}

func registerByURL(t *testing.T, kube kubernetes.Interface, addr string, ca []byte) {
	t.Helper()
	cfgs, err := localwebhook.LoadConfigurations(filepath.Join(framework.Root, "deploy", "webhook", "webhooks.yaml"))
	require.NoError(t, err)
	cfgs.ByURL(addr, ca)
	t.Cleanup(func() { _ = cfgs.Unregister(context.Background(), kube) })
	require.NoError(t, cfgs.Register(ctx, kube))
}

// waitReplica waits until replica i's cache holds pool fp's object and exactly members
// of its nodes. It asks the replica itself (not through the balancer), with dry-run
// reviews that change nothing: R1's denial of an accelerator change counts the members
// it sees, and with none, P2 admits a pod of the pool once the Pool object is cached.
func waitReplica(t *testing.T, rs *localwebhook.Replicas, crt *localwebhook.Certs, i int, fp floorPool, members int) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		addr := rs.Procs[i].Addr
		p := &v1alpha1.Pool{TypeMeta: metav1.TypeMeta{APIVersion: "runwhere.ai/v1alpha1", Kind: "Pool"}, ObjectMeta: metav1.ObjectMeta{Name: fp.name},
			Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: int32(fp.minNodes)}}
		changed := p.DeepCopy()
		changed.Spec.Accelerator.Type = "probe"
		r1 := review(crt, addr, "/validate-pools", admissionv1.Update, "runwhere.ai", "v1alpha1", "Pool", "pools", "", changed, p)
		count := fmt.Sprintf("while it has %d node(s)", members)
		if members == 0 {
			last = r1
			if !r1Allowed(r1) {
				return false, nil
			}
		} else if last = r1; !strings.Contains(r1, count) {
			return false, nil
		}
		if members > 0 {
			return true, nil
		}
		// With no member yet, P2 admits a pod of the pool only once the Pool object is
		// cached (a pool of labels only exists through its nodes). A departure cannot be
		// the probe: the node webhook judges only nodes its cache holds (issue 28.3).
		probe := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "floor-probe", Namespace: "default", Labels: map[string]string{policy.LabelPool: fp.name}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "probe"}}}}
		last = review(crt, addr, admission.PathPods, admissionv1.Create, "", "v1", "Pod", "pods", "", probe, nil)
		return strings.HasPrefix(last, "allowed"), nil
	})
	require.NoError(t, err, "replica %d never saw pool %s with %d node(s); last answer: %s", i, fp.name, members, last)
}

func r1Allowed(answer string) bool { return strings.HasPrefix(answer, "allowed") }

// review sends one dry-run AdmissionReview to the webhook at addr and returns
// "allowed" or "denied: <message>".
func review(crt *localwebhook.Certs, addr, path string, op admissionv1.Operation, group, version, kind, resource, sub string, obj, old runtime.Object) string {
	raw := func(o runtime.Object) runtime.RawExtension {
		if o == nil {
			return runtime.RawExtension{}
		}
		b, _ := json.Marshal(o)
		return runtime.RawExtension{Raw: b}
	}
	ar := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "probe", Kind: metav1.GroupVersionKind{Group: group, Version: version, Kind: kind},
			Resource: metav1.GroupVersionResource{Group: group, Version: version, Resource: resource}, SubResource: sub,
			Operation: op, Object: raw(obj), OldObject: raw(old), DryRun: ptr.To(true)}}
	body, _ := json.Marshal(ar)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(crt.CAPEM)
	c := http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := c.Post("https://"+addr+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(b, &out); err != nil || out.Response == nil {
		return "error: " + string(b)
	}
	if out.Response.Allowed {
		return "allowed"
	}
	return "denied: " + out.Response.Result.Message
}
