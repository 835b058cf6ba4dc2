package plugin

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

const ns = "ai-team"

// deployOn runs a one-replica Deployment pinned to a node (optionally guarded by a PDB
// that allows no disruption), waits for its pod to run and returns the pod's name. The
// Deployment and PDB go when the test ends.
func deployOn(t *testing.T, name, nodeName string, guarded bool) string {
	t.Helper()
	kube := framework().Kube
	labels := map[string]string{"app": name}
	// Pinned by hostname to a member of a Training pool, the pod is judged as that pool's
	// (policy.PlacementPin): it says it is training work, as a Deployment's pods are
	// otherwise inference work, which P3 refuses there.
	podLabels := map[string]string{"app": name, "runwhere.ai/workload-type": "training"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"kubernetes.io/hostname": nodeName},
					// Pool taints only: a pod that tolerated everything would also
					// tolerate the cordon, and its replacement would land back on the
					// node just drained (and the webhook's N3 would rightly see it).
					Tolerations: []corev1.Toleration{{Key: "runwhere.ai/pool", Operator: corev1.TolerationOpExists}},
					Containers:  []corev1.Container{{Name: "c", Image: "busybox"}},
				},
			},
		},
	}
	_, err := kube.AppsV1().Deployments(ns).Create(ctx(), d, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = kube.AppsV1().Deployments(ns).Delete(ctx(), name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
		_ = kube.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx(), name, metav1.DeleteOptions{})
		waitNoPods(t, name)
		waitDeploymentGone(t, name)
	})
	if guarded {
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
				Selector: &metav1.LabelSelector{MatchLabels: labels}},
		}
		_, err := kube.PolicyV1().PodDisruptionBudgets(ns).Create(ctx(), pdb, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	var pod string
	err = wait.PollUntilContextTimeout(ctx(), waitInterval, waitTimeout, true, func(c context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(ns).List(c, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodRunning {
			return false, err
		}
		pod = pods.Items[0].Name
		if !guarded {
			return true, nil
		}
		// The PDB must have seen the pod, or it would not refuse anything yet.
		b, err := kube.PolicyV1().PodDisruptionBudgets(ns).Get(c, name, metav1.GetOptions{})
		return err == nil && b.Status.ObservedGeneration == b.Generation && b.Status.CurrentHealthy == 1, err
	})
	require.NoError(t, err)
	return pod
}

func waitNoPods(t *testing.T, app string) {
	err := wait.PollUntilContextTimeout(ctx(), waitInterval, waitTimeout, true, func(c context.Context) (bool, error) {
		pods, err := framework().Kube.CoreV1().Pods(ns).List(c, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			_ = framework().Kube.CoreV1().Pods(ns).Delete(c, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
		return len(pods.Items) == 0, nil
	})
	require.NoError(t, err)
}

// waitDeploymentGone waits until a Deployment deleted in the foreground is gone: the
// garbage collector removes it only after its ReplicaSet, a while after its pods, and a
// later test creating one of the same name meanwhile gets "object is being deleted".
func waitDeploymentGone(t *testing.T, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx(), waitInterval, waitTimeout, true, func(c context.Context) (bool, error) {
		_, err := framework().Kube.AppsV1().Deployments(ns).Get(c, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	require.NoError(t, err, "deployment %s/%s still there", ns, name)
}

// addKwokNode creates an extra node played by kwok (it goes Ready) with the given
// litepool labels, and deletes it when the test ends if it is still there.
func addKwokNode(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	kube := framework().Kube
	l := map[string]string{"kubernetes.io/hostname": name, "type": "kwok"}
	for k, v := range labels {
		l[k] = v
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{"cpu": resourceQ("96"), "memory": resourceQ("768Gi"), "pods": resourceQ("110"), "nvidia.com/gpu": resourceQ("8")},
			Capacity:    corev1.ResourceList{"cpu": resourceQ("96"), "memory": resourceQ("768Gi"), "pods": resourceQ("110"), "nvidia.com/gpu": resourceQ("8")},
		},
	}
	_, err := kube.CoreV1().Nodes().Create(ctx(), n, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	err = wait.PollUntilContextTimeout(ctx(), waitInterval, waitTimeout, true, func(c context.Context) (bool, error) {
		n, err := kube.CoreV1().Nodes().Get(c, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err)
}
