package nodeops

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/nodejob"
)

func onNode(ns, name string, mod func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if mod != nil {
		mod(p)
	}
	return p
}

// One pass of the one drain: the Eviction API for what kubectl's drain moves, less
// litepool's node work and finished pods; a 429 is left for the next pass; nothing
// waits.
func TestDrainStepMovesOnlyWorkloadsAndNeverWaits(t *testing.T) {
	nodeWork := func(kind, apiVersion string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Labels = map[string]string{nodejob.LabelManagedBy: nodejob.ManagedBy}
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "w", UID: "w", Controller: ptr.To(true)}}
		}
	}
	objs := []runtime.Object{
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent"}},
		onNode("tenant", "train", nil),
		onNode("tenant", "guarded", nil),
		onNode("tenant", "leaving", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{}; p.Finalizers = []string{"x"} }),
		onNode("tenant", "finished", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		onNode("kube-system", "agent-x", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds", Controller: ptr.To(true)}}
		}),
		onNode("kube-system", "static-n1", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }),
		onNode(DefaultNamespace, "installer", nodeWork("Job", "batch/v1")),
		onNode(DefaultNamespace, "recheck", nodeWork("StressRun", "runwhere.ai/v1alpha1")),
		// Node work's labels and owner in a tenant's namespace are only claims.
		onNode("tenant", "looks-like-an-installer", nodeWork("Job", "batch/v1")),
	}
	kube := fake.NewClientset(objs...)
	kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "eviction" && a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName() == "guarded" {
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		}
		return false, nil, nil
	})
	res, err := DrainStep(context.Background(), kube, "n1", StepOptions{Namespace: DefaultNamespace})
	require.NoError(t, err)
	var evicted []string
	for _, p := range res.Evicted {
		evicted = append(evicted, p.Namespace+"/"+p.Name)
	}
	assert.ElementsMatch(t, []string{"tenant/train", "tenant/looks-like-an-installer"}, evicted)
	assert.Equal(t, []string{"tenant/guarded"}, res.Refused)
	assert.Equal(t, []string{"tenant/leaving"}, res.Terminating)
	assert.ElementsMatch(t, []string{"tenant/leaving", "tenant/train", "tenant/looks-like-an-installer", "tenant/guarded"}, res.Left())

	// A pod no controller manages stops the drain before anything is evicted, as
	// kubectl drain does, unless forced.
	bare := fake.NewClientset(onNode("tenant", "bare", func(p *corev1.Pod) { p.OwnerReferences = nil }))
	_, err = DrainStep(context.Background(), bare, "n1", StepOptions{Namespace: DefaultNamespace})
	var cannot *CannotDrainError
	require.ErrorAs(t, err, &cannot)
	res, err = DrainStep(context.Background(), bare, "n1", StepOptions{Namespace: DefaultNamespace, Force: true})
	require.NoError(t, err)
	assert.Len(t, res.Evicted, 1)
}
