package describe

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// DescribeNodeOptions is `describe node`.
type DescribeNodeOptions struct{ Options }

// NewCmdDescribeNode is `kubectl litepool describe node NAME...`.
func NewCmdDescribeNode(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &DescribeNodeOptions{Options{IOStreams: streams}}
	cmd := &cobra.Command{
		Use:     "node NAME...",
		Aliases: []string{"nodes", "no"},
		Short:   "Show a node's pool, status, accelerators, pods and events",
		Long: templates.LongDesc(`
			Show what litepool knows of a node: its pool and node pool, its status in
			litepool's model, its accelerators (total, used by non-terminated pods,
			free), driver version, litepool labels and annotations (upgrade state,
			scale-down, drain), taints, the pods on it and its recent events.`),
		Example: templates.Examples(`
			kubectl litepool describe node a100-node-1`),
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: kit.CompleteNodeNames(f),
	}
	return kit.Bind(cmd, f, o)
}

// Run describes each name in turn.
func (o *DescribeNodeOptions) Run(ctx context.Context) error { return o.each(ctx, o.describe) }

// describe describes one node.
func (o *DescribeNodeOptions) describe(ctx context.Context, name string) error {
	node, err := o.clients.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pods, err := inventory.ActivePodsOn(ctx, o.clients.Kube, map[string]bool{name: true})
	if err != nil {
		return err
	}
	evs, err := nodeEvents(ctx, o.clients, node)
	if err != nil {
		return err
	}
	if o.describer.DRA, err = nodeDRA(ctx, o.clients); err != nil {
		return err
	}
	if err := o.describer.Node(o.Out, node, pods, evs); err != nil {
		return err
	}
	return o.describeHealth(ctx, node)
}

// Node writes the description of a node with its non-terminated pods.
func (d Describer) Node(out io.Writer, node *corev1.Node, pods []corev1.Pod, evs *corev1.EventList) error {
	b := inventory.NewBuilder()
	b.Accelerators = d.Accelerators
	b.DRA = d.DRA
	for i := range pods {
		b.AddPod(&pods[i])
	}
	b.AddNode(node)
	n := b.Build().Nodes[0]
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	return tabbed(out, func(w prefixWriter) {
		w.Write(level0, "Name:\t%s\n", node.Name)
		w.Write(level0, "Pool:\t%s\n", n.Pool)
		w.Write(level0, "Node Pool:\t%s\n", kit.None(n.NodePool))
		w.Write(level0, "Status:\t%s\n", n.State)
		w.Write(level0, "Ready:\t%v\n", n.Ready)
		w.Write(level0, "Unschedulable:\t%v\n", node.Spec.Unschedulable)
		w.Write(level0, "GPU Type:\t%s\n", kit.None(n.GPUType))
		w.Write(level0, "Driver Version:\t%s\n", kit.None(n.DriverVersion))
		if n.Resource == "" {
			w.Write(level0, "Accelerators:\t<none>\n")
		} else {
			w.Write(level0, "Accelerators:\t%s: %d total, %d used, %d free\n", n.Resource, n.Total, n.Used, n.Free())
		}
		for _, m := range n.MIG {
			w.Write(level0, "MIG Slices:\t%s: %d total, %d used, %d free (not counted as GPUs)\n", m.Resource, m.Total, m.Used, m.Free())
		}
		describeDRA(w, n.DRA)
		writeMap(w, "Litepool Labels", n.Labels)
		annotations := map[string]string{}
		for k, v := range node.Annotations {
			if strings.HasPrefix(k, policy.Prefix) {
				annotations[k] = v
			}
		}
		writeMap(w, "Litepool Annotations", annotations)
		writeLines(w, "Taints", kit.TaintStrings(node.Spec.Taints))
		if len(pods) == 0 {
			w.Write(level0, "Pods:\t<none>\n")
		} else {
			w.Write(level0, "Pods:\t(%d non-terminated)\n", len(pods))
			w.Flush()
			w.Write(level1, "Namespace\tName\tWorkload Type\tAccelerators\tPhase\n")
			w.Write(level1, "---------\t----\t-------------\t------------\t-----\n")
			for i := range pods {
				p := &pods[i]
				wt := string(policy.WorkloadTypeOf(p))
				if !inventory.IsWorkloadPod(p) {
					wt = "(daemon)"
				}
				w.Write(level1, "%s\t%s\t%s\t%s\t%s\n", p.Namespace, p.Name, kit.None(wt), d.podAcceleratorsCell(p), p.Status.Phase)
			}
		}
		if evs != nil {
			describeEvents(w, evs, node.Name, d.Now)
		}
	})
}

// podAcceleratorsCell is a pod's whole accelerators, and its MIG slices apart: "1", or
// "0 +2 mig-1g.10gb".
func (d Describer) podAcceleratorsCell(p *corev1.Pod) string {
	cell := strconv.FormatInt(d.Accelerators.PodAccelerators(p), 10)
	req := d.Accelerators.PodAcceleratorRequests(p)
	for _, rn := range slices.Sorted(maps.Keys(req)) {
		if policy.IsMIG(rn) {
			cell += fmt.Sprintf(" +%d %s", req[rn], strings.TrimPrefix(string(rn), "nvidia.com/"))
		}
	}
	return cell
}
