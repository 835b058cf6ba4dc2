package admission

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/podindex"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Field indexes the catalog reads by. Pods are indexed by the node they are bound to and
// by the pool they ask for; nodes by the pool they belong to.
const (
	IndexPodNode  = podindex.ByNode
	IndexPodPool  = podindex.ByPool
	IndexNodePool = "metadata.labels.pool"
	// IndexNodeHostname: the nodes' kubernetes.io/hostname label, which a pod's
	// placement may name instead of the node's name (policy.PlacementPin).
	IndexNodeHostname = "metadata.labels.hostname"
)

// Indexes are the field indexes the catalog needs, for SetupIndexes and for fake
// clients in tests.
var Indexes = []struct {
	Obj     client.Object
	Field   string
	Extract client.IndexerFunc
}{
	{&corev1.Pod{}, IndexPodNode, func(o client.Object) []string { return nonEmpty(o.(*corev1.Pod).Spec.NodeName) }},
	{&corev1.Pod{}, IndexPodPool, func(o client.Object) []string { return nonEmpty(o.GetLabels()[policy.LabelPool]) }},
	{&corev1.Node{}, IndexNodePool, func(o client.Object) []string { return nonEmpty(o.GetLabels()[policy.LabelPool]) }},
	{&corev1.Node{}, IndexNodeHostname, func(o client.Object) []string { return nonEmpty(o.GetLabels()[policy.LabelHostname]) }},
}

func nonEmpty(v string) []string {
	if v == "" {
		return nil
	}
	return []string{v}
}

// SetupIndexes registers the node indexes with the manager's cache (before it starts).
// Pods are indexed by podindex instead: an index on the manager's cache would start its
// pod informer, the cost podindex avoids.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	for _, ix := range Indexes {
		if _, pod := ix.Obj.(*corev1.Pod); pod {
			continue
		}
		if err := indexer.IndexField(ctx, ix.Obj, ix.Field, ix.Extract); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", ix.Obj, ix.Field, err)
		}
	}
	return nil
}

// CachedObjects are the kinds the webhook reads from the manager's cache; cmd/webhook
// starts their informers before it reports ready. Pods it reads from podindex.
func CachedObjects() []client.Object {
	return []client.Object{&corev1.Node{}, &corev1.Namespace{}, &v1alpha1.Pool{}}
}

// CacheByObject trims what the informers keep: nodes are, after pods (which podindex
// keeps), the bulk of a large cluster and the rules read only a few of their fields.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Node{}: {Transform: trimNode},
	}
}

// trimNode keeps a node's metadata (labels carry pool membership and accelerator model,
// and P6 matches pods' node affinity against all of them), of its annotations only
// litepool's own (runwhere.ai/: the others, such as Node Feature Discovery's lists,
// can be kilobytes a node and no rule reads them), its taints (the controller keeps
// exclusive pools' taints), whether it is cordoned and Ready (N3's floors count members
// Ready and in service), its extended resources' allocatable (N2 compares a domain's
// accelerator counts), and drops the rest of its status: heartbeats change only what the rules never read.
// Nodes are only ever patched from a cached copy (a merge patch of the difference), so
// what the cache leaves out is never written back as removed.
func trimNode(in any) (any, error) {
	node, ok := in.(*corev1.Node)
	if !ok {
		return in, nil
	}
	out := &corev1.Node{TypeMeta: node.TypeMeta, ObjectMeta: node.ObjectMeta}
	out.ManagedFields = nil
	out.Annotations = nil
	for k, v := range node.Annotations {
		if strings.HasPrefix(k, policy.Prefix) {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	out.Spec.Taints = node.Spec.Taints
	out.Spec.Unschedulable = node.Spec.Unschedulable // N3's domain floor counts members in service
	out.Status.Allocatable = extendedResources(node.Status.Allocatable)
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return out, nil
}

// Catalog answers the rules' questions from a client.Reader: in the webhook the
// manager's informer cache, so no request makes an API call.
type Catalog struct {
	Reader client.Reader
}

// forRequest binds the catalog to a request's context.
func (c Catalog) forRequest(ctx context.Context) *requestCatalog {
	return &requestCatalog{ctx: ctx, r: c.Reader}
}

// requestCatalog implements policy.NodeCatalog for one request; it remembers the first
// read error so that the handler can answer it instead of deciding on partial data.
type requestCatalog struct {
	ctx context.Context
	r   client.Reader
	err error
	// granted are the departures already reserved from the pool being judged (nil when
	// the request is no departure): N3 counts the members without them.
	granted map[string]bool
	// podRules: the pod rules read a pool's members only when it has no Pool object
	// (to know it exists and which model its nodes are); skipping the member list for
	// the common case keeps a pod request free of per-node work and garbage.
	podRules bool
}

var noCopy = client.UnsafeDisableDeepCopy

func (c *requestCatalog) fail(err error) {
	if c.err == nil && err != nil {
		c.err = err
	}
}

// Pool implements policy.PoolCatalog.
func (c *requestCatalog) Pool(name string) (policy.PoolInfo, bool) {
	info := policy.PoolInfo{Name: name}
	var p v1alpha1.Pool
	err := c.r.Get(c.ctx, client.ObjectKey{Name: name}, &p, &client.GetOptions{UnsafeDisableDeepCopy: ptrTrue()})
	switch {
	case err == nil:
		info.Object = &p
	case client.IgnoreNotFound(err) != nil:
		c.fail(err)
	}
	if c.podRules && info.Object != nil {
		return info, true
	}
	nodes := c.members(name)
	info.Members = len(nodes)
	types := make([]string, 0, len(nodes))
	for _, n := range nodes {
		types = append(types, policy.GPUType(n))
	}
	info.GPUTypes = policy.DistinctSorted(types)
	return info, info.Object != nil || info.Members > 0
}

func (c *requestCatalog) members(pool string) []*corev1.Node {
	return c.nodesBy(IndexNodePool, pool)
}

// nodesBy are the cached nodes whose index field holds value.
func (c *requestCatalog) nodesBy(index, value string) []*corev1.Node {
	var list corev1.NodeList
	if err := c.r.List(c.ctx, &list, client.MatchingFields{index: value}, noCopy); err != nil {
		c.fail(err)
		return nil
	}
	out := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out
}

// PoolNames implements policy.PoolCatalog: Pool objects and pools made of node labels.
// The rules ask for it only to write a denial (P2). The label pools are the values of
// the nodes' pool index, read without touching a node where the reader is an informer
// cache; copying every node into a list made a P2 denial cost 200 times an allowed
// request (bench/webhook, 1,000 nodes).
func (c *requestCatalog) PoolNames() []string {
	var pools v1alpha1.PoolList
	if err := c.r.List(c.ctx, &pools, noCopy); err != nil {
		c.fail(err)
	}
	names := c.labelPools()
	for i := range pools.Items {
		names = append(names, pools.Items[i].Name)
	}
	return policy.DistinctSorted(names)
}

// clusterScopedIndexKey starts controller-runtime's field-index keys of cluster-scoped
// objects ("__all_namespaces/<value>").
const clusterScopedIndexKey = "__all_namespaces/"

// poolsOfIndexKeys turns the node pool index's keys into pool names: controller-runtime
// keys a cluster-scoped object's value as "__all_namespaces/<value>"; a key without a
// slash is a plain value (a reader that indexes by value alone).
func poolsOfIndexKeys(keys []string) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		switch {
		case strings.HasPrefix(k, clusterScopedIndexKey):
			out = append(out, strings.TrimPrefix(k, clusterScopedIndexKey))
		case !strings.Contains(k, "/"):
			out = append(out, k)
		}
	}
	return out
}

// informerGetter is the part of the manager's cache (cache.Informers) that hands out
// the informers behind the reader.
type informerGetter interface {
	GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error)
}

// labelPools lists the pools nodes carry in their label: the keys of the node pool
// index when the reader's informer exposes its indexer, else from a list of the nodes.
func (c *requestCatalog) labelPools() []string {
	if ig, ok := c.r.(informerGetter); ok {
		inf, err := ig.GetInformer(c.ctx, &corev1.Node{})
		if err != nil {
			c.fail(err)
			return nil
		}
		if ix, ok := inf.(interface{ GetIndexer() toolscache.Indexer }); ok {
			return poolsOfIndexKeys(ix.GetIndexer().ListIndexFuncValues("field:" + IndexNodePool))
		}
	}
	var nodes corev1.NodeList
	if err := c.r.List(c.ctx, &nodes, noCopy); err != nil {
		c.fail(err)
	}
	names := make([]string, 0, len(nodes.Items))
	for i := range nodes.Items {
		if pool := nodes.Items[i].Labels[policy.LabelPool]; pool != "" {
			names = append(names, pool)
		}
	}
	return names
}

// extendedResources keeps the extended resources (vendor/name: accelerators) of a
// node's allocatable, which N2 compares across a domain's members; cpu, memory and the
// rest are not read by any rule.
func extendedResources(in corev1.ResourceList) corev1.ResourceList {
	var out corev1.ResourceList
	for rn, q := range in {
		if strings.Contains(string(rn), "/") {
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[rn] = q
		}
	}
	return out
}

// domainMembers are the cached members of pool in unit domain d.
func (c *requestCatalog) domainMembers(pool string, t policy.Topology, d string) []*corev1.Node {
	var out []*corev1.Node
	for _, n := range c.members(pool) {
		if got, ok := t.DomainOf(n); ok && got == d {
			out = append(out, n)
		}
	}
	return out
}

// DomainAfter implements policy.DomainCounter: the members of pool the cache shows in
// domain d, and those in service other than node and the departures already granted.
func (c *requestCatalog) DomainAfter(pool, node string, t policy.Topology, d string) ([]string, int) {
	nodes := c.domainMembers(pool, t, d)
	names := make([]string, 0, len(nodes))
	var resource corev1.ResourceName
	if info, ok := c.Pool(pool); ok && info.Object != nil {
		resource = info.Object.Spec.Accelerator.ResourceName
	}
	inService := 0
	for _, n := range nodes {
		names = append(names, n.Name)
		if n.Name != node && !c.granted[n.Name] && policy.NodeOut(n, pool, resource) == "" {
			inService++
		}
	}
	sort.Strings(names)
	return names, inService
}

// DomainPeers implements policy.DomainCounter.
func (c *requestCatalog) DomainPeers(pool, node string, t policy.Topology, d string) []*corev1.Node {
	var out []*corev1.Node
	for _, n := range c.domainMembers(pool, t, d) {
		if n.Name != node {
			out = append(out, n)
		}
	}
	return out
}

// RemainingAfter implements policy.DepartureCounter: the members the cache sees in pool,
// less node and the departures already granted; all of them, and the Ready ones.
func (c *requestCatalog) RemainingAfter(pool, node string) (members, ready int) {
	nodes := c.members(pool)
	names := make([]string, 0, len(nodes))
	readyNames := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Name)
		if policy.IsNodeReady(n) {
			readyNames = append(readyNames, n.Name)
		}
	}
	return policy.RemainingAfterDeparture(names, c.granted, node), policy.RemainingAfterDeparture(readyNames, c.granted, node)
}

// WorkloadPods implements policy.NodeCatalog. A terminating pod does not count: it is
// on its way out, and the Node of a dead machine, whose pods never finish terminating,
// must still be deletable.
func (c *requestCatalog) WorkloadPods(node string) []string {
	var list corev1.PodList
	if err := c.r.List(c.ctx, &list, client.MatchingFields{IndexPodNode: node}, noCopy); err != nil {
		c.fail(err)
		return nil
	}
	var out []string
	for i := range list.Items {
		if p := &list.Items[i]; inventory.IsWorkloadPod(p) && p.DeletionTimestamp == nil {
			out = append(out, p.Namespace+"/"+p.Name)
		}
	}
	sort.Strings(out)
	return out
}

// PoolWorkloadPods lists the workload pods bound to the pool's member nodes (R2).
func (c *requestCatalog) PoolWorkloadPods(pool string) []string {
	var out []string
	for _, n := range c.members(pool) {
		out = append(out, c.WorkloadPods(n.Name)...)
	}
	sort.Strings(out)
	return out
}

// PendingPoolPods counts pods that ask for the pool and are not bound to a node yet.
func (c *requestCatalog) PendingPoolPods(pool string) int {
	var list corev1.PodList
	if err := c.r.List(c.ctx, &list, client.MatchingFields{IndexPodPool: pool}, noCopy); err != nil {
		c.fail(err)
		return 0
	}
	n := 0
	for i := range list.Items {
		if p := &list.Items[i]; p.Spec.NodeName == "" && !inventory.IsTerminal(p) {
			n++
		}
	}
	return n
}

// NodeNamed implements policy.NodeView.
func (c *requestCatalog) NodeNamed(name string) *corev1.Node {
	var node corev1.Node
	if err := c.r.Get(c.ctx, client.ObjectKey{Name: name}, &node, &client.GetOptions{UnsafeDisableDeepCopy: ptrTrue()}); err != nil {
		c.fail(client.IgnoreNotFound(err))
		return nil
	}
	return &node
}

// NodesWithHostname implements policy.NodeView, by the hostname index.
func (c *requestCatalog) NodesWithHostname(h string) []*corev1.Node {
	return c.nodesBy(IndexNodeHostname, h)
}

// PoolHasMembers implements policy.NodeView.
func (c *requestCatalog) PoolHasMembers(pool string) bool {
	var list corev1.NodeList
	if err := c.r.List(c.ctx, &list, client.MatchingFields{IndexNodePool: pool}, client.Limit(1), noCopy); err != nil {
		c.fail(err)
		return false
	}
	return len(list.Items) > 0
}

// cachedNode is the cache's copy of the node a review names, when the cache holds a
// node of that name and uid.
func (c *requestCatalog) cachedNode(n *corev1.Node) (*corev1.Node, bool) {
	var cached corev1.Node
	err := c.r.Get(c.ctx, client.ObjectKey{Name: n.Name}, &cached, &client.GetOptions{UnsafeDisableDeepCopy: ptrTrue()})
	if err != nil {
		c.fail(client.IgnoreNotFound(err))
		return nil, false
	}
	return &cached, cached.UID == n.UID
}

// Namespace returns the namespace NAME, or nil when the cache does not know it (yet).
func (c *requestCatalog) Namespace(name string) *corev1.Namespace {
	if name == "" {
		return nil
	}
	var ns corev1.Namespace
	err := c.r.Get(c.ctx, client.ObjectKey{Name: name}, &ns, &client.GetOptions{UnsafeDisableDeepCopy: ptrTrue()})
	if err != nil {
		c.fail(client.IgnoreNotFound(err))
		return nil
	}
	return &ns
}

func ptrTrue() *bool { t := true; return &t }

// ExclusiveMembers lists the nodes of exclusive pools with their pool (P6).
func (c *requestCatalog) ExclusiveMembers() []policy.ExclusiveMember {
	var pools v1alpha1.PoolList
	if err := c.r.List(c.ctx, &pools, noCopy); err != nil {
		c.fail(err)
		return nil
	}
	var out []policy.ExclusiveMember
	for i := range pools.Items {
		p := &pools.Items[i]
		if !p.Spec.Exclusive {
			continue
		}
		info := policy.PoolInfo{Name: p.Name, Object: p}
		for _, n := range c.members(p.Name) {
			out = append(out, policy.ExclusiveMember{Node: n, Pool: info})
		}
	}
	return out
}

// ExclusiveMembersFor is what P6 reads of the members for a pod bound to target: only
// target's own membership (CheckExclusivePlacement looks at no other node then), one
// node and one Pool read instead of every exclusive pool's nodes, which a binding or a
// spec.nodeName pod would otherwise copy out of the cache at every request (10,000
// entries at 10,000 exclusive nodes). With no target, every member.
func (c *requestCatalog) ExclusiveMembersFor(target string) []policy.ExclusiveMember {
	if target == "" {
		return c.ExclusiveMembers()
	}
	var node corev1.Node
	if err := c.r.Get(c.ctx, client.ObjectKey{Name: target}, &node, &client.GetOptions{UnsafeDisableDeepCopy: ptrTrue()}); err != nil {
		c.fail(client.IgnoreNotFound(err))
		return nil
	}
	name := node.Labels[policy.LabelPool]
	if name == "" {
		return nil
	}
	var p v1alpha1.Pool
	if err := c.r.Get(c.ctx, client.ObjectKey{Name: name}, &p, &client.GetOptions{UnsafeDisableDeepCopy: ptrTrue()}); err != nil {
		c.fail(client.IgnoreNotFound(err))
		return nil
	}
	if !p.Spec.Exclusive {
		return nil
	}
	return []policy.ExclusiveMember{{Node: &node, Pool: policy.PoolInfo{Name: p.Name, Object: &p}}}
}
