package inventory

import (
	"context"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fieldsel "k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// ActivePodsOn lists the non-terminal pods bound to the given nodes: one list per node
// for a few nodes, one cluster-wide list for many. The result is filtered here as well
// as by the server's field selector, so that it holds for any client.
func ActivePodsOn(ctx context.Context, kube kubernetes.Interface, nodes map[string]bool) ([]corev1.Pod, error) {
	var lists []*corev1.PodList
	if len(nodes) <= 10 {
		for name := range nodes {
			sel := fieldsel.Set{"spec.nodeName": name}.AsSelector().String() + ",status.phase!=Succeeded,status.phase!=Failed"
			list, err := kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: sel})
			if err != nil {
				return nil, err
			}
			lists = append(lists, list)
		}
	} else {
		list, err := kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: ActivePodsSelector})
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
func WorkloadPodsOn(ctx context.Context, kube kubernetes.Interface, nodes map[string]bool) (map[string][]string, error) {
	pods, err := ActivePodsOn(ctx, kube, nodes)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for i := range pods {
		p := &pods[i]
		if IsWorkloadPod(p) {
			out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p.Namespace+"/"+p.Name)
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out, nil
}
