package kit

import (
	"context"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// LoadPools reads Pool objects, nodes and pods and returns every pool (objects, pools
// that exist only as node labels, and "default") with its status computed. What the
// inventory warns of (figures left out) goes to warn.
func LoadPools(ctx context.Context, c *Clients, nodeSelector string, warn io.Writer) ([]v1alpha1.Pool, error) {
	objects, err := c.Pools.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing Pool objects: %w", err)
	}
	names := make([]string, len(objects))
	for i := range objects {
		names[i] = objects[i].Name
	}
	inv, err := inventory.Collect(ctx, c.Kube, inventory.Options{NodeSelector: nodeSelector, WithoutLabels: true, Accelerators: c.Accelerators,
		Topologies: inventory.TopologiesOf(objects)}, names...)
	if err != nil {
		return nil, err
	}
	PrintWarnings(warn, inv)
	return MergePools(objects, inv), nil
}

// PrintWarnings prints the inventory's warnings as kubectl prints the API server's.
func PrintWarnings(w io.Writer, inv *inventory.Inventory) {
	for _, msg := range inv.Warnings {
		fmt.Fprintf(w, "Warning: %s\n", msg)
	}
}

// LoadPool reads one pool: its object (or one synthesized for a pool that exists only as
// labels, and for "default") with its status, and the inventory of its members. A pool
// with neither object nor members is NotFound. Warnings go to warn, as for LoadPools.
func LoadPool(ctx context.Context, c *Clients, name string, warn io.Writer) (*v1alpha1.Pool, *inventory.Pool, error) {
	var objects []v1alpha1.Pool
	if name != policy.DefaultPool {
		obj, err := c.Pools.Get(ctx, name)
		switch {
		case err == nil:
			objects = append(objects, *obj)
		case !apierrors.IsNotFound(err):
			return nil, nil, err
		}
	}
	inv, err := inventory.Collect(ctx, c.Kube, inventory.Options{NodeSelector: PoolSelector(name), WithoutLabels: true, Accelerators: c.Accelerators,
		Topologies: inventory.TopologiesOf(objects)}, name)
	if err != nil {
		return nil, nil, err
	}
	PrintWarnings(warn, inv)
	if len(objects) == 0 && name != policy.DefaultPool && len(inv.Nodes) == 0 {
		return nil, nil, PoolNotFound(name)
	}
	merged := MergePools(objects, inv)
	for i := range merged {
		if merged[i].Name == name {
			return &merged[i], inv.Pools[name], nil
		}
	}
	return nil, nil, PoolNotFound(name)
}

// MergePools joins Pool objects with the inventory. Pools without an object get a
// synthesized one with the condition PoolObject=False.
func MergePools(objects []v1alpha1.Pool, inv *inventory.Inventory) []v1alpha1.Pool {
	byName := map[string]v1alpha1.Pool{}
	for _, p := range objects {
		byName[p.Name] = p
	}
	out := make([]v1alpha1.Pool, 0, len(inv.Pools))
	for _, name := range inv.PoolNames() {
		pool, ok := byName[name]
		if !ok {
			pool = SynthesizedPool(name)
		}
		pool.APIVersion, pool.Kind = v1alpha1.GroupVersion.String(), "Pool"
		inventory.SetStatus(&pool, inv.Pools[name])
		out = append(out, pool)
	}
	return out
}

// ConditionPoolObject is False on pools that have no Pool object.
const ConditionPoolObject = "PoolObject"

// SynthesizedPool stands for a pool that has no Pool object: one made only of node
// labels, or "default". Its condition PoolObject=False says so.
func SynthesizedPool(name string) v1alpha1.Pool {
	reason, msg := "LabelsOnly", "pool exists only as node labels; `kubectl litepool create` adopts it"
	if name == policy.DefaultPool {
		reason, msg = "DefaultPool", "nodes that belong to no pool"
	}
	return v1alpha1.Pool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: v1alpha1.PoolStatus{Conditions: []metav1.Condition{{
			Type: ConditionPoolObject, Status: metav1.ConditionFalse, Reason: reason, Message: msg,
		}}},
	}
}

// HasObject says whether a pool has a Pool object (not only node labels).
func HasObject(p *v1alpha1.Pool) bool {
	return !apimeta.IsStatusConditionFalse(p.Status.Conditions, ConditionPoolObject)
}

// PoolNotFound is the NotFound error of a pool.
func PoolNotFound(name string) error {
	return apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("pools").GroupResource(), name)
}

// SynthesizedMember is the Pool a node joins when the pool has no object: no policy
// beyond the label.
func SynthesizedMember(name string) *v1alpha1.Pool {
	p := SynthesizedPool(name)
	return &p
}
