package policy

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

func TestSelectorModels(t *testing.T) {
	for expr, want := range map[string][]string{
		`device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"`:    {"NVIDIA H100 80GB HBM3"},
		`"A100-80G" == device.attributes["gpu.example.com"].model`:                      {"A100-80G"},
		`device.attributes["x"].model == "A10" || device.attributes["x"].model == "L4"`: {"A10", "L4"},
		`device.attributes["x"].model != "A10"`:                                         nil,
		`!(device.attributes["x"].productName == "A10")`:                                nil,
		`device.driver == "gpu.nvidia.com"`:                                             nil,
		`device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0`:     nil,
	} {
		assert.Equal(t, want, SelectorModels(expr), expr)
	}
}

func TestCheckClaimModels(t *testing.T) {
	pool := PoolInfo{Name: "train-h100", Object: &v1alpha1.Pool{Spec: v1alpha1.PoolSpec{Accelerator: v1alpha1.AcceleratorSpec{Type: "H100-80G"}}}}
	classes := map[string][]string{
		"h100.example.com": {"NVIDIA-H100-80GB"},
		"a100.example.com": {"A100-SXM4-80GB"},
	}
	classModels := func(c string) []string { return classes[c] }
	sel := func(expr string) []resourcev1.DeviceSelector {
		return []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}
	}
	spec := func(reqs ...resourcev1.DeviceRequest) *resourcev1.ResourceClaimSpec {
		return &resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: reqs}}
	}
	exactly := func(class string, s []resourcev1.DeviceSelector) resourcev1.DeviceRequest {
		return resourcev1.DeviceRequest{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, Selectors: s}}
	}
	tests := []struct {
		name string
		spec *resourcev1.ResourceClaimSpec
		pool PoolInfo
		deny string
	}{
		{"the pool's model by class", spec(exactly("h100.example.com", nil)), pool, ""},
		{"another model by class", spec(exactly("a100.example.com", nil)), pool, `[P5] claim c, request gpu asks for model A100-SXM4-80GB (device class a100.example.com) but pool "train-h100" has runwhere.ai/gpu-type=H100-80G: ask for H100-80G or use a pool of the model you need`},
		{"another model by selector", spec(exactly("gpu.example.com", sel(`device.attributes["gpu.example.com"].productName == "A10"`))), pool, "[P5] claim c, request gpu asks for model A10"},
		{"one of two models is the pool's", spec(exactly("gpu.example.com", sel(`device.attributes["x"].model == "A10" || device.attributes["x"].model == "H100"`))), pool, ""},
		{"no model named: not judged", spec(exactly("gpu.example.com", nil)), pool, ""},
		{"a pool without a type: not judged", spec(exactly("a100.example.com", nil)), PoolInfo{Name: "cpu"}, ""},
		{"a first-available subrequest", spec(resourcev1.DeviceRequest{Name: "gpu", FirstAvailable: []resourcev1.DeviceSubRequest{
			{Name: "big", DeviceClassName: "a100.example.com"}}}), pool, "[P5] claim c, request gpu/big asks for model A100-SXM4-80GB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckClaimModels("c", tt.spec, tt.pool, classModels)
			if tt.deny == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.deny)
			assert.Equal(t, []string{"P5"}, Rules(err))
		})
	}
}

func TestDeviceClassModels(t *testing.T) {
	c := &resourcev1.DeviceClass{Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{
		{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.nvidia.com"`}},
		{CEL: &resourcev1.CELDeviceSelector{Expression: `device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100-SXM4-40GB"`}},
	}}}
	assert.Equal(t, []string{"NVIDIA A100-SXM4-40GB"}, DeviceClassModels(c))
}

// claimSource is a ClaimSource over fixed specs; a claim it lacks cannot be read.
type claimSource struct {
	specs   map[string]*resourcev1.ResourceClaimSpec
	classes map[string][]string
}

func (s claimSource) ClaimSpec(_ string, c corev1.PodResourceClaim) (*resourcev1.ResourceClaimSpec, error) {
	if spec, ok := s.specs[c.Name]; ok {
		return spec, nil
	}
	return nil, errors.New("resourceclaimtemplate not found")
}

func (s claimSource) ClassModels(class string) []string { return s.classes[class] }

func TestCheckPodClaims(t *testing.T) {
	pool := PoolInfo{Name: "train-h100", Object: &v1alpha1.Pool{Spec: v1alpha1.PoolSpec{Accelerator: v1alpha1.AcceleratorSpec{Type: "H100-80G"}}}}
	byClass := func(class string) *resourcev1.ResourceClaimSpec {
		return &resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
			{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class}}}}}
	}
	src := claimSource{specs: map[string]*resourcev1.ResourceClaimSpec{"good": byClass("h100"), "bad": byClass("a100")},
		classes: map[string][]string{"h100": {"H100"}, "a100": {"A100"}}}
	pod := func(claims ...string) *corev1.Pod {
		p := &corev1.Pod{}
		for _, c := range claims {
			p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c})
		}
		return p
	}
	warnings, err := CheckPodClaims(pod("good"), pool, src)
	assert.NoError(t, err)
	assert.Empty(t, warnings)

	warnings, err = CheckPodClaims(pod("good", "bad"), pool, src)
	assert.ErrorContains(t, err, "claim bad, request gpu asks for model A100 (device class a100)")
	assert.Equal(t, []string{"P5"}, Rules(err))
	assert.Empty(t, warnings)

	warnings, err = CheckPodClaims(pod("later"), pool, src)
	assert.NoError(t, err, "a claim that cannot be read is not refused")
	assert.Equal(t, []string{"P5 not judged for claim later: resourceclaimtemplate not found"}, warnings)

	warnings, err = CheckPodClaims(pod("bad"), PoolInfo{Name: "cpu"}, src)
	assert.NoError(t, err, "a pool without a type is not judged")
	assert.Empty(t, warnings)
}
