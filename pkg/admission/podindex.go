package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// PodIndex keeps, for every pod that has not finished, only what the pod rules read (its
// name, the pool it asks for, the node it is bound to, whether it is a DaemonSet or
// mirror pod, whether it is terminating), in a compact entry instead of a corev1.Pod.
// A corev1.Pod is a struct of about 1.4 KB however little of it is filled, plus its
// metadata maps: at 40,000 pods the informer cache held 90 MB of them (bench/controller,
// issue 20), most of the webhook's memory. The webhook's only reads of pods are the
// two lists below (pods on a node, pods asking for a pool), served through Reader.
type PodIndex struct {
	informer toolscache.SharedIndexInformer
}

// podEntry is one pod as PodIndex keeps it. It is a runtime.Object (and a metav1.Object
// through ObjectMeta) only so that client-go's informer can store it.
type podEntry struct {
	metav1.ObjectMeta // Name, Namespace, the pool label, owners, mirror annotation, deletion
	NodeName          string
	Phase             corev1.PodPhase
}

func (e *podEntry) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (e *podEntry) DeepCopyObject() runtime.Object {
	out := &podEntry{NodeName: e.NodeName, Phase: e.Phase}
	e.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return out
}

// pod rebuilds the slim corev1.Pod the catalog reads.
func (e *podEntry) pod() corev1.Pod {
	return corev1.Pod{ObjectMeta: e.ObjectMeta, Spec: corev1.PodSpec{NodeName: e.NodeName}, Status: corev1.PodStatus{Phase: e.Phase}}
}

// compactPod is the informer's transform: a pod becomes a podEntry.
func compactPod(in any) (any, error) {
	pod, ok := in.(*corev1.Pod)
	if !ok {
		return in, nil
	}
	e := &podEntry{NodeName: pod.Spec.NodeName, Phase: pod.Status.Phase}
	e.Name, e.Namespace, e.UID, e.ResourceVersion = pod.Name, pod.Namespace, pod.UID, pod.ResourceVersion
	if v, ok := pod.Labels[policy.LabelPool]; ok {
		e.Labels = map[string]string{policy.LabelPool: v}
	}
	if v, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		e.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: v}
	}
	// Only a DaemonSet controller reference changes a verdict (inventory.IsWorkloadPod).
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "DaemonSet" && ref.Controller != nil && *ref.Controller {
			e.OwnerReferences = []metav1.OwnerReference{{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID, Controller: ref.Controller}}
			break
		}
	}
	e.DeletionTimestamp = pod.DeletionTimestamp
	return e, nil
}

// NewPodIndex builds the index on an informer of every unfinished pod (protobuf, the
// initial list streamed when the API server allows it). Start it with the manager.
func NewPodIndex(cfg *rest.Config) (*PodIndex, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	lw := toolscache.NewFilteredListWatchFromClient(kube.CoreV1().RESTClient(), "pods", metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.FieldSelector = nonTerminalPods.String() })
	return newPodIndex(lw)
}

func newPodIndex(lw toolscache.ListerWatcher) (*PodIndex, error) {
	inf := toolscache.NewSharedIndexInformerWithOptions(lw, &corev1.Pod{}, toolscache.SharedIndexInformerOptions{
		Indexers: toolscache.Indexers{
			IndexPodNode: func(o any) ([]string, error) { return nonEmpty(o.(*podEntry).NodeName), nil },
			IndexPodPool: func(o any) ([]string, error) { return nonEmpty(o.(*podEntry).Labels[policy.LabelPool]), nil },
		},
	})
	if err := inf.SetTransform(compactPod); err != nil {
		return nil, err
	}
	return &PodIndex{informer: inf}, nil
}

// Start runs the informer until ctx ends (manager.Runnable).
func (p *PodIndex) Start(ctx context.Context) error {
	p.informer.RunWithContext(ctx)
	return nil
}

// HasSynced says whether the initial list is in.
func (p *PodIndex) HasSynced() bool { return p.informer.HasSynced() }

// Reader serves pod lists by IndexPodNode or IndexPodPool from the index and passes
// every other read to r.
func (p *PodIndex) Reader(r client.Reader) client.Reader { return podReader{Reader: r, idx: p} }

type podReader struct {
	client.Reader
	idx *PodIndex
}

func (r podReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	pods, ok := list.(*corev1.PodList)
	if !ok {
		return r.Reader.List(ctx, list, opts...)
	}
	var lo client.ListOptions
	lo.ApplyOptions(opts)
	for _, index := range []string{IndexPodNode, IndexPodPool} {
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
				pods.Items = append(pods.Items, o.(*podEntry).pod())
			}
			return nil
		}
	}
	return fmt.Errorf("the webhook's pod index lists pods only by %s or %s, not %v", IndexPodNode, IndexPodPool, lo.FieldSelector)
}

// NeedLeaderElection: every webhook replica answers from its own index.
func (p *PodIndex) NeedLeaderElection() bool { return false }
