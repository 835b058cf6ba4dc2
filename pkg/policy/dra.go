package policy

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
)

// modelEquality finds `<...>.productName == "X"` (or model, product; either side) in a
// DRA CEL selector: the attributes that name a model (inventory.ModelAttributes).
var modelEquality = regexp.MustCompile(`\.(?:productName|model|product)\s*==\s*"([^"]+)"|"([^"]+)"\s*==\s*[\w.\[\]"/-]*\.(?:productName|model|product)\b`)

// SelectorModels returns the models a CEL device selector asks for by equality, or nil
// when it names none or cannot be judged: a selector with a negation (`!`, `!=`) might
// exclude the model it names, so it says nothing.
func SelectorModels(expression string) []string {
	if strings.Contains(expression, "!") {
		return nil
	}
	var out []string
	for _, m := range modelEquality.FindAllStringSubmatch(expression, -1) {
		out = append(out, m[1]+m[2])
	}
	return out
}

// DeviceClassModels returns the models a DeviceClass's selectors ask for (all of them
// must match, so any model named is required).
func DeviceClassModels(class *resourcev1.DeviceClass) []string {
	var out []string
	for _, s := range class.Spec.Selectors {
		if s.CEL != nil {
			out = append(out, SelectorModels(s.CEL.Expression)...)
		}
	}
	return out
}

// CheckClaimModels is rule P5 for a claim of a pod of pool info (docs/rules.md, "DRA
// claims at pod admission"): a request whose DeviceClass or selectors name models by
// equality must name the pool's accelerator model among them (compared by model,
// SameGPUModel). Requests that name no model, and pools without an accelerator type, are
// not judged: which device a claim gets is known only after allocation. classModels
// gives the models a DeviceClass names (nil when unknown).
func CheckClaimModels(claim string, spec *resourcev1.ResourceClaimSpec, info PoolInfo, classModels func(class string) []string) error {
	want := info.AcceleratorType()
	if want == "" {
		return nil
	}
	var errs []error
	check := func(request, class string, selectors []resourcev1.DeviceSelector) {
		named := slices.Clone(classModels(class))
		for _, s := range selectors {
			if s.CEL != nil {
				named = append(named, SelectorModels(s.CEL.Expression)...)
			}
		}
		if len(named) == 0 || slices.ContainsFunc(named, func(m string) bool { return SameGPUModel(m, want) }) {
			return
		}
		slices.Sort(named)
		errs = append(errs, Violationf("P5", "claim %s, request %s asks for model %s (device class %s) but pool %q has %s=%s: ask for %s or use a pool of the model you need",
			claim, request, strings.Join(slices.Compact(named), " or "), class, info.Name, LabelGPUType, want, want))
	}
	for _, r := range spec.Devices.Requests {
		if r.Exactly != nil {
			check(r.Name, r.Exactly.DeviceClassName, r.Exactly.Selectors)
		}
		for _, sub := range r.FirstAvailable {
			check(r.Name+"/"+sub.Name, sub.DeviceClassName, sub.Selectors)
		}
	}
	return errors.Join(errs...)
}

// ClaimSource reads what P5 needs of a pod's claims: the spec of a claim the pod names
// or makes from a template, and the models a DeviceClass names.
type ClaimSource interface {
	ClaimSpec(namespace string, claim corev1.PodResourceClaim) (*resourcev1.ResourceClaimSpec, error)
	ClassModels(class string) []string
}

// CheckPodClaims is rule P5 for the claims of a pod of pool info. A claim that cannot
// be read yet (a template or claim created after the pod, or no right to read it) is
// not judged and is named in a warning: the pod then waits, Pending, for a device of
// that model on the pool's nodes, which P1's nodeSelector keeps it to.
func CheckPodClaims(pod *corev1.Pod, info PoolInfo, src ClaimSource) (warnings []string, err error) {
	if info.AcceleratorType() == "" {
		return nil, nil
	}
	var errs []error
	for _, c := range pod.Spec.ResourceClaims {
		spec, rerr := src.ClaimSpec(pod.Namespace, c)
		if rerr != nil {
			warnings = append(warnings, fmt.Sprintf("P5 not judged for claim %s: %v", c.Name, rerr))
			continue
		}
		errs = append(errs, CheckClaimModels(c.Name, spec, info, src.ClassModels))
	}
	return warnings, errors.Join(errs...)
}
