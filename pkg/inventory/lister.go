package inventory

import (
	"bufio"
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/pager"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// PageSize is the number of objects fetched per list call. The scanners keep memory per
// page small (the response body), so pages can be larger than client-go's usual 500:
// fewer round trips.
var PageSize int64 = 1000

// ActivePodsSelector keeps terminal and unbound pods on the server side of the wire.
const ActivePodsSelector = "status.phase!=Succeeded,status.phase!=Failed,spec.nodeName!="

// Options narrow what Collect reads.
type Options struct {
	// NodeSelector is a label selector for nodes (e.g. runwhere.ai/pool=train-a100).
	NodeSelector string
	// WithoutLabels leaves Node.Labels empty (see Builder.WithoutLabels).
	WithoutLabels bool
	// Accelerators says which resources are counted; the zero value is the known set.
	Accelerators policy.Accelerators
	// Topologies are the pools' topologies (TopologiesOf): those pools get a domain view.
	Topologies map[string]PoolTopology
}

// Collect lists pods, then nodes, page by page and builds the inventory. Pool names in
// extraPools get an entry even with no members.
//
// Lists go through the REST client as protobuf and are read by the scanners (scan.go),
// which decode only the fields the inventory uses. A client without a REST client (the
// fake clientset of unit tests) or a response that is not protobuf falls back to the
// typed, fully decoded lists.
func Collect(ctx context.Context, client kubernetes.Interface, opts Options, extraPools ...string) (*Inventory, error) {
	dra, warning, err := CollectDRA(ctx, client)
	if err != nil {
		return nil, err
	}
	inv, err := collect(ctx, client, opts, dra, extraPools)
	if inv != nil && warning != "" {
		inv.Warnings = append(inv.Warnings, warning)
	}
	return inv, err
}

func collect(ctx context.Context, client kubernetes.Interface, opts Options, dra DRANodes, extraPools []string) (*Inventory, error) {
	b := opts.builder()
	b.DRA = dra
	podOpts := metav1.ListOptions{FieldSelector: ActivePodsSelector}
	nodeOpts := metav1.ListOptions{LabelSelector: opts.NodeSelector}
	if rc := restClient(client.CoreV1().RESTClient()); rc != nil {
		var pod corev1.Pod
		names := map[string]string{}
		err := scanList(ctx, rc, "pods", podOpts, func(item []byte) error {
			if err := itemDecoder.pod(item, &pod, names, opts.Accelerators); err != nil {
				return err
			}
			b.AddPod(&pod)
			return nil
		})
		if err == nil {
			var node corev1.Node
			err = scanList(ctx, rc, "nodes", nodeOpts, func(item []byte) error {
				if err := itemDecoder.node(item, &node, opts.Accelerators); err != nil {
					return err
				}
				b.AddNode(&node)
				return nil
			})
			if err == nil {
				return b.Build(extraPools...), nil
			}
		}
		if !errors.Is(err, errNotProtobuf) {
			return nil, err
		}
		b = opts.builder()
		b.DRA = dra
	}
	return collectTyped(ctx, client, b, podOpts, nodeOpts, extraPools)
}

func (o Options) builder() *Builder {
	b := NewBuilder()
	b.Topologies = o.Topologies
	b.WithoutLabels = o.WithoutLabels
	b.Accelerators = o.Accelerators
	return b
}

// restClient returns rc, or nil when there is none (the fakes' typed nil).
func restClient(rc rest.Interface) rest.Interface {
	if c, ok := rc.(*rest.RESTClient); ok && c == nil {
		return nil
	}
	return rc
}

// scanList pages through a list as protobuf, passing each item's bytes to fn. Each
// page is read as a stream, one item at a time, into the same small buffer: a list
// costs one item of memory however long it is.
func scanList(ctx context.Context, rc rest.Interface, resource string, opts metav1.ListOptions, fn func([]byte) error) error {
	opts.Limit = PageSize
	r := bufio.NewReaderSize(nil, 64<<10)
	var item []byte
	for {
		body, err := rc.Get().Resource(resource).VersionedParams(&opts, scheme.ParameterCodec).
			SetHeader("Accept", runtime.ContentTypeProtobuf).Stream(ctx)
		if err != nil {
			return fmt.Errorf("listing %s: %w", resource, err)
		}
		r.Reset(body)
		cont, err := streamItems(r, &item, fn)
		body.Close()
		if err != nil {
			if errors.Is(err, errNotProtobuf) {
				return err
			}
			return fmt.Errorf("reading the list of %s: %w", resource, err)
		}
		if cont == "" {
			return nil
		}
		opts.Continue = cont
	}
}

// collectTyped is Collect with client-go's typed lists and full decoding.
func collectTyped(ctx context.Context, client kubernetes.Interface, b *Builder, podOpts, nodeOpts metav1.ListOptions, extraPools []string) (*Inventory, error) {
	podPager := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
	})
	podPager.PageSize = PageSize
	err := podPager.EachListItem(ctx, podOpts, func(obj runtime.Object) error {
		b.AddPod(obj.(*corev1.Pod))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	nodePager := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return client.CoreV1().Nodes().List(ctx, o)
	})
	nodePager.PageSize = PageSize
	err = nodePager.EachListItem(ctx, nodeOpts, func(obj runtime.Object) error {
		b.AddNode(obj.(*corev1.Node))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return b.Build(extraPools...), nil
}
