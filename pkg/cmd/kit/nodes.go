package kit

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/nodeops"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// PoolSelector is the node label selector of a pool ("default": the nodes with no pool
// label; "": every node).
func PoolSelector(pool string) string {
	switch pool {
	case "":
		return ""
	case policy.DefaultPool:
		return "!" + policy.LabelPool
	}
	return policy.LabelPool + "=" + pool
}

// ListBySelector lists with a label selector.
func ListBySelector(sel string) metav1.ListOptions { return metav1.ListOptions{LabelSelector: sel} }

// UpdateNode is nodeops.UpdateNode (read, change, write back under optimistic
// concurrency; unsent under client dry run) that also says whether change changed
// anything.
func UpdateNode(ctx context.Context, c *Clients, name string, dryRun cmdutil.DryRunStrategy, change func(*corev1.Node) error) (*corev1.Node, bool, error) {
	var changed bool
	node, err := nodeops.UpdateNode(ctx, c.Kube, name, dryRun, func(n *corev1.Node) error {
		before := n.DeepCopy()
		if err := change(n); err != nil {
			return err
		}
		changed = !apiequality.Semantic.DeepEqual(before, n)
		return nil
	})
	return node, changed, err
}

// ActivePods lists the non-terminal pods bound to the given nodes: one list per node
// for a few nodes, one cluster-wide list for many. The result is filtered here as well
// as by the server's field selector, so that it holds for any client.
func ActivePods(ctx context.Context, c *Clients, nodes map[string]bool) ([]corev1.Pod, error) {
	var lists []*corev1.PodList
	if len(nodes) <= 10 {
		for name := range nodes {
			sel := fields.Set{"spec.nodeName": name}.AsSelector().String() + ",status.phase!=Succeeded,status.phase!=Failed"
			list, err := c.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: sel})
			if err != nil {
				return nil, err
			}
			lists = append(lists, list)
		}
	} else {
		list, err := c.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: inventory.ActivePodsSelector})
		if err != nil {
			return nil, err
		}
		lists = append(lists, list)
	}
	var out []corev1.Pod
	for _, list := range lists {
		for _, p := range list.Items {
			if nodes[p.Spec.NodeName] && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// WorkloadPodsOn returns, per node, the "namespace/name" of its workload pods (not
// terminal, not DaemonSet, not mirror), sorted.
func WorkloadPodsOn(ctx context.Context, c *Clients, nodes map[string]bool) (map[string][]string, error) {
	pods, err := ActivePods(ctx, c, nodes)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for i := range pods {
		p := &pods[i]
		if inventory.IsWorkloadPod(p) {
			out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p.Namespace+"/"+p.Name)
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out, nil
}
