package webhook

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// TestClaimModelsJudgedAtAdmission: P5 for DRA claims. A pod of train-a100
// (accelerator A100-80G) whose claim template asks, through its DeviceClass, for an
// H100 is refused with the model it asked for and the pool's; one asking for an A100 is
// admitted; a template created after the pod is not judged, and the pod is admitted with
// a warning that says so.
func TestClaimModelsJudgedAtAdmission(t *testing.T) {
	kube := framework.C.Kube
	crt := newCerts(t)
	proc, _ := startWebhook(t, crt)
	registerWebhooks(t, kube, proc.Addr, crt.CAPEM)
	require.NoError(t, localwebhook.WaitEffective(ctx, kube, ns, 30*time.Second))

	class := func(name, model string) {
		_, err := kube.ResourceV1().DeviceClasses().Create(ctx, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: `device.attributes["gpu.example.com"].productName == "` + model + `"`}}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = kube.ResourceV1().DeviceClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	template := func(name, class string) {
		_, err := kube.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
				{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class}}}}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = kube.ResourceV1().ResourceClaimTemplates(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	claimPod := func(tpl string) *corev1.Pod {
		p := newPod("claims-"+tpl, training("train-a100"), nil)
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tpl}}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
		return p
	}
	class("h100.litepool-e2e.example.com", "H100")
	class("a100.litepool-e2e.example.com", "A100-80G")
	template("h100", "h100.litepool-e2e.example.com")
	template("a100", "a100.litepool-e2e.example.com")
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

	// The API server takes the new registration up asynchronously: ask until this
	// webhook answers (a denial is only ever ours).
	var err error
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, err = kube.CoreV1().Pods(ns).Create(ctx, claimPod("h100"), dryRun)
		return err != nil, nil
	}))
	assert.Equal(t, denied("pods.runwhere.ai", `[P5] claim gpu, request gpu asks for model H100 (device class h100.litepool-e2e.example.com) but pool "train-a100" has runwhere.ai/gpu-type=A100-80G: ask for A100-80G or use a pool of the model you need`), err.Error())

	_, err = kube.CoreV1().Pods(ns).Create(ctx, claimPod("a100"), dryRun)
	assert.NoError(t, err, "a claim for the pool's model is admitted")

	var warnings framework.Warnings
	_, err = framework.WarningClient(t, &warnings).CoreV1().Pods(ns).Create(ctx, claimPod("later"), dryRun)
	assert.NoError(t, err, "a template that does not exist yet is not judged")
	assert.Contains(t, warnings.Take(), `P5 not judged for claim gpu: resourceclaimtemplates.resource.k8s.io "later" not found`)
}
