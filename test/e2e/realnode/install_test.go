package realnode

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const (
	certSecret = "litepool-webhook-cert"
	configName = "litepool-webhook" // both webhook configurations
)

// writeOverlay writes the kustomize overlay an operator would: deploy/webhook as it
// ships, its image pointed at the one make image built and imported on the real node
// (no registry: never pulled), and every Deployment, however many the base has, placed
// on the real node, whose kubelet runs them (kwok's nodes would only pretend to).
func writeOverlay(t *testing.T) string {
	dir := t.TempDir()
	base, err := filepath.Rel(dir, filepath.Join(framework.Root, "deploy", "webhook"))
	require.NoError(t, err)
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
images:
- name: ghcr.io/runwhere-ai/litepool-webhook
  newName: litepool.local/litepool-webhook
  newTag: e2e
patches:
- target: {kind: Deployment}
  patch: |
    - op: add
      path: /spec/template/spec/nodeSelector
      value: {kubernetes.io/hostname: %s}
    - op: add
      path: /spec/template/spec/containers/0/imagePullPolicy
      value: Never
`, base, node)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644))
	return dir
}

// deployments are litepool's Deployments, whatever their number.
func deployments(t *testing.T) []appsv1.Deployment {
	list, err := framework.C.Kube.AppsV1().Deployments(system).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	return list.Items
}

func available(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			return d.Status.ObservedGeneration == d.Generation && d.Spec.Replicas != nil &&
				d.Status.AvailableReplicas == *d.Spec.Replicas && d.Status.UpdatedReplicas == *d.Spec.Replicas
		}
	}
	return false
}

// waitAvailable waits until every Deployment of litepool-system is Available with all
// its replicas.
func waitAvailable(t *testing.T, timeout time.Duration) {
	var last []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		last = nil
		ds := deployments(t)
		for i := range ds {
			if !available(&ds[i]) {
				last = append(last, fmt.Sprintf("%s: %d/%d available", ds[i].Name, ds[i].Status.AvailableReplicas, ptrOr(ds[i].Spec.Replicas)))
			}
		}
		return len(ds) > 0 && len(last) == 0, nil
	})
	require.NoError(t, err, "Deployments not Available: %v\n%s", last, podReport(t))
}

func ptrOr(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// podReport describes litepool's pods, for failure messages.
func podReport(t *testing.T) string {
	pods, err := framework.C.Kube.CoreV1().Pods(system).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	out := ""
	for _, p := range pods.Items {
		out += fmt.Sprintf("%s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, c := range p.Status.ContainerStatuses {
			out += fmt.Sprintf(" [%s ready=%v restarts=%d waiting=%v terminated=%v]", c.Name, c.Ready, c.RestartCount, c.State.Waiting, c.State.Terminated)
		}
		out += "\n"
	}
	return out
}

// webhookPods are the pods behind the webhook Service, by its own selector.
func webhookPods(t *testing.T) []corev1.Pod {
	svc, err := framework.C.Kube.CoreV1().Services(system).Get(ctx, configName, metav1.GetOptions{})
	require.NoError(t, err)
	pods, err := framework.C.Kube.CoreV1().Pods(system).List(ctx, metav1.ListOptions{LabelSelector: labels.Set(svc.Spec.Selector).String()})
	require.NoError(t, err)
	return pods.Items
}

func testInstall(t *testing.T, overlay string) {
	c := framework.C
	res := c.Kubectl(t, "", "apply", "-k", overlay)
	require.Equal(t, 0, res.ExitCode, "kubectl apply -k:\n%s\n%s", res.Stdout, res.Stderr)

	waitAvailable(t, 4*time.Minute)
	ds := deployments(t)
	require.NotEmpty(t, ds)
	pods, err := c.Kube.CoreV1().Pods(system).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var want int32
	for _, d := range ds {
		want += ptrOr(d.Spec.Replicas)
	}
	// The image's id is the digest of its config: read from the archive make image wrote.
	ref, err := name.NewTag(webhookImage)
	require.NoError(t, err)
	img, err := tarball.ImageFromPath(filepath.Join(framework.Root, "_output", "images", "litepool-webhook.tar"), &ref)
	require.NoError(t, err)
	cfgName, err := img.ConfigName()
	require.NoError(t, err)
	imageID := cfgName.String()
	running := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		running++
		assert.Equal(t, node, p.Spec.NodeName, "pod %s runs on the real node", p.Name)
		require.Len(t, p.Status.ContainerStatuses, 1, p.Name)
		cs := p.Status.ContainerStatuses[0]
		assert.True(t, cs.Ready, "%s ready", p.Name)
		assert.Equal(t, webhookImage, p.Spec.Containers[0].Image, "%s: the overlay's image", p.Name)
		assert.Equal(t, imageID, cs.ImageID, "%s runs the image make image built", p.Name)
		assert.NotEmpty(t, cs.ContainerID, "%s is a real container", p.Name)
		assert.Regexp(t, `^containerd://[0-9a-f]{64}$`, cs.ContainerID)
	}
	assert.Equal(t, int(want), running, "every replica of every Deployment runs\n%s", podReport(t))

	// The self-managed certificate: written into the Secret the pods mount, and its CA in
	// every webhook of both configurations.
	secret, err := c.Kube.CoreV1().Secrets(system).Get(ctx, certSecret, metav1.GetOptions{})
	require.NoError(t, err)
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		assert.NotEmpty(t, secret.Data[k], "%s/%s has %s", system, certSecret, k)
	}
	block, _ := pem.Decode(secret.Data["tls.crt"])
	require.NotNil(t, block, "tls.crt is PEM")
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	assert.Contains(t, cert.DNSNames, "litepool-webhook.litepool-system.svc", "the certificate names the Service the API server calls")
	ca := secret.Data["ca.crt"]
	mw, err := c.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, mw.Webhooks)
	for _, w := range mw.Webhooks {
		assert.Equal(t, string(ca), string(w.ClientConfig.CABundle), "mutating webhook %s carries the Secret's CA", w.Name)
	}
	vw, err := c.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, configName, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, vw.Webhooks)
	for _, w := range vw.Webhooks {
		assert.Equal(t, string(ca), string(w.ClientConfig.CABundle), "validating webhook %s carries the Secret's CA", w.Name)
	}

	t.Run("Pod Security: installers are admitted, litepool's own pods meet restricted", func(t *testing.T) { testPodSecurity(t, ds) })
}

// testPodSecurity: litepool's namespace as shipped admits the installer Jobs' pods
// (privileged, host PID, the host's /), as it must: under `restricted` the Job
// controller made none and every rollout waited in install. litepool's own pods still
// pass `restricted`, checked by a server dry run in a namespace that enforces it, where
// an installer pod is refused (so the check can fail).
func testPodSecurity(t *testing.T, ds []appsv1.Deployment) {
	kube := framework.C.Kube
	ro := &v1alpha1.DriverRollout{ObjectMeta: metav1.ObjectMeta{Name: "psa-probe", UID: "psa-probe"},
		Spec: v1alpha1.DriverRolloutSpec{Version: "1.0", Installer: v1alpha1.DriverInstaller{Image: installerOK}}}
	job := upgrade.InstallerJob(ro, system, node, 1, time.Minute)
	installer := func(ns string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "installer-probe-", Namespace: ns, Labels: job.Spec.Template.Labels},
			Spec: *job.Spec.Template.Spec.DeepCopy()}
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	_, err := kube.CoreV1().Pods(system).Create(ctx, installer(system), dry)
	assert.NoError(t, err, "an installer pod in %s", system)

	const restricted = "realnode-restricted"
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: restricted,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	defer func() { _ = kube.CoreV1().Namespaces().Delete(ctx, restricted, metav1.DeleteOptions{}) }()
	// The pods' service accounts, so that only Pod Security can refuse them.
	accounts := []string{"default"}
	for _, d := range ds {
		accounts = append(accounts, d.Spec.Template.Spec.ServiceAccountName)
	}
	for _, sa := range accounts {
		_, err := kube.CoreV1().ServiceAccounts(restricted).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		require.True(t, err == nil || apierrors.IsAlreadyExists(err), "service account %s: %v", sa, err)
	}
	_, err = kube.CoreV1().Pods(restricted).Create(ctx, installer(restricted), dry)
	require.Error(t, err, "restricted refuses a privileged installer")
	assert.Contains(t, err.Error(), `violates PodSecurity "restricted:latest"`)
	for _, d := range ds {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: d.Name + "-", Namespace: restricted, Labels: d.Spec.Template.Labels},
			Spec: *d.Spec.Template.Spec.DeepCopy()}
		_, err := kube.CoreV1().Pods(restricted).Create(ctx, p, dry)
		assert.NoError(t, err, "a pod of Deployment %s meets restricted", d.Name)
	}
}

func testUninstall(t *testing.T, overlay string) {
	c := framework.C
	res := c.Kubectl(t, "", "delete", "-k", overlay, "--wait=true", "--timeout=3m")
	require.Equal(t, 0, res.ExitCode, "kubectl delete -k:\n%s\n%s", res.Stdout, res.Stderr)
	mws, err := c.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, mws.Items, "no mutating webhook configuration is left")
	vws, err := c.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, vws.Items, "no validating webhook configuration is left")
	_, err = c.Kube.CoreV1().Namespaces().Get(ctx, system, metav1.GetOptions{})
	assert.True(t, err == nil || apierrors.IsNotFound(err))

	// Pods are admitted as if litepool had never been there: a pool pod is created
	// unchanged (no webhook to pin it), and a pod naming a missing pool too.
	for _, pool := range []string{"train-a100", "train-h100"} {
		p := poolPod("after-uninstall-", pool)
		got, err := c.Kube.CoreV1().Pods(workloads).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.NoError(t, err, "pool %s", pool)
		assert.Empty(t, got.Spec.NodeSelector, "nothing mutates pods any more")
	}
}
