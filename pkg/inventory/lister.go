package inventory

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"
)

// PageSize is the number of objects fetched per list call.
const PageSize = 500

// ActivePodsSelector keeps terminal and unbound pods on the server side of the wire.
const ActivePodsSelector = "status.phase!=Succeeded,status.phase!=Failed,spec.nodeName!="

// Options narrow what Collect reads.
type Options struct {
	// NodeSelector is a label selector for nodes (e.g. runwhere.ai/pool=train-a100).
	NodeSelector string
}

// Collect lists pods, then nodes, page by page and builds the inventory. Pool names in
// extraPools get an entry even with no members.
func Collect(ctx context.Context, client kubernetes.Interface, opts Options, extraPools ...string) (*Inventory, error) {
	b := NewBuilder()
	podPager := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		o.FieldSelector = ActivePodsSelector
		return client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
	})
	podPager.PageSize, podPager.PageBufferSize = PageSize, 1
	err := podPager.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		b.AddPod(obj.(*corev1.Pod))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	nodePager := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		o.LabelSelector = opts.NodeSelector
		return client.CoreV1().Nodes().List(ctx, o)
	})
	nodePager.PageSize, nodePager.PageBufferSize = PageSize, 1
	err = nodePager.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		b.AddNode(obj.(*corev1.Node))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return b.Build(extraPools...), nil
}
