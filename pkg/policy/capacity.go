package policy

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// Why a member's capacity is left out of a pool's schedulable capacity.
const (
	OutNotReady    = "NotReady"
	OutCordoned    = "Cordoned"
	OutQuarantined = "Quarantined"
	OutUpgrading   = "Upgrading"
	OutTainted     = "Tainted"
)

// TaintKeyNvidiaGPU is the key GKE (and others) taint GPU nodes with; the
// ExtendedResourceToleration admission plugin tolerates it for pods requesting GPUs.
const TaintKeyNvidiaGPU = "nvidia.com/gpu"

// Capacity is a pool's schedulable capacity: what a scheduler's queue may promise. It is
// scheduler-neutral, the one number every queue adapter writes (Kueue's ClusterQueue
// quota today; Volcano's Queue capability and KAI's Queue quota beside it later).
type Capacity struct {
	// Resource is the accelerator counted.
	Resource corev1.ResourceName
	// Accelerators is the allocatable Resource of the schedulable members, less the
	// pool's headroom, never below 0.
	Accelerators int64
	// DeviceResource is the logical resource of the pool's DRA devices
	// (spec.queue.devices), empty when it counts none; Devices is its quota: the
	// schedulable members' healthy devices of its classes, less the headroom, never
	// below 0.
	DeviceResource corev1.ResourceName
	Devices        int64
	// CPU and Memory are the schedulable members' allocatable.
	CPU, Memory resource.Quantity
	// Nodes are the schedulable members, sorted.
	Nodes []string
	// Out says, for each member left out, why.
	Out map[string]string
}

// NodeOut is why a member's capacity is not schedulable ("" when it is): it is not
// Ready, it is cordoned (by hand, by a driver rollout or by a drain), the health loop
// holds it out with its quarantine taint, a driver rollout has it between cordon and
// done, or it carries a NoSchedule or NoExecute taint that the pool's pods do not
// tolerate (OutTainted: what Kueue's TAS and the scheduler leave out too). pool is the
// pool the node is a member of and resource the accelerator its pods request: its own
// exclusive taint and the taint ExtendedResourceToleration tolerates for that resource
// are counted in. Each is read from the node, never from Pool status, and each can only
// take capacity away: whoever writes them cannot raise a quota with them.
func NodeOut(node *corev1.Node, pool string, resource corev1.ResourceName) string {
	switch {
	case QuarantineTaintOf(node) != nil:
		// Named first: the health loop's breaker counts the members whose reason is
		// this, a NotReady one it quarantined too (pkg/health).
		return OutQuarantined
	case !IsNodeReady(node):
		return OutNotReady
	case UpgradeInProgress(node):
		return OutUpgrading
	case node.Spec.Unschedulable:
		return OutCordoned
	case hasUntoleratedTaint(node, pool, resource):
		return OutTainted
	}
	return ""
}

// hasUntoleratedTaint says whether node carries a NoSchedule or NoExecute taint that a
// pod of pool requesting resource does not tolerate. Tolerated: the pool's exclusive
// taint (the webhook gives its pods ExclusivePoolToleration), and a NoSchedule taint
// keyed by the resource or by nvidia.com/gpu, which the ExtendedResourceToleration
// admission plugin tolerates for pods requesting it, as GKE taints its GPU nodes. That
// plugin tolerates NoSchedule only: a NoExecute taint of the same key still counts.
// PreferNoSchedule never keeps a pod off a node.
func hasUntoleratedTaint(node *corev1.Node, pool string, resource corev1.ResourceName) bool {
	tolerations := []corev1.Toleration{ExclusivePoolToleration(pool),
		{Key: TaintKeyNvidiaGPU, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	if resource != "" {
		tolerations = append(tolerations, corev1.Toleration{Key: string(resource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !slices.ContainsFunc(tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(klog.Background(), t, false) }) {
			return true
		}
	}
	return false
}

// PoolCapacity computes pool's schedulable capacity from nodes: only nodes whose
// runwhere.ai/pool label names the pool count, whatever the caller passes, so a Pool's
// editor gets quota for their own pool's members only. The accelerator is the pool's
// spec.accelerator.resourceName, else the one its members offer most of.
func PoolCapacity(pool *v1alpha1.Pool, nodes []*corev1.Node, accel Accelerators) Capacity {
	c := Capacity{Resource: pool.Spec.Accelerator.ResourceName, Out: map[string]string{}}
	var members []*corev1.Node
	for _, n := range nodes {
		if n.Labels[LabelPool] == pool.Name {
			members = append(members, n)
		}
	}
	if c.Resource == "" {
		c.Resource = mostOffered(members, accel)
	}
	var total int64
	for _, n := range members {
		if why := NodeOut(n, pool.Name, c.Resource); why != "" {
			c.Out[n.Name] = why
			continue
		}
		c.Nodes = append(c.Nodes, n.Name)
		if q, ok := n.Status.Allocatable[c.Resource]; ok && c.Resource != "" {
			total += q.Value()
		}
		if q, ok := n.Status.Allocatable[corev1.ResourceCPU]; ok {
			c.CPU.Add(q)
		}
		if q, ok := n.Status.Allocatable[corev1.ResourceMemory]; ok {
			c.Memory.Add(q)
		}
	}
	slices.Sort(c.Nodes)
	if pool.Spec.Queue != nil {
		total -= pool.Spec.Queue.Headroom
	}
	c.Accelerators = max(total, 0)
	return c
}

// mostOffered is the whole-device accelerator the members offer most of in all ("" for
// a pool of CPU nodes); a tie goes to the smaller name, so the answer is stable.
func mostOffered(members []*corev1.Node, accel Accelerators) corev1.ResourceName {
	sums := map[corev1.ResourceName]int64{}
	for _, n := range members {
		for rn, q := range n.Status.Allocatable {
			if accel.IsWhole(rn) {
				sums[rn] += q.Value()
			}
		}
	}
	var best corev1.ResourceName
	for rn, v := range sums {
		if best == "" || v > sums[best] || (v == sums[best] && rn < best) {
			best = rn
		}
	}
	return best
}

// WithDevices adds the pool's DRA devices (spec.queue.devices) to c: devices counts, per
// node, the healthy devices that the classes of spec.queue.devices select (read from the
// drivers' ResourceSlices), and only those of c's schedulable members count, so the
// rules of NodeOut hold for devices too. A device count for a node that is not a
// schedulable member of this pool, whatever a slice says, adds nothing.
func WithDevices(pool *v1alpha1.Pool, c Capacity, devices map[string]int64) Capacity {
	q := pool.Spec.Queue
	if q == nil || q.Devices == nil {
		return c
	}
	c.DeviceResource = q.Devices.Resource
	var total int64
	for _, n := range c.Nodes {
		total += devices[n]
	}
	c.Devices = max(total-q.Headroom, 0)
	return c
}
