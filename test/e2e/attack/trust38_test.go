package attack

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// Issue 38's fixture: a pool that admits only at-own and is NOT exclusive (no taint
// keeps anyone off it: only P4 on the pods pinned to it), two members, the second with a
// hostname label that differs from its name, as on clouds that name nodes by DNS name.
const restrictedPool = "at-restricted"

var (
	restrictedNodes = []string{"at-restricted-1", "at-restricted-2"}
	restrictedHosts = []string{"at-restricted-1", "host-restricted-2"}
	trust38Once     sync.Once
)

func setupTrust38(t *testing.T) {
	t.Helper()
	trust38Once.Do(func() {
		kube := framework.C.Kube
		_, err := poolclient.New(framework.C.Dynamic).Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: restrictedPool},
			Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeDevelopment, Namespaces: []string{ownNS}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		for i, n := range restrictedNodes {
			framework.CreateReadyNode(t, kube, n, restrictedPool)
			_, err := kube.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"kubernetes.io/hostname":"`+restrictedHosts[i]+`"}}}`), metav1.PatchOptions{})
			require.NoError(t, err)
		}
	})
}

// attackTenantDaemonSet: the tenant's own DaemonSet, without devices, tolerating every
// taint, made for an exclusive member and a node of another pool.
func attackTenantDaemonSet(t *testing.T) {
	setupTrust38(t)
	kube := as(t, tenant)
	// Made for the ordinary node first, then widened to the exclusive member: the
	// DaemonSet controller creates a sync's pods in slow-start batches that stop at the
	// first refusal, and its node order can put the exclusive member first in every sync
	// (seen: 16 syncs in a row over 3 minutes of back-off), so a DaemonSet made for both
	// at once may never reach the ordinary node.
	dss := kube.AppsV1().DaemonSets(foreignNS)
	_, err := dss.Create(ctx, daemonSet("tenant-agent", []string{floorNodes[1]}, nil), metav1.CreateOptions{})
	require.NoError(t, err)
	var got map[string]bool
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got = daemonPodNodes(t, "tenant-agent")
		return got[floorNodes[1]], nil
	}), "the tenant's DaemonSet runs on the node of a pool that is not exclusive: %v", got)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds, err := dss.Get(ctx, "tenant-agent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		ds.Spec.Template.Spec.Affinity = daemonSet("tenant-agent", []string{exclNodes[1], floorNodes[1]}, nil).Spec.Template.Spec.Affinity
		_, err = dss.Update(ctx, ds, metav1.UpdateOptions{})
		return err
	}))
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got = daemonPodNodes(t, "tenant-agent")
		_, made := got[exclNodes[1]]
		return made || deniedByP6(t, "tenant-agent-"), nil
	}), "tenant-agent pods: %v", got)
	assert.NotContains(t, got, exclNodes[1], "a tenant's DaemonSet is no node agent")
	assert.Empty(t, podsOn(t, foreignNS, exclNodes[1]))
}

// attackTrustedNamespaceDaemonSet: DaemonSets without devices in kube-system and in the
// shipped --agent-namespace list (the GPU operator's, monitoring's) run on every
// exclusive member; whoever writes pods there is trusted there.
func attackTrustedNamespaceDaemonSet(t *testing.T) {
	kube := framework.C.Kube
	namespaces := append([]string{"kube-system"}, framework.ShippedAgentNamespaces()...)
	require.Contains(t, namespaces, "gpu-operator")
	for _, ns := range namespaces {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
		_, err = kube.AppsV1().DaemonSets(ns).Create(ctx, daemonSet("trusted-agent", exclNodes, nil), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, ns := range namespaces {
		var running map[string]bool
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=trusted-agent"})
			if err != nil {
				return false, err
			}
			running = map[string]bool{}
			for _, p := range list.Items {
				running[p.Spec.NodeName] = p.Status.Phase == corev1.PodRunning
			}
			for _, n := range exclNodes {
				if !running[n] {
					return false, nil
				}
			}
			return true, nil
		}), "the DaemonSet of %s runs on every exclusive member: %v", ns, running)
	}
}

// pinnedForms are the required placements that only the restricted pool's members
// satisfy, each written another way.
func pinnedForms() map[string]func(*corev1.PodSpec) {
	in := func(key string, v ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: v}
	}
	affinity := func(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	return map[string]func(*corev1.PodSpec){
		"pool-in": func(s *corev1.PodSpec) {
			s.Affinity = affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{in(policy.LabelPool, restrictedPool, "no-such-pool")}})
		},
		"match-fields": func(s *corev1.PodSpec) { // two terms, one member each
			s.Affinity = affinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{in("metadata.name", restrictedNodes[0])}},
				corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{in("metadata.name", restrictedNodes[1])}})
		},
		"hostname": func(s *corev1.PodSpec) {
			s.Affinity = affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{in(corev1.LabelHostname, restrictedHosts...)}})
		},
		"node-selector-and-affinity": func(s *corev1.PodSpec) {
			s.NodeSelector = map[string]string{corev1.LabelHostname: restrictedHosts[1]}
			s.Affinity = affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: policy.LabelGPUType, Operator: corev1.NodeSelectorOpDoesNotExist}}})
		},
	}
}

// attackPinnedByAffinity: pods without the pool label, pinned to the restricted pool
// (not exclusive) by each form of required placement, from a namespace it does not admit.
func attackPinnedByAffinity(t *testing.T) {
	playPinned(t, "", "pods-node-selector.runwhere.ai")
}

// attackPinnedDefaultLabel: the same pods labelled runwhere.ai/pool=default.
func attackPinnedDefaultLabel(t *testing.T) {
	playPinned(t, policy.DefaultPool, "pods-pinned-default-label.runwhere.ai")
}

func playPinned(t *testing.T, label, entry string) {
	setupTrust38(t)
	kube := as(t, tenant)
	for form, pin := range pinnedForms() {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pinned-" + form, Labels: map[string]string{policy.LabelWorkloadType: "development"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
		if label != "" {
			p.Name += "-" + label
			p.Labels[policy.LabelPool] = label
		}
		pin(&p.Spec)
		// The webhook's cache learns the pool's members a moment after they join: a dry
		// run (it changes nothing) until the webhook judges the pod as the pool's.
		var err error
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err = kube.CoreV1().Pods(foreignNS).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err != nil, nil
		}), "%s: never refused", form)
		_, err = kube.CoreV1().Pods(foreignNS).Create(ctx, p, metav1.CreateOptions{})
		require.Error(t, err, form)
		t.Log(err)
		assert.Contains(t, err.Error(), `admission webhook "`+entry+`" denied the request`, form)
		assert.Contains(t, err.Error(), `[P4] the pod's `, form)
		assert.Contains(t, err.Error(), `pins it to pool "at-restricted" (only the pool's members satisfy it), so it is judged as the pool's pod: namespace "at-foreign" may not use pool "at-restricted"`, form)
		if label == policy.DefaultPool {
			assert.Contains(t, err.Error(), `[P1] label runwhere.ai/pool=default says the pod asks for no pool`, form)
		}
		_, err = framework.C.Kube.CoreV1().Pods(foreignNS).Get(ctx, p.Name, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "pod %s was made: %v", p.Name, err)
	}
	for _, n := range restrictedNodes {
		assert.Empty(t, podsOn(t, foreignNS, n), "no tenant pod on %s", n)
	}
}
