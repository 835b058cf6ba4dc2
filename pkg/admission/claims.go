package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// liveClaims reads a pod's claims and their DeviceClasses from the API server, for P5
// (policy.CheckPodClaims). They are read live, not cached: only pods with claims pay
// for it, and a webhook on a cluster without DRA keeps no informer that never syncs.
type liveClaims struct {
	ctx context.Context
	r   client.Reader
}

// ClaimSpec is the spec of the claim the pod names, or of the template it makes its
// claim from; a pod status's generated claim name is not known at creation.
func (l liveClaims) ClaimSpec(namespace string, c corev1.PodResourceClaim) (*resourcev1.ResourceClaimSpec, error) {
	switch {
	case c.ResourceClaimTemplateName != nil:
		var tpl resourcev1.ResourceClaimTemplate
		if err := l.r.Get(l.ctx, client.ObjectKey{Namespace: namespace, Name: *c.ResourceClaimTemplateName}, &tpl); err != nil {
			return nil, err
		}
		return &tpl.Spec.Spec, nil
	case c.ResourceClaimName != nil:
		var claim resourcev1.ResourceClaim
		if err := l.r.Get(l.ctx, client.ObjectKey{Namespace: namespace, Name: *c.ResourceClaimName}, &claim); err != nil {
			return nil, err
		}
		return &claim.Spec, nil
	}
	return nil, fmt.Errorf("it names neither a claim nor a template")
}

// ClassModels is the models a DeviceClass's selectors name; none when it cannot be read.
func (l liveClaims) ClassModels(class string) []string {
	var dc resourcev1.DeviceClass
	if err := l.r.Get(l.ctx, client.ObjectKey{Name: class}, &dc); err != nil {
		return nil
	}
	return policy.DeviceClassModels(&dc)
}

// checkClaims is P5 for a pod's claims once the other pod rules passed: warnings for
// claims it could not read, a denial for a claim of another model.
func (h *PodHandler) checkClaims(ctx context.Context, pod *corev1.Pod, ns *corev1.Namespace, cat *requestCatalog) ([]string, error) {
	if len(pod.Spec.ResourceClaims) == 0 || h.Live == nil {
		return nil, nil
	}
	name, _ := policy.PodPoolName(pod, ns)
	info, ok := cat.Pool(name)
	if !ok {
		return nil, nil
	}
	return policy.CheckPodClaims(pod, info, liveClaims{ctx: ctx, r: h.Live})
}
