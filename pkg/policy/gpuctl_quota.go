package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// gpuctl quota files (gpuctl/api/quota.py):
//
//	kind: quota
//	version: v0.1
//	quota:
//	  name: team-quota
//	  description: "per-team limits"
//	namespace:            # one entry per namespace
//	  team-a: {cpu: 16, memory: 64Gi, gpu: 4}
//	default: {cpu: 8, memory: 32Gi, gpu: 1}   # optional: the namespace "default"
//
// Each namespace gets one ResourceQuota named <quota>-<namespace>, as gpuctl names it,
// labelled runwhere.ai/quota=<quota> and runwhere.ai/namespace=<namespace>. Its hard
// limits are requests.cpu, requests.memory and requests.<accelerator resource>: an
// extended resource can only be limited by its requests (gpuctl writes the bare names
// cpu, memory and nvidia.com/gpu; the API server enforces requests.* for GPUs).

// GpuctlQuotaKind identifies a gpuctl quota file.
const GpuctlQuotaKind = "quota"

// GpuctlNamespaceMarker is the label gpuctl puts on the namespaces it makes, and lists
// them by: runwhere.ai/namespace=true.
const GpuctlNamespaceMarker = "true"

type gpuctlQuotaFile struct {
	Kind      string                      `json:"kind"`
	Version   *string                     `json:"version,omitempty"`
	Quota     *gpuctlQuotaInfo            `json:"quota"`
	Namespace map[string]*gpuctlUserQuota `json:"namespace"`
	Default   *gpuctlUserQuota            `json:"default,omitempty"`
}

type gpuctlQuotaInfo struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// gpuctlUserQuota takes numbers or strings, as gpuctl does (cpu: 8 or cpu: "8000m").
type gpuctlUserQuota struct {
	CPU    *intOrString `json:"cpu,omitempty"`
	Memory *intOrString `json:"memory,omitempty"`
	GPU    *intOrString `json:"gpu,omitempty"`
}

type intOrString string

func (v *intOrString) UnmarshalJSON(b []byte) error {
	*v = intOrString(strings.Trim(string(b), `"`))
	return nil
}

// ParseGpuctlQuota parses one gpuctl quota document strictly and returns the
// ResourceQuotas it makes, sorted by namespace. gpuResource is the accelerator resource
// the quota's gpu limits (nvidia.com/gpu unless the cluster's accelerators are others).
func ParseGpuctlQuota(doc []byte, gpuResource corev1.ResourceName) ([]*corev1.ResourceQuota, error) {
	var f gpuctlQuotaFile
	if err := yaml.UnmarshalStrict(doc, &f); err != nil {
		return nil, fmt.Errorf("not a valid gpuctl quota file: %s; expected the fields kind, version, quota.name, quota.description, namespace.<namespace>.{cpu,memory,gpu}, default.{cpu,memory,gpu}", DecodeErrorMessage(err))
	}
	if f.Version != nil && *f.Version != GpuctlVersion {
		return nil, fmt.Errorf("gpuctl quota file: version %q is not supported: must be %q", *f.Version, GpuctlVersion)
	}
	if f.Quota == nil || f.Quota.Name == "" {
		return nil, fmt.Errorf("gpuctl quota file: quota.name is missing")
	}
	if len(f.Namespace) == 0 {
		return nil, fmt.Errorf("gpuctl quota file: quota %q names no namespace: list them under namespace: (namespace: {team-a: {cpu: 8, memory: 32Gi, gpu: 2}})", f.Quota.Name)
	}
	entries := map[string]*gpuctlUserQuota{}
	for ns, q := range f.Namespace {
		if ns == "default" {
			return nil, fmt.Errorf("gpuctl quota file: quota %q: the namespace \"default\" takes the top-level default: entry, not namespace.default", f.Quota.Name)
		}
		entries[ns] = q
	}
	if f.Default != nil {
		entries["default"] = f.Default
	}
	var out []*corev1.ResourceQuota
	for _, ns := range slices.Sorted(maps.Keys(entries)) {
		rq, err := gpuctlResourceQuota(f.Quota, ns, entries[ns], gpuResource)
		if err != nil {
			return nil, fmt.Errorf("gpuctl quota file: quota %q, namespace %q: %w", f.Quota.Name, ns, err)
		}
		out = append(out, rq)
	}
	return out, nil
}

func gpuctlResourceQuota(info *gpuctlQuotaInfo, ns string, q *gpuctlUserQuota, gpuResource corev1.ResourceName) (*corev1.ResourceQuota, error) {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return nil, fmt.Errorf("invalid namespace name: %s", strings.Join(errs, "; "))
	}
	name := info.Name + "-" + ns
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("invalid ResourceQuota name %q (<quota>-<namespace>): %s", name, strings.Join(errs, "; "))
	}
	hard := corev1.ResourceList{}
	if q != nil {
		for _, l := range []struct {
			field string
			value *intOrString
			name  corev1.ResourceName
		}{
			{"cpu", q.CPU, corev1.ResourceRequestsCPU},
			{"memory", q.Memory, corev1.ResourceRequestsMemory},
			{"gpu", q.GPU, corev1.ResourceName(corev1.DefaultResourceRequestsPrefix + string(gpuResource))},
		} {
			if l.value == nil {
				continue
			}
			v, err := resource.ParseQuantity(string(*l.value))
			if err != nil || v.Sign() < 0 {
				return nil, fmt.Errorf("%s %q is not a non-negative quantity (e.g. cpu: 8 or 8000m, memory: 32Gi, gpu: 4)", l.field, string(*l.value))
			}
			if l.field == "gpu" && v.MilliValue()%1000 != 0 {
				return nil, fmt.Errorf("gpu %q must be a whole number of devices", string(*l.value))
			}
			hard[l.name] = v
		}
	}
	if len(hard) == 0 {
		return nil, fmt.Errorf("sets no limit: give cpu, memory or gpu")
	}
	rq := &corev1.ResourceQuota{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ResourceQuota"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels: map[string]string{LabelQuota: info.Name, LabelNamespace: ns},
		},
		Spec: corev1.ResourceQuotaSpec{Hard: hard},
	}
	if info.Description != "" {
		rq.Annotations = map[string]string{AnnotationDescription: info.Description}
	}
	return rq, nil
}

// UnenforcedQuotaKey says whether a ResourceQuota's hard key is one the API server
// accepts but Kubernetes does not enforce: an extended resource named bare
// (nvidia.com/gpu, as gpuctl writes it) or under limits. (extended resources cannot be
// overcommitted, so quota limits them only by their requests). enforced is the key
// that would be: requests.<resource>.
func UnenforcedQuotaKey(key corev1.ResourceName) (enforced corev1.ResourceName, unenforced bool) {
	name := string(key)
	if strings.HasPrefix(name, corev1.DefaultResourceRequestsPrefix) || strings.HasPrefix(name, "count/") {
		return "", false
	}
	name = strings.TrimPrefix(name, "limits.")
	if validExtendedResource(name) != nil {
		return "", false
	}
	return corev1.ResourceName(corev1.DefaultResourceRequestsPrefix + name), true
}
