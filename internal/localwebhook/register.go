package localwebhook

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// Configurations are deploy/webhook's webhook configurations.
type Configurations struct {
	Mutating   *admissionregistrationv1.MutatingWebhookConfiguration
	Validating *admissionregistrationv1.ValidatingWebhookConfiguration
}

// LoadConfigurations reads the mutating and the validating webhook configuration from
// deploy/webhook/webhooks.yaml (path), strictly: a field this API version lacks is an
// error.
func LoadConfigurations(path string) (Configurations, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Configurations{}, err
	}
	c := Configurations{Mutating: &admissionregistrationv1.MutatingWebhookConfiguration{}, Validating: &admissionregistrationv1.ValidatingWebhookConfiguration{}}
	var found int
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		switch {
		case strings.Contains(doc, "kind: MutatingWebhookConfiguration"):
			err, found = yaml.UnmarshalStrict([]byte(doc), c.Mutating), found+1
		case strings.Contains(doc, "kind: ValidatingWebhookConfiguration"):
			err, found = yaml.UnmarshalStrict([]byte(doc), c.Validating), found+1
		}
		if err != nil {
			return Configurations{}, fmt.Errorf("%s: %w", path, err)
		}
	}
	if found != 2 {
		return Configurations{}, fmt.Errorf("%s: want one mutating and one validating webhook configuration, found %d documents", path, found)
	}
	return c, nil
}

// ByURL points every webhook at the local process at addr (host:port), over HTTPS
// trusted through caPEM (nil: the system's roots, or a CA bundle injected later). The
// paths are the Service's.
func (c Configurations) ByURL(addr string, caPEM []byte) {
	byURL := func(cc *admissionregistrationv1.WebhookClientConfig) {
		url := "https://" + addr + *cc.Service.Path
		*cc = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM}
	}
	for i := range c.Mutating.Webhooks {
		byURL(&c.Mutating.Webhooks[i].ClientConfig)
	}
	for i := range c.Validating.Webhooks {
		byURL(&c.Validating.Webhooks[i].ClientConfig)
	}
}

// Register creates the configurations, or updates them when they exist.
func (c Configurations) Register(ctx context.Context, kube kubernetes.Interface) error {
	adm := kube.AdmissionregistrationV1()
	mut, val := c.Mutating.DeepCopy(), c.Validating.DeepCopy()
	_, err := adm.MutatingWebhookConfigurations().Create(ctx, mut, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var old *admissionregistrationv1.MutatingWebhookConfiguration
		if old, err = adm.MutatingWebhookConfigurations().Get(ctx, mut.Name, metav1.GetOptions{}); err == nil {
			mut.ResourceVersion = old.ResourceVersion
			_, err = adm.MutatingWebhookConfigurations().Update(ctx, mut, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("registering MutatingWebhookConfiguration %s: %w", mut.Name, err)
	}
	_, err = adm.ValidatingWebhookConfigurations().Create(ctx, val, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var old *admissionregistrationv1.ValidatingWebhookConfiguration
		if old, err = adm.ValidatingWebhookConfigurations().Get(ctx, val.Name, metav1.GetOptions{}); err == nil {
			val.ResourceVersion = old.ResourceVersion
			_, err = adm.ValidatingWebhookConfigurations().Update(ctx, val, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("registering ValidatingWebhookConfiguration %s: %w", val.Name, err)
	}
	return nil
}

// Unregister deletes the configurations; ones already gone are fine.
func (c Configurations) Unregister(ctx context.Context, kube kubernetes.Interface) error {
	adm := kube.AdmissionregistrationV1()
	err1 := adm.MutatingWebhookConfigurations().Delete(ctx, c.Mutating.Name, metav1.DeleteOptions{})
	err2 := adm.ValidatingWebhookConfigurations().Delete(ctx, c.Validating.Name, metav1.DeleteOptions{})
	var errs []error
	for _, err := range []error{err1, err2} {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ProbePool is the pool WaitEffective's probe pod asks for; no pool has this name.
const ProbePool = "litepool-probe-no-such-pool"

// WaitEffective waits until the API server calls the webhook: it picks registrations
// up asynchronously. The probe is a server-side dry run of a pod in namespace that asks
// for a pool that does not exist, which only the webhook refuses (rule P2).
func WaitEffective(ctx context.Context, kube kubernetes.Interface, namespace string, timeout time.Duration) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "litepool-probe", Labels: map[string]string{"runwhere.ai/pool": ProbePool}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		_, last = kube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil && strings.Contains(last.Error(), "[P2]"), nil
	})
	if err != nil {
		return fmt.Errorf("the webhook never took effect (last answer to a pod of pool %q: %v)", ProbePool, last)
	}
	return nil
}
