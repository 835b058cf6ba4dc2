package kit

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Catalog is the plugin's view of the pools: Pool objects, their member nodes and the
// workload pods of nodes, each read once on first use and remembered. It implements
// policy.NodeCatalog, so the plugin's pre-flight calls the very rule functions the
// webhook calls (policy.AdmitNode for N1-N3), over what the plugin listed. Like the
// webhook's catalog it remembers the first read error: check Err before trusting an
// answer.
type Catalog struct {
	ctx     context.Context
	c       *Clients
	objects map[string]*v1alpha1.Pool // nil: no Pool object
	members map[string][]corev1.Node
	pods    map[string][]string
	err     error
}

var _ policy.NodeCatalog = (*Catalog)(nil)

// NewCatalog returns an empty catalog reading through c.
func NewCatalog(ctx context.Context, c *Clients) *Catalog {
	return &Catalog{ctx: ctx, c: c, objects: map[string]*v1alpha1.Pool{}, members: map[string][]corev1.Node{}, pods: map[string][]string{}}
}

// Err is the first read error of the catalog.
func (k *Catalog) Err() error { return k.err }

func (k *Catalog) fail(err error) {
	if k.err == nil && err != nil {
		k.err = err
	}
}

// Object returns the Pool object of name; nil for "default" and for a pool that exists
// only as node labels.
func (k *Catalog) Object(name string) (*v1alpha1.Pool, error) {
	if name == policy.DefaultPool || name == "" {
		return nil, nil
	}
	if p, ok := k.objects[name]; ok {
		return p, nil
	}
	p, err := k.c.Pools.Get(k.ctx, name)
	if apierrors.IsNotFound(err) {
		p, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	k.objects[name] = p
	return p, nil
}

// Members lists the nodes of a pool ("default": the nodes of no pool), sorted by name.
func (k *Catalog) Members(name string) ([]corev1.Node, error) {
	if m, ok := k.members[name]; ok {
		return m, nil
	}
	list, err := k.c.Kube.CoreV1().Nodes().List(k.ctx, ListBySelector(PoolSelector(name)))
	if err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	k.members[name] = list.Items
	return list.Items, nil
}

// Lookup returns a pool and its members. A pool that exists only as labels gets a
// synthesized object whose accelerator is its members' model (its floor is 1); a pool
// with neither object nor members is NotFound.
func (k *Catalog) Lookup(name string) (*v1alpha1.Pool, []corev1.Node, error) {
	pool, err := k.Object(name)
	if err != nil {
		return nil, nil, err
	}
	members, err := k.Members(name)
	if err != nil {
		return nil, nil, err
	}
	if pool == nil {
		if len(members) == 0 {
			return nil, nil, PoolNotFound(name)
		}
		p := SynthesizedPool(name)
		p.Spec.Accelerator.Type = policy.GPUType(&members[0])
		pool = &p
	}
	return pool, members, nil
}

// Pool implements policy.PoolCatalog.
func (k *Catalog) Pool(name string) (policy.PoolInfo, bool) {
	info := policy.PoolInfo{Name: name}
	obj, err := k.Object(name)
	k.fail(err)
	info.Object = obj
	members, err := k.Members(name)
	k.fail(err)
	info.Members = len(members)
	types := make([]string, 0, len(members))
	for i := range members {
		types = append(types, policy.GPUType(&members[i]))
	}
	info.GPUTypes = policy.DistinctSorted(types)
	return info, info.Object != nil || info.Members > 0
}

// RemainingAfter implements policy.DepartureCounter as the webhook counts: the members
// pool keeps once node has left, all of them and the Ready ones (N3's floor counts
// Ready members).
func (k *Catalog) RemainingAfter(pool, node string) (members, ready int) {
	list, err := k.Members(pool)
	k.fail(err)
	var names, readyNames []string
	for i := range list {
		names = append(names, list[i].Name)
		if policy.IsNodeReady(&list[i]) {
			readyNames = append(readyNames, list[i].Name)
		}
	}
	return policy.RemainingAfterDeparture(names, nil, node), policy.RemainingAfterDeparture(readyNames, nil, node)
}

// PoolNames implements policy.PoolCatalog: Pool objects and pools made of node labels.
// It reads every node, so the rules ask for it only to write a denial.
func (k *Catalog) PoolNames() []string {
	pools, err := k.c.Pools.List(k.ctx)
	k.fail(err)
	nodes, err := k.c.Kube.CoreV1().Nodes().List(k.ctx, ListBySelector(policy.LabelPool))
	k.fail(err)
	var names []string
	for i := range pools {
		names = append(names, pools[i].Name)
	}
	if nodes != nil {
		for i := range nodes.Items {
			names = append(names, nodes.Items[i].Labels[policy.LabelPool])
		}
	}
	return policy.DistinctSorted(names)
}

// WorkloadPods implements policy.NodeCatalog. As in the webhook, a terminating pod does
// not count: it is on its way out.
func (k *Catalog) WorkloadPods(node string) []string {
	if p, ok := k.pods[node]; ok {
		return p
	}
	pods, err := inventory.ActivePodsOn(k.ctx, k.c.Kube, map[string]bool{node: true})
	k.fail(err)
	var out []string
	for i := range pods {
		if p := &pods[i]; inventory.IsWorkloadPod(p) && p.DeletionTimestamp == nil {
			out = append(out, p.Namespace+"/"+p.Name)
		}
	}
	sort.Strings(out)
	k.pods[node] = out
	return out
}
