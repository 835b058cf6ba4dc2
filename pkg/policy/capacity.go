package policy

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// Why a member's capacity is left out of a pool's schedulable capacity.
const (
	OutNotReady    = "NotReady"
	OutCordoned    = "Cordoned"
	OutQuarantined = "Quarantined"
	OutUpgrading   = "Upgrading"
)

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
// holds it out with its quarantine taint, or a driver rollout has it between cordon and
// done. Each is read from the node, never from Pool status, and each can only take
// capacity away: whoever writes them cannot raise a quota with them.
func NodeOut(node *corev1.Node) string {
	switch {
	case !IsNodeReady(node):
		return OutNotReady
	case slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == TaintQuarantine }):
		return OutQuarantined
	case UpgradeInProgress(node):
		return OutUpgrading
	case node.Spec.Unschedulable:
		return OutCordoned
	}
	return ""
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
		if why := NodeOut(n); why != "" {
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
