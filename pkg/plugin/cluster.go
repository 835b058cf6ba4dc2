package plugin

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/runwhere-ai/litepool/pkg/inventory"
)

func listBySelector(sel string) metav1.ListOptions { return metav1.ListOptions{LabelSelector: sel} }

// activePods lists the non-terminal pods bound to the given nodes: one list per node
// for a few nodes, one cluster-wide list for many.
func activePods(ctx context.Context, c *clients, nodes map[string]bool) ([]corev1.Pod, error) {
	var out []corev1.Pod
	if len(nodes) <= 10 {
		for name := range nodes {
			sel := fields.Set{"spec.nodeName": name}.AsSelector().String() + ",status.phase!=Succeeded,status.phase!=Failed"
			list, err := c.kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: sel})
			if err != nil {
				return nil, err
			}
			out = append(out, list.Items...)
		}
		return out, nil
	}
	list, err := c.kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: inventory.ActivePodsSelector})
	if err != nil {
		return nil, err
	}
	for _, p := range list.Items {
		if nodes[p.Spec.NodeName] {
			out = append(out, p)
		}
	}
	return out, nil
}

// workloadPodsOn returns, per node, the "namespace/name" of its workload pods (not
// terminal, not DaemonSet, not mirror), sorted.
func workloadPodsOn(ctx context.Context, c *clients, nodes map[string]bool) (map[string][]string, error) {
	pods, err := activePods(ctx, c, nodes)
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
