// Package podindex keeps every unfinished pod of the cluster in a compact entry instead of
// a corev1.Pod, for both processes of litepool-webhook: the webhook's rules list pods by
// node and by pool, the controller's Pool status sums their accelerator requests. A
// corev1.Pod is a struct of about 1.4 KB however little of it is filled, plus its metadata
// maps: at 40,000 pods an informer cache of trimmed Pods held 90 MB (bench/controller,
// issue 20), most of either process's memory.
package podindex

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/nodejob"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// The two lists the index answers (client.MatchingFields keys).
const (
	ByNode = "spec.nodeName"
	ByPool = "metadata.labels.pool"
)

// NonTerminal leaves finished pods (Succeeded, Failed) out: every reader skips them
// (inventory.IsTerminal), and in a cluster of batch jobs they can outnumber the running
// ones. A pod that finishes leaves the index as if deleted.
var NonTerminal = fields.AndSelectors(
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)))

// Index is the informer of unfinished pods with its two indexes.
type Index struct {
	informer toolscache.SharedIndexInformer
}

// Entry is one pod as the index keeps it. It is a client.Object (through ObjectMeta) only
// so that client-go's informer can store it and controllers can watch it.
type Entry struct {
	// Name, Namespace, a DaemonSet controller reference, the mirror annotation, the
	// deletion timestamp; no UID. No labels (Pool is the one read) but for a pod labelled
	// as litepool's node work, which keeps that label and its Job or StressRun controller
	// reference: what nodejob.IsNodeWork reads, on a handful of pods.
	metav1.ObjectMeta
	// Pool is the pod's runwhere.ai/pool label: a field, not a map of one label, which
	// cost 300 bytes a pod.
	Pool     string
	NodeName string
	Phase    corev1.PodPhase
	// Requests is what the pod requests of each accelerator resource, sorted by name
	// (policy.Accelerators.PodAcceleratorRequests), kept only by an index built with
	// accelerators (the controller's); nil for a pod that requests none.
	Requests []Request
}

// Request is an amount of one accelerator resource.
type Request struct {
	Name  corev1.ResourceName
	Count int64
}

func (e *Entry) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (e *Entry) DeepCopyObject() runtime.Object {
	out := &Entry{Pool: e.Pool, NodeName: e.NodeName, Phase: e.Phase, Requests: slices.Clone(e.Requests)}
	e.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}

// Pod rebuilds the slim corev1.Pod the webhook's catalog reads (no containers).
func (e *Entry) Pod() corev1.Pod {
	pod := corev1.Pod{ObjectMeta: e.ObjectMeta, Spec: corev1.PodSpec{NodeName: e.NodeName}, Status: corev1.PodStatus{Phase: e.Phase}}
	pod.Labels = nil
	if e.Pool != "" || len(e.Labels) > 0 {
		pod.Labels = map[string]string{}
		maps.Copy(pod.Labels, e.Labels)
	}
	if e.Pool != "" {
		pod.Labels[policy.LabelPool] = e.Pool
	}
	return pod
}

// compact is the informer's transform: a pod becomes an Entry.
func compact(accel *policy.Accelerators) toolscache.TransformFunc {
	return func(in any) (any, error) {
		if pod, ok := in.(*corev1.Pod); ok {
			return Compact(pod, accel), nil
		}
		return in, nil
	}
}

// Compact is the entry the index keeps of pod; accel, when not nil, says which requests
// to keep.
func Compact(pod *corev1.Pod, accel *policy.Accelerators) *Entry {
	e := &Entry{Pool: pod.Labels[policy.LabelPool], NodeName: pod.Spec.NodeName, Phase: pod.Status.Phase}
	e.Name, e.Namespace, e.ResourceVersion = pod.Name, pod.Namespace, pod.ResourceVersion
	if v, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		e.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: v}
	}
	nodeWork := pod.Labels[nodejob.LabelManagedBy] == nodejob.ManagedBy
	if nodeWork {
		e.Labels = map[string]string{nodejob.LabelManagedBy: nodejob.ManagedBy}
	}
	// Only a DaemonSet controller reference changes a workload verdict
	// (inventory.IsWorkloadPod), and a Job or StressRun one a node-work verdict.
	for _, ref := range pod.OwnerReferences {
		if ref.Controller != nil && *ref.Controller && (ref.Kind == "DaemonSet" || nodeWork && (ref.Kind == "Job" || ref.Kind == "StressRun")) {
			e.OwnerReferences = []metav1.OwnerReference{{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID, Controller: ref.Controller}}
			break
		}
	}
	e.DeletionTimestamp = pod.DeletionTimestamp
	if accel != nil {
		e.Requests = requests(accel.PodAcceleratorRequests(pod))
	}
	return e
}

func requests(m map[corev1.ResourceName]int64) []Request {
	var out []Request
	for name, n := range m {
		if n > 0 {
			out = append(out, Request{Name: name, Count: n})
		}
	}
	slices.SortFunc(out, func(a, b Request) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// New builds the index on an informer of every unfinished pod (protobuf, the initial
// list streamed when the API server allows it). accel, when not nil, has each entry keep
// the pod's accelerator requests (the controller's Pool status sums them); the webhook's
// rules never read them. Start it with the manager.
func New(cfg *rest.Config, accel *policy.Accelerators) (*Index, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	lw := toolscache.NewFilteredListWatchFromClient(kube.CoreV1().RESTClient(), "pods", metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.FieldSelector = NonTerminal.String() })
	return newIndex(lw, accel)
}

// NewFor is an index over a typed client, for tests of its readers with client-go's fake
// (which has no REST client); New's list is protobuf and streamed.
func NewFor(kube kubernetes.Interface, accel *policy.Accelerators) (*Index, error) {
	sel := func(o metav1.ListOptions) metav1.ListOptions { o.FieldSelector = NonTerminal.String(); return o }
	lw := toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, sel(o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return kube.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, sel(o))
		},
	}
	// The fake's watch sends no initial events: the wrapper tells the reflector to list.
	return newIndex(toolscache.ToListWatcherWithWatchListSemantics(&lw, kube), accel)
}

func newIndex(lw toolscache.ListerWatcher, accel *policy.Accelerators) (*Index, error) {
	inf := toolscache.NewSharedIndexInformerWithOptions(lw, &corev1.Pod{}, toolscache.SharedIndexInformerOptions{
		Indexers: toolscache.Indexers{
			ByNode: func(o any) ([]string, error) { return nonEmpty(o.(*Entry).NodeName), nil },
			ByPool: func(o any) ([]string, error) { return nonEmpty(o.(*Entry).Pool), nil },
		},
	})
	if err := inf.SetTransform(compact(accel)); err != nil {
		return nil, err
	}
	return &Index{informer: inf}, nil
}

func nonEmpty(v string) []string {
	if v == "" {
		return nil
	}
	return []string{v}
}

// Start runs the informer until ctx ends (manager.Runnable).
func (x *Index) Start(ctx context.Context) error {
	x.informer.RunWithContext(ctx)
	return nil
}

// NeedLeaderElection: every webhook replica answers from its own index, and the
// controller's index must be warm when its replica wins the Lease.
func (x *Index) NeedLeaderElection() bool { return false }

// HasSynced says whether the initial list is in.
func (x *Index) HasSynced() bool { return x.informer.HasSynced() }

// OnNode is the entries of the unfinished pods bound to node, shared with the index:
// read them, never change them.
func (x *Index) OnNode(node string) ([]*Entry, error) {
	items, err := x.informer.GetIndexer().ByIndex(ByNode, node)
	if err != nil {
		return nil, err
	}
	out := make([]*Entry, len(items))
	for i, o := range items {
		out[i] = o.(*Entry)
	}
	return out, nil
}

// Informer is the index's informer, for controllers that watch pods (source.Informer):
// its objects are *Entry.
func (x *Index) Informer() toolscache.SharedIndexInformer { return x.informer }

// Reader serves pod lists by ByNode or ByPool from the index and passes every other read
// to r.
func (x *Index) Reader(r client.Reader) client.Reader { return reader{Reader: r, idx: x} }

type reader struct {
	client.Reader
	idx *Index
}

func (r reader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	pods, ok := list.(*corev1.PodList)
	if !ok {
		return r.Reader.List(ctx, list, opts...)
	}
	var lo client.ListOptions
	lo.ApplyOptions(opts)
	for _, index := range []string{ByNode, ByPool} {
		if lo.FieldSelector == nil {
			break
		}
		if v, ok := lo.FieldSelector.RequiresExactMatch(index); ok {
			items, err := r.idx.informer.GetIndexer().ByIndex(index, v)
			if err != nil {
				return err
			}
			pods.Items = make([]corev1.Pod, 0, len(items))
			for _, o := range items {
				pods.Items = append(pods.Items, o.(*Entry).Pod())
			}
			return nil
		}
	}
	return fmt.Errorf("the pod index lists pods only by %s or %s, not %v", ByNode, ByPool, lo.FieldSelector)
}
