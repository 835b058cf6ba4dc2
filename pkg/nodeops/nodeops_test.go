package nodeops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
)

func pod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func TestEvictionTrackerReportsBlockedPods(t *testing.T) {
	var out bytes.Buffer
	tr := newEvictionTracker(&out)
	tr.started(pod("ai", "a"))
	tr.started(pod("ai", "b"))
	tr.started(pod("ai", "c"))
	for i := 0; i < 3; i++ { // the drain helper repeats the refusal on every retry
		_, _ = tr.Write([]byte(`error when evicting pods/"a" -n "ai" (will retry after 500ms): Cannot evict pod as it would violate the pod's disruption budget.` + "\n"))
	}
	_, _ = tr.Write([]byte(`error when evicting pods/"d" -n "ai" (will retry after 500ms): Cannot evict pod as it would violate the pod's disruption budget.` + "\n"))
	_, _ = tr.Write([]byte("WARNING: ignoring DaemonSet-managed Pods: kube-system/dp\n"))
	tr.finished(pod("ai", "b"))

	assert.Equal(t, "pod ai/a: eviction refused, retrying: Cannot evict pod as it would violate the pod's disruption budget.\n"+
		"pod ai/d: eviction refused, retrying: Cannot evict pod as it would violate the pod's disruption budget.\n"+
		"WARNING: ignoring DaemonSet-managed Pods: kube-system/dp\n", out.String())
	pods, reasons := tr.left()
	assert.Equal(t, []string{"ai/a", "ai/c", "ai/d"}, pods, "started or refused, and not finished")
	assert.Equal(t, []string{"Cannot evict pod as it would violate the pod's disruption budget"}, reasons)

	err := &BlockedError{Node: "n1", Pods: pods, Reasons: reasons, Err: errors.New("global timeout reached")}
	assert.EqualError(t, err, `drain of node "n1" stopped: 3 pod(s) could not be evicted (ai/a, ai/c, ai/d): Cannot evict pod as it would violate the pod's disruption budget; wait until the PodDisruptionBudget allows it, scale the workload up, or raise --timeout`)
	assert.EqualError(t, errors.Unwrap(err), "global timeout reached")
}

func TestOnceWriterPrintsEachEvictionOnce(t *testing.T) {
	var out bytes.Buffer
	w := &onceWriter{out: &out, seen: map[string]bool{}}
	_, _ = w.Write([]byte("evicting pod ai/a\n"))
	_, _ = w.Write([]byte("evicting pod ai/a\nevicting pod ai/b\n"))
	_, _ = w.Write([]byte("pod/a evicted\n"))
	assert.Equal(t, "evicting pod ai/a\nevicting pod ai/b\npod/a evicted\n", out.String())
}

// client-go's retry.RetryOnConflict turns an error wrapping context.Canceled into nil
// (wait.Interrupted): an interrupted write must stay an error.
func TestRetryOnConflictKeepsACancelledContextAnError(t *testing.T) {
	cancelled := fmt.Errorf("client rate limiter Wait returned an error: %w", context.Canceled)
	assert.ErrorIs(t, RetryOnConflict(func() error { return cancelled }), context.Canceled)

	calls := 0
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n1", errors.New("modified"))
	assert.NoError(t, RetryOnConflict(func() error {
		calls++
		if calls < 3 {
			return conflict
		}
		return nil
	}))
	assert.Equal(t, 3, calls, "conflicts are retried")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	kube := fake.NewSimpleClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	kube.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, ctx.Err() })
	_, _, err := ModifyNode(ctx, kube, "n1", cmdutil.DryRunNone, func(n *corev1.Node) error { n.Spec.Unschedulable = true; return nil })
	assert.ErrorIs(t, err, context.Canceled, "an interrupted update is not a success")
}
