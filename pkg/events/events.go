// Package events records Kubernetes Events on the objects litepool operations touch
// ("removing node X from pool P", "driver upgrade of node X: drain", ...), so that
// `kubectl describe node` and `kubectl get events` tell what litepool did.
//
// Events are created synchronously (one API call each) rather than through client-go's
// asynchronous broadcaster: a CLI exits right after its last step, and the broadcaster
// would drop what it had not flushed.
package events

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Component is the reporting component of litepool's events.
const Component = "litepool"

// Recorder creates events. A nil Recorder, or one with DryRun set, records nothing.
type Recorder struct {
	Client kubernetes.Interface
	DryRun bool
	// Clock stamps the events: the command's or controller's clock, so that a test's
	// fake clock is the time its events carry. Nil is the real clock.
	Clock clock.PassiveClock
}

// Ref names the object an event is about.
type Ref struct {
	Kind, Namespace, Name, APIVersion string
	UID                               string
	// Related is a second object the event is about (the pool a node leaves), so that
	// `describe pool` finds the events of nodes that are no longer members.
	Related *Ref
}

// NodeRef refers to a node.
func NodeRef(node *corev1.Node) Ref {
	return Ref{Kind: "Node", Name: node.Name, APIVersion: "v1", UID: string(node.UID)}
}

// PoolRef refers to a Pool (cluster-scoped; it may have no object).
func PoolRef(name string) Ref {
	return Ref{Kind: "Pool", Name: name, APIVersion: "runwhere.ai/v1alpha1"}
}

// About returns ref with related set.
func (r Ref) About(related Ref) Ref {
	r.Related = &related
	return r
}

// Normal records a Normal event. Failures to record are returned but are not meant to
// stop an operation: callers usually ignore them.
func (r *Recorder) Normal(ctx context.Context, ref Ref, reason, format string, args ...any) error {
	return r.record(ctx, ref, corev1.EventTypeNormal, reason, fmt.Sprintf(format, args...))
}

// Warning records a Warning event.
func (r *Recorder) Warning(ctx context.Context, ref Ref, reason, format string, args ...any) error {
	return r.record(ctx, ref, corev1.EventTypeWarning, reason, fmt.Sprintf(format, args...))
}

func (r *Recorder) record(ctx context.Context, ref Ref, eventType, reason, message string) error {
	if r == nil || r.Client == nil || r.DryRun {
		return nil
	}
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault // cluster-scoped objects' events live in default, as the kubelet's do
	}
	t := r.now()
	now := metav1.NewTime(t)
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: ref.Name + ".", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name,
			APIVersion: ref.APIVersion, UID: types.UID(ref.UID)},
		Reason: reason, Message: message, Type: eventType,
		Source:         corev1.EventSource{Component: Component},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		// EventTime keeps microseconds, so that the steps of one operation sort in the
		// order they happened; with it set the API server wants an action too.
		EventTime: metav1.NewMicroTime(t), Action: reason,
		ReportingController: "runwhere.ai/litepool", ReportingInstance: Component,
	}
	if rel := ref.Related; rel != nil {
		ev.Related = &corev1.ObjectReference{Kind: rel.Kind, Namespace: rel.Namespace, Name: rel.Name,
			APIVersion: rel.APIVersion, UID: types.UID(rel.UID)}
	}
	_, err := r.Client.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{})
	return err
}

func (r *Recorder) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}
