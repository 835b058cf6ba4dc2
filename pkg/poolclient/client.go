// Package poolclient reads and writes Pool objects through the dynamic client, typed on
// the way in and out. A cluster without the Pool CRD is a cluster with no Pool objects
// for reads; writes say that the CRD must be installed.
package poolclient

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// Client reads and writes Pools.
type Client struct {
	dyn dynamic.ResourceInterface
}

// New returns a Pool client over a dynamic client.
func New(dyn dynamic.Interface) *Client {
	return &Client{dyn: dyn.Resource(v1alpha1.PoolResource)}
}

// ErrNoCRD explains a missing CRD.
var ErrNoCRD = fmt.Errorf("the Pool resource (pools.runwhere.ai) is not installed in this cluster: install it with `kubectl apply -k deploy/webhook` (or `kubectl apply -f deploy/webhook/crd`)")

func isNoCRD(err error) bool {
	return meta.IsNoMatchError(err) || (apierrors.IsNotFound(err) && isResourceNotFound(err))
}

// A NotFound for the resource itself (not for one object) has no name in its details.
func isResourceNotFound(err error) bool {
	var status apierrors.APIStatus
	if s, ok := err.(apierrors.APIStatus); ok {
		status = s
	} else {
		return false
	}
	d := status.Status().Details
	return d == nil || d.Name == ""
}

// List returns every Pool; none when the CRD is not installed.
func (c *Client) List(ctx context.Context) ([]v1alpha1.Pool, error) {
	list, err := c.dyn.List(ctx, metav1.ListOptions{})
	if err != nil {
		if isNoCRD(err) {
			return nil, nil
		}
		return nil, err
	}
	pools := make([]v1alpha1.Pool, 0, len(list.Items))
	for i := range list.Items {
		p, err := FromUnstructured(&list.Items[i])
		if err != nil {
			return nil, err
		}
		pools = append(pools, *p)
	}
	return pools, nil
}

// Get returns one Pool. A missing Pool is a NotFound error.
func (c *Client) Get(ctx context.Context, name string) (*v1alpha1.Pool, error) {
	u, err := c.dyn.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if isNoCRD(err) {
			return nil, apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("pools").GroupResource(), name)
		}
		return nil, err
	}
	return FromUnstructured(u)
}

// Create creates a Pool.
func (c *Client) Create(ctx context.Context, pool *v1alpha1.Pool, opts metav1.CreateOptions) (*v1alpha1.Pool, error) {
	u, err := ToUnstructured(pool)
	if err != nil {
		return nil, err
	}
	out, err := c.dyn.Create(ctx, u, opts)
	if err != nil {
		return nil, wrapNoCRD(err)
	}
	return FromUnstructured(out)
}

// Update replaces a Pool (optimistic concurrency on resourceVersion).
func (c *Client) Update(ctx context.Context, pool *v1alpha1.Pool, opts metav1.UpdateOptions) (*v1alpha1.Pool, error) {
	u, err := ToUnstructured(pool)
	if err != nil {
		return nil, err
	}
	out, err := c.dyn.Update(ctx, u, opts)
	if err != nil {
		return nil, wrapNoCRD(err)
	}
	return FromUnstructured(out)
}

// Patch patches a Pool.
func (c *Client) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (*v1alpha1.Pool, error) {
	out, err := c.dyn.Patch(ctx, name, pt, data, opts)
	if err != nil {
		return nil, wrapNoCRD(err)
	}
	return FromUnstructured(out)
}

// Delete deletes a Pool.
func (c *Client) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return wrapNoCRD(c.dyn.Delete(ctx, name, opts))
}

func wrapNoCRD(err error) error {
	if err != nil && isNoCRD(err) {
		return ErrNoCRD
	}
	return err
}

// FromUnstructured converts to a typed Pool.
func FromUnstructured(u *unstructured.Unstructured) (*v1alpha1.Pool, error) {
	var p v1alpha1.Pool
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
		return nil, fmt.Errorf("decoding Pool %q: %w", u.GetName(), err)
	}
	return &p, nil
}

// ToUnstructured converts a typed Pool, setting its apiVersion and kind.
func ToUnstructured(p *v1alpha1.Pool) (*unstructured.Unstructured, error) {
	p = p.DeepCopy()
	p.APIVersion, p.Kind = v1alpha1.GroupVersion.String(), "Pool"
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		return nil, err
	}
	if spec, ok := obj["spec"].(map[string]any); ok {
		pruneEmpty(spec)
	}
	delete(obj, "status") // computed by litepool, never stored
	return &unstructured.Unstructured{Object: obj}, nil
}

// pruneEmpty drops empty objects (hccl: {opRetry: {}}, software: {}) that Go structs
// without omitempty produce. Sent as they are, the API server would fill them with the
// CRD's defaults (hccl.opRetry.maxRetries: 3, ...) on every update, changing pools
// nobody meant to change.
// An empty namespaceSelector is kept: it means "every namespace".
func pruneEmpty(m map[string]any) {
	for k, v := range m {
		child, ok := v.(map[string]any)
		if !ok || k == "namespaceSelector" {
			continue
		}
		pruneEmpty(child)
		if len(child) == 0 {
			delete(m, k)
		}
	}
}
