package plugin

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	fw "github.com/runwhere-ai/litepool/test/e2e/framework"
)

const superPodLabel = "huawei.com/topotree.superpodid"

// TestScaleDownTakesAWholeIdleDomain is the example on the real control plane:
// pool rack (Ascend preset, minNodesPerDomain 2) of 4 super nodes x 4 nodes x 8 GPUs,
// node i in sp-(i%4); Deployments of 8-GPU pods run on rack-node-00 and rack-node-04
// (sp-0) and rack-node-03 (sp-3). `scale rack --nodes 12` removes the idle super node
// sp-2 whole, where the flat rule would take rack-node-15, -14, -13 and -12, one node
// of each; the dry run says so with the largest free block before and after.
func TestScaleDownTakesAWholeIdleDomain(t *testing.T) {
	restoreAfter(t)
	_, err := pools().Create(ctx(), &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "rack"}, Spec: v1alpha1.PoolSpec{
		Type: v1alpha1.PoolTypeTraining, MinNodes: 1, Accelerator: v1alpha1.AcceleratorSpec{Type: "H100-80G", ResourceName: "nvidia.com/gpu"},
		Topology: &v1alpha1.TopologySpec{Preset: v1alpha1.TopologyAscend, MinNodesPerDomain: 2}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	var names []string
	for i := range 16 {
		name := fmt.Sprintf("rack-node-%02d", i)
		names = append(names, name)
		addKwokNode(t, name, map[string]string{policy.LabelPool: "rack", policy.LabelGPUType: "H100-80G",
			superPodLabel: fmt.Sprintf("sp-%d", i%4), "huawei.com/topotree.rackid": "r0"})
	}
	fw.WaitInService(t, framework().Kube, names...)
	for _, i := range []int{0, 4, 3} {
		runGPUPod(t, fmt.Sprintf("rack-job-%02d", i), names[i])
	}

	var want strings.Builder
	want.WriteString("plan: domain sp-2 leaves whole\n")
	want.WriteString("largest free block: 32 nvidia.com/gpu in domain sp-1 before, 32 nvidia.com/gpu in domain sp-1 after\n")
	gone := []string{"rack-node-14", "rack-node-10", "rack-node-06", "rack-node-02"}
	for _, verb := range []string{"cordoned", "drained"} {
		for _, n := range gone {
			fmt.Fprintf(&want, "node/%s %s (dry run)\n", n, verb)
		}
	}
	for _, n := range gone {
		fmt.Fprintf(&want, "node/%s removed from pool rack (dry run)\nnode/%s uncordoned (dry run)\n", n, n)
	}
	want.WriteString("pool.runwhere.ai/rack scaled from 16 to 12 node(s) (dry run)\n")
	assert.Equal(t, want.String(), must(t, "scale", "rack", "--nodes", "12", "--dry-run=client"))

	out := must(t, "scale", "rack", "--nodes", "12", "--yes")
	assert.True(t, strings.HasSuffix(out, "pool.runwhere.ai/rack scaled from 16 to 12 node(s)\n"), out)
	for i, n := range names {
		inPool := node(t, n).Labels[policy.LabelPool] == "rack"
		assert.Equal(t, i%4 != 2, inPool, "%s (sp-%d)", n, i%4)
	}

	// --remove that would leave a super node below its floor is refused, naming it.
	assert.Equal(t, `error: [N3] domain "sp-1" of pool "rack" has 4 node(s), 4 in service, and minNodesPerDomain 2: this would leave 1 in service; take at most 2 of its nodes in service, or the whole domain (rack-node-01, rack-node-05, rack-node-09, rack-node-13), or cordon the ones that stay first`,
		strings.TrimSpace(fails(t, "scale", "rack", "--remove", "rack-node-01,rack-node-05,rack-node-09", "--yes")))
	// And the webhook keeps the same floor against a client that is not the plugin.
	for _, n := range []string{"rack-node-01", "rack-node-05"} {
		changeNode(t, n, func(n *corev1.Node) { delete(n.Labels, policy.LabelPool) })
	}
	err = framework().Kube.CoreV1().Nodes().Delete(ctx(), "rack-node-09", metav1.DeleteOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `[N3] node "rack-node-09" cannot leave pool "rack": its domain "sp-1"`)
}

// runGPUPod runs a one-replica Deployment of one 8-GPU pod pinned to node, deleted when
// the test ends.
func runGPUPod(t *testing.T, name, nodeName string) {
	t.Helper()
	kube := framework().Kube
	labels := map[string]string{"app": name}
	// Pinned by hostname to a Training pool's member, the pod is that pool's (P3): training work.
	podLabels := map[string]string{"app": name, "runwhere.ai/workload-type": "training"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: podLabels}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": nodeName},
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{"nvidia.com/gpu": resourceQ("8")}}}}}}}}
	_, err := kube.AppsV1().Deployments(ns).Create(ctx(), d, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = kube.AppsV1().Deployments(ns).Delete(ctx(), name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
		waitNoPods(t, name)
		waitDeploymentGone(t, name)
	})
	err = wait.PollUntilContextTimeout(ctx(), waitInterval, waitTimeout, true, func(c context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(ns).List(c, metav1.ListOptions{LabelSelector: "app=" + name})
		return err == nil && len(pods.Items) == 1 && pods.Items[0].Status.Phase == corev1.PodRunning, err
	})
	require.NoError(t, err)
}
