// Package inventory reads the cluster's nodes and pods in one paged pass and sums them up
// per node and per pool: the figures behind `get pools`, `get nodes` and `describe`.
//
// The whole-cluster figures (Builder, Lister) cost what the floor costs: one paged list of
// nodes and one of non-terminal bound pods (terminal pods are filtered by the API
// server), plus DeviceClasses, ResourceSlices and ResourceClaims where the cluster has DRA
// objects; of a pod only its node, whether it is workload and its accelerator requests are
// kept. The one-node readers (ActivePodsOn, for describe node, scale and the catalog)
// list by node instead, one request a node up to ten nodes.
package inventory

import (
	"iter"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/podindex"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// Node is what litepool keeps of one node.
type Node struct {
	Name     string
	Pool     string
	NodePool string
	State    policy.NodeState
	Ready    bool
	// InService says that the node's accelerators are its pool's pods' to use:
	// policy.NodeOut is empty (Ready, not cordoned, quarantined or upgrading, and no
	// NoSchedule or NoExecute taint the pool's pods do not tolerate), the one
	// computation the queue's quota and the domain view count with.
	InService     bool
	GPUType       string
	DriverVersion string
	Resource      corev1.ResourceName
	UpgradeState  policy.UpgradeState // runwhere.ai/upgrade-state; empty when never upgraded
	Total         int64               // allocatable whole accelerators (MIG slices are not added)
	Used          int64               // whole accelerators requested by non-terminal pods bound to the node
	WorkloadPods  int                 // non-terminal pods not owned by a DaemonSet
	// MIG is the node's NVIDIA MIG slices, per profile: shown apart, never added to GPUs.
	MIG    []MIGSlices
	Labels map[string]string
	// DRA is the node's DRA devices (dra.go): apart from the extended resources above.
	DRA []DRADevices
}

// MIGSlices is one MIG profile's slices: allocatable and requested.
type MIGSlices struct {
	Resource    corev1.ResourceName
	Total, Used int64
}

// Free is the slices not requested; never negative.
func (m MIGSlices) Free() int64 { return max(m.Total-m.Used, 0) }

// Free is the accelerators not requested; never negative.
func (n Node) Free() int64 { return max(n.Total-n.Used, 0) }

// Pool sums up the members of one pool. Total and Used are every member's, as kubectl
// shows nodes; Free is what pods can still be given: the members in service only
// (Node.InService), so Total - Used - Free is what members out of service hold idle.
type Pool struct {
	Name           string
	Nodes          []*Node
	Resource       corev1.ResourceName
	Total          int64 // allocatable accelerators of every member
	Used           int64 // requested by non-terminal pods bound to the members
	Free           int64 // allocatable less requests on the members in service, each at least 0
	Healthy        int
	Faulty         int
	ReadyNodes     int
	NodeStates     map[policy.NodeState]int
	UpgradeStates  map[policy.UpgradeState]int
	Phase          string
	GPUTypes       []string
	DriverVersions []string
	MIG            []MIGSlices  // Ready members' slices (used: all members'), per profile
	DRA            []DRADevices // Ready members' DRA devices, as for GPUs
	// Topology and Domains are the pool's topology and its domain view, for a pool
	// that declares one (Builder.Topologies); nil otherwise.
	Topology *PoolTopology
	Domains  *policy.DomainView
}

// usage is what one node's pods add up to.
type usage struct {
	accelerators int64
	mig          map[corev1.ResourceName]int64
	workloadPods int
}

// Builder accumulates pods, then nodes, into an Inventory. Feed every pod first (AddPod),
// then every node (AddNode), then call Build.
type Builder struct {
	usage map[string]usage
	nodes []*Node
	// WithoutLabels leaves Node.Labels empty: listings of thousands of nodes do not
	// need a copy of every node's litepool labels.
	WithoutLabels bool
	// Accelerators says which resources are counted; the zero value is the known set.
	Accelerators policy.Accelerators
	// DRA is the nodes' DRA devices (DRACounter.Finish), set before AddNode.
	DRA DRANodes
	// Topologies are the topologies of the pools that declare one (TopologiesOf), set
	// before AddNode: Build gives those pools their domain view, in the same pass.
	Topologies map[string]PoolTopology
	// domainMembers are what the domain view reads of those pools' members.
	domainMembers map[string][]policy.DomainMember
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder { return &Builder{usage: map[string]usage{}} }

// AddPod counts a pod against the node it is bound to. Unbound and terminal pods add
// nothing (the lister filters them already; this keeps the builder right on its own).
func (b *Builder) AddPod(pod *corev1.Pod) {
	if pod.Spec.NodeName == "" || IsTerminal(pod) {
		return
	}
	b.addUsage(pod.Spec.NodeName, maps.All(b.Accelerators.PodAcceleratorRequests(pod)), IsWorkloadPod(pod))
}

// AddIndexedPod records a pod as podindex keeps it (built with accelerators): the same
// figures as AddPod of the whole pod.
func (b *Builder) AddIndexedPod(e *podindex.Entry) {
	if e.NodeName == "" || isTerminal(e.Phase) {
		return
	}
	b.addUsage(e.NodeName, func(yield func(corev1.ResourceName, int64) bool) {
		for _, r := range e.Requests {
			if !yield(r.Name, r.Count) {
				return
			}
		}
	}, IsWorkloadEntry(e))
}

func (b *Builder) addUsage(node string, requests iter.Seq2[corev1.ResourceName, int64], workload bool) {
	u := b.usage[node]
	for rn, v := range requests {
		if !policy.IsMIG(rn) {
			u.accelerators += v
			continue
		}
		if u.mig == nil {
			u.mig = map[corev1.ResourceName]int64{}
		}
		u.mig[rn] += v
	}
	if workload {
		u.workloadPods++
	}
	b.usage[node] = u
}

// AddNode records a node with the usage of the pods seen so far.
func (b *Builder) AddNode(node *corev1.Node) {
	resource, total := b.Accelerators.NodeAccelerators(node)
	u := b.usage[node.Name]
	dra := b.DRA[node.Name]
	if dra != nil {
		u = b.withoutServed(u, dra.Served)
	}
	var labels map[string]string
	if !b.WithoutLabels {
		labels = litepoolLabels(node.Labels)
	}
	pool := policy.PoolOf(node)
	b.nodes = append(b.nodes, &Node{
		Name:          node.Name,
		Pool:          pool,
		NodePool:      node.Labels[policy.LabelNodePool],
		State:         policy.StateOfNode(node),
		Ready:         policy.IsNodeReady(node),
		InService:     policy.NodeOut(node, pool, b.tolerated(pool, resource)) == "",
		UpgradeState:  policy.UpgradeState(node.Annotations[policy.AnnotationUpgradeState]),
		GPUType:       policy.GPUType(node),
		DriverVersion: policy.DriverVersion(node),
		Resource:      resource,
		Total:         total,
		Used:          u.accelerators,
		WorkloadPods:  u.workloadPods,
		MIG:           migSlices(policy.NodeMIG(node), u.mig),
		DRA:           dra.devices(),
		Labels:        labels,
	})
	b.keepForDomains(node, pool, resource)
}

// migSlices pairs a node's MIG allocatable with its pods' MIG requests, sorted by
// resource; a profile requested but not offered still shows (0 total).
func migSlices(total, used map[corev1.ResourceName]int64) []MIGSlices {
	if len(total) == 0 && len(used) == 0 {
		return nil
	}
	names := map[corev1.ResourceName]bool{}
	for rn := range total {
		names[rn] = true
	}
	for rn := range used {
		names[rn] = true
	}
	out := make([]MIGSlices, 0, len(names))
	for _, rn := range slices.Sorted(maps.Keys(names)) {
		out = append(out, MIGSlices{Resource: rn, Total: total[rn], Used: used[rn]})
	}
	return out
}

// addMIG adds a node's slices into a pool's (counting the total of Ready nodes only, as
// for GPUs).
func addMIG(pool []MIGSlices, node []MIGSlices, ready bool) []MIGSlices {
	for _, m := range node {
		i := slices.IndexFunc(pool, func(p MIGSlices) bool { return p.Resource == m.Resource })
		if i < 0 {
			pool = append(pool, MIGSlices{Resource: m.Resource})
			i = len(pool) - 1
		}
		if ready { // as for whole GPUs: a NotReady node's slices are neither total nor used
			pool[i].Total += m.Total
			pool[i].Used += m.Used
		}
	}
	slices.SortFunc(pool, func(a, b MIGSlices) int { return strings.Compare(string(a.Resource), string(b.Resource)) })
	return pool
}

// Inventory is the cluster as litepool sees it.
type Inventory struct {
	Nodes []*Node          // sorted by name
	Pools map[string]*Pool // by name; always has "default"
	// Warnings are for the user: figures left out that the cluster has (DRA devices the
	// user may not list). A cluster without DRA gets none.
	Warnings []string
}

// Build sums nodes into pools. extraPools (Pool objects with no members yet) get an
// empty entry so they still show.
func (b *Builder) Build(extraPools ...string) *Inventory {
	sort.Slice(b.nodes, func(i, j int) bool { return b.nodes[i].Name < b.nodes[j].Name })
	inv := &Inventory{Nodes: b.nodes, Pools: map[string]*Pool{}}
	pool := func(name string) *Pool {
		p := inv.Pools[name]
		if p == nil {
			p = &Pool{Name: name}
			inv.Pools[name] = p
		}
		return p
	}
	pool(policy.DefaultPool)
	for _, name := range extraPools {
		pool(name)
	}
	for _, n := range b.nodes {
		p := pool(n.Pool)
		p.Nodes = append(p.Nodes, n)
		p.Total += n.Total
		p.Used += n.Used
		if n.InService {
			p.Free += n.Free()
		}
		p.MIG = addMIG(p.MIG, n.MIG, n.Ready)
		if n.Ready {
			p.DRA = addDRA(p.DRA, n.DRA)
		}
		if p.Resource == "" {
			p.Resource = n.Resource
		}
	}
	for _, p := range inv.Pools {
		p.finish()
	}
	b.buildDomains(inv)
	return inv
}

func (p *Pool) finish() {
	states := make([]policy.NodeState, len(p.Nodes))
	gpuTypes, drivers := map[string]bool{}, map[string]bool{}
	p.NodeStates, p.UpgradeStates = map[policy.NodeState]int{}, map[policy.UpgradeState]int{}
	for i, n := range p.Nodes {
		states[i] = n.State
		p.NodeStates[n.State]++
		if n.UpgradeState != "" {
			p.UpgradeStates[n.UpgradeState]++
		}
		if n.Ready {
			p.ReadyNodes++
		}
		if n.State == policy.NodeRunning {
			p.Healthy++
		} else {
			p.Faulty++
		}
		if n.GPUType != "" {
			gpuTypes[n.GPUType] = true
		}
		if n.DriverVersion != "" {
			drivers[n.DriverVersion] = true
		}
	}
	p.Phase = policy.PoolPhase(states)
	p.GPUTypes, p.DriverVersions = sortedKeys(gpuTypes), sortedKeys(drivers)
}

// PoolNames returns the pool names sorted, "default" last (as gpuctl lists them).
func (inv *Inventory) PoolNames() []string {
	names := make([]string, 0, len(inv.Pools))
	for n := range inv.Pools {
		if n != policy.DefaultPool {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return append(names, policy.DefaultPool)
}

// IsTerminal says whether a pod has finished (Succeeded or Failed).
func IsTerminal(pod *corev1.Pod) bool { return isTerminal(pod.Status.Phase) }

func isTerminal(phase corev1.PodPhase) bool {
	return phase == corev1.PodSucceeded || phase == corev1.PodFailed
}

// IsWorkloadPod says whether a pod is work a node should finish before it leaves a pool:
// not terminal, not owned by a DaemonSet, not a static (mirror) pod.
func IsWorkloadPod(pod *corev1.Pod) bool { return isWorkload(&pod.ObjectMeta, pod.Status.Phase) }

// IsWorkloadEntry is IsWorkloadPod of a pod as podindex keeps it.
func IsWorkloadEntry(e *podindex.Entry) bool { return isWorkload(&e.ObjectMeta, e.Phase) }

func isWorkload(meta *metav1.ObjectMeta, phase corev1.PodPhase) bool {
	if isTerminal(phase) {
		return false
	}
	if _, mirror := meta.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	for _, ref := range meta.OwnerReferences {
		if ref.Kind == "DaemonSet" && ref.Controller != nil && *ref.Controller {
			return false
		}
	}
	return true
}

func litepoolLabels(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if len(k) > len(policy.Prefix) && k[:len(policy.Prefix)] == policy.Prefix {
			out[k] = v
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
