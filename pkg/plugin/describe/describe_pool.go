package describe

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// DescribePoolOptions is `describe pool`.
type DescribePoolOptions struct{ Options }

// NewCmdDescribePool is `kubectl litepool describe pool NAME...`.
func NewCmdDescribePool(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &DescribePoolOptions{Options{IOStreams: streams}}
	cmd := &cobra.Command{
		Use:     "pool NAME...",
		Aliases: []string{"pools", "lpool"},
		Short:   "Show a pool's policy, node pools, nodes, accelerator use and events",
		Long: templates.LongDesc(`
			Show a pool: its type, accepted workloads, accelerator, minNodes,
			exclusivity, namespaces and software; its status with healthy and faulty
			nodes and accelerator use; its node pools with their labels and taints; its
			member nodes with their status, accelerators and driver versions; and the
			recent events of the pool and of nodes joining or leaving it.

			"default" describes the nodes that belong to no pool.`),
		Example: templates.Examples(`
			kubectl litepool describe pool train-a100
			kubectl litepool describe pool default`),
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: kit.CompletePoolNames(f),
	}
	return kit.Bind(cmd, f, o)
}

// Run describes each name in turn.
func (o *DescribePoolOptions) Run(ctx context.Context) error { return o.each(ctx, o.describePool) }

// describePool describes one pool.
func (o *DescribePoolOptions) describePool(ctx context.Context, name string) error {
	pool, sum, err := kit.LoadPool(ctx, o.clients, name, o.ErrOut)
	if err != nil {
		return err
	}
	evs, err := poolEvents(ctx, o.clients, name)
	if err != nil {
		return err
	}
	return o.describer.Pool(o.Out, pool, sum, evs)
}

// Pool writes the description of a pool.
func (d Describer) Pool(out io.Writer, pool *v1alpha1.Pool, sum *inventory.Pool, evs *corev1.EventList) error {
	return tabbed(out, func(w prefixWriter) {
		describePoolBody(w, pool, sum)
		if evs != nil {
			describeEvents(w, evs, pool.Name, d.Now)
		}
	})
}

func describePoolBody(w prefixWriter, pool *v1alpha1.Pool, sum *inventory.Pool) {
	spec, s := pool.Spec, pool.Status
	w.Write(level0, "Name:\t%s\n", pool.Name)
	if !kit.HasObject(pool) {
		for _, c := range s.Conditions {
			if c.Type == kit.ConditionPoolObject {
				w.Write(level0, "Pool Object:\t<none> (%s)\n", c.Message)
			}
		}
	} else {
		w.Write(level0, "Type:\t%s\n", kit.PoolTypeCell(pool))
		w.Write(level0, "Description:\t%s\n", kit.None(spec.Description))
		writeMap(w, "Tags", spec.Tags)
		w.Write(level0, "Workloads:\t%s\n", joinTypes(policy.AcceptedWorkloads(spec)))
		w.Write(level0, "Min Nodes:\t%d\n", policy.MinNodes(spec))
		w.Write(level0, "Exclusive:\t%v\n", spec.Exclusive)
		w.Write(level0, "Namespaces:\t%s\n", namespacesCell(spec))
		w.Write(level0, "Software:\t%s\n", softwareCell(spec.Software))
		w.Write(level0, "HCCL Op Retry:\t%s\n", hcclCell(spec.HCCL.OpRetry))
	}
	w.Write(level0, "Accelerator:\t%s\n", acceleratorDescription(pool))
	w.Write(level0, "Status:\t%s\n", s.Phase)
	w.Write(level0, "Nodes:\t%d (%d healthy, %d faulty)\n", s.NodeCount, s.HealthyNodes, s.FaultyNodes)
	w.Write(level0, "Accelerators:\t%s\n", acceleratorsLine(s))
	for _, m := range s.MIGSlices {
		w.Write(level0, "MIG Slices:\t%s: %d total, %d used, %d free (not counted as GPUs)\n", m.Resource, m.Total, m.Used, m.Free)
	}
	describePoolDRA(w, s.DRA)
	describePoolQueue(w, pool)
	describePoolTopology(w, pool)
	w.Write(level0, "Driver Versions:\t%s\n", kit.JoinOrNone(s.DriverVersions))
	describeNodePools(w, pool, sum)
	describeMembers(w, sum)
}

func describeNodePools(w prefixWriter, pool *v1alpha1.Pool, sum *inventory.Pool) {
	rows := kit.NodePoolRows([]v1alpha1.Pool{*pool}, sum.Nodes)
	if len(rows) == 0 {
		w.Write(level0, "Node Pools:\t<none>\n")
		return
	}
	w.Flush()
	w.Write(level0, "Node Pools:\n")
	w.Write(level1, "Name\tNodes\tLabels\tTaints\n")
	w.Write(level1, "----\t-----\t------\t------\n")
	for _, r := range rows {
		w.Write(level1, "%s\t%d\t%s\t%s\n", r.Name, len(r.Nodes), r.LabelsCell(), r.TaintsCell())
	}
}

func describeMembers(w prefixWriter, sum *inventory.Pool) {
	if len(sum.Nodes) == 0 {
		w.Write(level0, "Members:\t<none>\n")
		return
	}
	w.Flush()
	w.Write(level0, "Members:\n")
	w.Write(level1, "Name\tNode Pool\tStatus\tGPU Type\tTotal\tUsed\tFree\tDriver\tWorkload Pods\n")
	w.Write(level1, "----\t---------\t------\t--------\t-----\t----\t----\t------\t-------------\n")
	for _, n := range sum.Nodes {
		w.Write(level1, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%d\n", n.Name, kit.None(n.NodePool), n.State, kit.None(n.GPUType),
			n.Total, n.Used, n.Free(), kit.None(n.DriverVersion), n.WorkloadPods)
	}
}

func acceleratorDescription(p *v1alpha1.Pool) string {
	model := kit.AcceleratorCell(p)
	if r := p.Status.AcceleratorResource; r != "" {
		return fmt.Sprintf("%s (%s)", model, r)
	}
	return model
}

func namespacesCell(spec v1alpha1.PoolSpec) string {
	parts := append([]string(nil), spec.Namespaces...)
	if spec.NamespaceSelector != nil {
		parts = append(parts, "selector "+metav1.FormatLabelSelector(spec.NamespaceSelector))
	}
	if len(parts) == 0 {
		return "<all>"
	}
	return strings.Join(parts, ", ")
}

func softwareCell(sw v1alpha1.SoftwareSpec) string {
	var parts []string
	for _, kv := range [][2]string{{"driver", sw.Driver}, {"firmware", sw.Firmware}, {"cann", sw.CANN},
		{"torch_npu", sw.TorchNPU}, {"pytorch", sw.PyTorch}, {"cuda", sw.CUDA}, {"image", sw.Image}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+" "+kv[1])
		}
	}
	return kit.None(strings.Join(parts, ", "))
}

func hcclCell(r v1alpha1.OpRetrySpec) string {
	if !r.Enabled {
		return "disabled"
	}
	retries, timeout := r.MaxRetries, r.RetryTimeoutSeconds
	if retries == 0 {
		retries = policy.HCCLDefaultRetries
	}
	if timeout == 0 {
		timeout = policy.HCCLDefaultTimeout
	}
	return fmt.Sprintf("enabled, max retries %d, timeout %ds", retries, timeout)
}

func joinTypes(ts []v1alpha1.WorkloadType) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// describePoolQueue writes the pool's scheduler queue (spec.queue): what the controller
// wrote and what the scheduler reports, or why it wrote nothing.
func describePoolQueue(w prefixWriter, pool *v1alpha1.Pool) {
	q, st := pool.Spec.Queue, pool.Status.Queue
	if q == nil && st == nil {
		return
	}
	cond := apimeta.FindStatusCondition(pool.Status.Conditions, "Queue")
	if st == nil {
		why := "the controller has not written it yet"
		if cond != nil {
			why = cond.Message
		}
		w.Write(level0, "Queue:\t<none> (%s)\n", why)
		return
	}
	quota := fmt.Sprintf("%d %s", st.Quota, st.Resource)
	if st.Resource == "" && st.DeviceResource != "" {
		quota = fmt.Sprintf("%d %s (DRA devices)", st.DeviceQuota, st.DeviceResource)
	}
	if st.Scheduler == v1alpha1.QueueVolcano {
		describeVolcanoQueue(w, st, quota, cond)
		return
	}
	w.Write(level0, "Queue:\t%s ClusterQueue %s: quota %s from %d schedulable nodes\n", st.Scheduler, st.ClusterQueue, quota, st.SchedulableNodes)
	if st.DeviceResource != "" {
		var classes []string
		if q != nil && q.Devices != nil {
			classes = q.Devices.DeviceClassNames
		}
		w.Write(level0, "Queue Devices:\tquota %d %s (DRA devices of DeviceClasses %s)\n", st.DeviceQuota, st.DeviceResource, kit.JoinOrNone(classes))
	}
	w.Write(level0, "Queue Workloads:\t%d admitted (%d %s used), %d pending\n", st.Admitted, st.Used, st.Resource, st.Pending)
	w.Write(level0, "Local Queues:\t%s\n", kit.JoinOrNone(st.Namespaces))
	if len(st.Shares) > 0 {
		var shares []string
		for _, sh := range st.Shares {
			shares = append(shares, fmt.Sprintf("%s %d (%d used, ClusterQueue %s)", sh.Namespace, sh.Quota, sh.Used, sh.ClusterQueue))
		}
		w.Write(level0, "Queue Shares:\t%s\n", strings.Join(shares, ", "))
	}
	if cond != nil && cond.Status != metav1.ConditionTrue {
		w.Write(level0, "Queue Problem:\t%s\n", cond.Message)
	}
}

// describeVolcanoQueue writes a Volcano Queue: its capability (the quota), deserved and
// guarantee as written, what Volcano allocated, the PodGroups admitted and waiting, and
// its HyperNodes (or why none are written).
func describeVolcanoQueue(w prefixWriter, st *v1alpha1.QueueStatus, capability string, cond *metav1.Condition) {
	w.Write(level0, "Queue:\tVolcano Queue %s: capability %s from %d schedulable nodes\n", st.ClusterQueue, capability, st.SchedulableNodes)
	amount := func(p *int64) string {
		if p == nil {
			return "<unset>"
		}
		return fmt.Sprintf("%d", *p)
	}
	w.Write(level0, "Queue Shares:\tdeserved %s, guarantee %s\n", amount(st.Deserved), amount(st.Guarantee))
	w.Write(level0, "Queue Allocated:\t%d %s\n", st.Used, st.Resource)
	w.Write(level0, "Queue PodGroups:\t%d admitted, %d pending\n", st.Admitted, st.Pending)
	switch {
	case st.HyperNodesSkipped != "":
		w.Write(level0, "HyperNodes:\t<none> (%s)\n", st.HyperNodesSkipped)
	case st.HyperNodes > 0:
		w.Write(level0, "HyperNodes:\t%d (kubectl litepool get domains shows each domain's)\n", st.HyperNodes)
	}
	if cond != nil && (cond.Status != metav1.ConditionTrue || cond.Reason == "Clamped") {
		w.Write(level0, "Queue Problem:\t%s\n", cond.Message)
	}
}

// describePoolTopology writes the pool's domains (spec.topology, docs/topology.md): the
// levels and unit, the largest free block ("fits 32 in one huawei.com/topotree.superpodid
// domain") and the domains by state; `get domains` lists each.
func describePoolTopology(w prefixWriter, pool *v1alpha1.Pool) {
	spec, st := pool.Spec.Topology, pool.Status.Topology
	if spec == nil {
		return
	}
	t, err := policy.ResolveTopology(spec)
	if err != nil {
		w.Write(level0, "Topology:\t<invalid> (%v)\n", err)
		return
	}
	w.Write(level0, "Topology:\t%s (unit %s, at least %d nodes per domain)\n", strings.Join(t.Levels, " > "), t.Unit, t.MinNodesPerDomain)
	if st == nil {
		return
	}
	w.Write(level0, "Largest Free Block:\tfits %d in one %s domain\n", st.LargestFreeBlock, st.Unit)
	w.Write(level0, "Domains:\t%d: %d whole (%d of them free), %d degraded, %d out, %d mixed; %d members outside every domain\n",
		st.Domains, st.Whole, st.WholeFree, st.Degraded, st.Out, st.Mixed, st.Outside)
}

// acceleratorsLine is "24 total, 10 used, 0 free", and what members out of service hold
// idle where any do: total and used count every member, free only those in service
// (docs/pools.md), so the line says where the rest of the total is.
func acceleratorsLine(s v1alpha1.PoolStatus) string {
	line := fmt.Sprintf("%d total, %d used, %d free", s.AcceleratorTotal, s.AcceleratorUsed, s.AcceleratorFree)
	if idle := s.AcceleratorTotal - s.AcceleratorUsed - s.AcceleratorFree; idle > 0 {
		line += fmt.Sprintf(" (%d idle on members out of service)", idle)
	}
	return line
}
