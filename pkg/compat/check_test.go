package compat_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/compat"
)

type linkWant struct {
	link    string
	verdict compat.Verdict
	reason  string
}

func TestCheckCompat(t *testing.T) {
	m, err := compat.Embedded()
	require.NoError(t, err)
	snt9bImage := "swr.cn-southwest-2.myhuaweicloud.com/atelier/pytorch_ascend:pytorch_2.5.1-cann_8.2.rc1-py_3.11-hce_2.0.2503-aarch64-snt9b-20250729103313-3a25129"
	cases := []struct {
		name    string
		chain   compat.Chain
		vendor  string
		verdict compat.Verdict
		links   []linkWant // declared links only, in chain order
	}{
		{
			name:   "ascend full chain as ModelArts 7.3.0 publishes it",
			chain:  compat.Chain{Hardware: "Snt9B", SoftwareSpec: v1alpha1.SoftwareSpec{Driver: "24.1.0.3", Firmware: "7.5.0.5.220", CANN: "8.2.RC1", TorchNPU: "2.5.1.post1", PyTorch: "2.5.1", Image: snt9bImage}},
			vendor: compat.VendorAscend, verdict: compat.Compatible,
			links: []linkWant{
				{"hardware", compat.Compatible, "known Ascend model: Snt9B"},
				{"driver", compat.Compatible, "published for Snt9B: recommended (ModelArts 7.3.0, Lite Server / Lite Cluster / Standard)"},
				{"firmware", compat.Compatible, "published with driver 24.1.0.3"},
				{"cann", compat.Compatible, "listed with driver 24.1.0.3 for Snt9B"},
				{"torch_npu", compat.Compatible, "built for CANN 8.2.RC1"},
				{"pytorch", compat.Compatible, "torch_npu 2.5.1.post1 is built for PyTorch 2.5.1"},
				{"image", compat.Compatible, "carries CANN 8.2.rc1, as declared"},
			},
		},
		{
			name:   "chip-level rows reached through an inferred alias say so",
			chain:  compat.Chain{Hardware: "Snt9B", SoftwareSpec: v1alpha1.SoftwareSpec{Driver: "24.1.rc2", CANN: "8.0.RC3"}},
			vendor: compat.VendorAscend, verdict: compat.Compatible,
			links: []linkWant{
				{"hardware", compat.Compatible, "known Ascend model: Snt9B"},
				{"driver", compat.Compatible, "published for Ascend910B (chip_type 910b), which lists Snt9B as an INFERRED alias"},
				{"cann", compat.Compatible, "listed with driver 24.1.rc2 for Ascend910B (chip_type 910b), which lists Snt9B as an INFERRED alias"},
			},
		},
		{
			name:   "a known driver not published with the CANN is incompatible",
			chain:  compat.Chain{Hardware: "Snt9B", SoftwareSpec: v1alpha1.SoftwareSpec{Driver: "23.0.rc3", CANN: "8.2.RC1"}},
			vendor: compat.VendorAscend, verdict: compat.Incompatible,
			links: []linkWant{
				{"hardware", compat.Compatible, "known Ascend model: Snt9B"},
				{"driver", compat.Compatible, "published for Snt9B"},
				{"cann", compat.Incompatible, "driver 23.0.rc3 is published with CANN 7.0.RC1, and no CANN/HDK statement pairs CANN 8.2.RC1 with it"},
			},
		},
		{
			name:   "CANN/HDK wildcard statements decide when no driver row lists the CANN",
			chain:  compat.Chain{Hardware: "Snt9B", SoftwareSpec: v1alpha1.SoftwareSpec{Driver: "25.0.rc1.1", CANN: "9.1.0"}},
			vendor: compat.VendorAscend, verdict: compat.Incompatible,
			links: []linkWant{
				{"hardware", compat.Compatible, "known Ascend model: Snt9B"},
				{"driver", compat.Compatible, "published for Ascend910B (chip_type 910b), which lists Snt9B as an INFERRED alias"},
				{"cann", compat.Incompatible, "CANN 9.1.0 is incompatible with HDK 25.0.X"},
			},
		},
		{
			name:   "an unknown driver is unknown, never compatible",
			chain:  compat.Chain{Hardware: "Snt9B", SoftwareSpec: v1alpha1.SoftwareSpec{Driver: "99.9.9", CANN: "8.2.RC1"}},
			vendor: compat.VendorAscend, verdict: compat.Unknown,
			links: []linkWant{
				{"hardware", compat.Compatible, "known Ascend model: Snt9B"},
				{"driver", compat.Unknown, "driver not listed for Snt9B in the matrix (listed: 24.1.0.3, 24.1.0.6, 23.0.6, 23.0.5, 23.0.3, 23.0.rc3, 25.0.rc1.1, 24.1.rc2, 24.1.rc1)"},
				{"cann", compat.Unknown, "no statement pairs this CANN with driver 99.9.9"},
			},
		},
		{
			name:   "firmware other than the driver's",
			chain:  compat.Chain{Hardware: "Snt9B", SoftwareSpec: v1alpha1.SoftwareSpec{Driver: "24.1.0.3", Firmware: "7.1.0.9.220"}},
			vendor: compat.VendorAscend, verdict: compat.Incompatible,
			links: []linkWant{
				{"hardware", compat.Compatible, "known Ascend model: Snt9B"},
				{"driver", compat.Compatible, "published for Snt9B: recommended (ModelArts 7.3.0, Lite Server / Lite Cluster / Standard)"},
				{"firmware", compat.Incompatible, "driver 24.1.0.3 is published with firmware 7.5.0.5.220"},
			},
		},
		{
			name:   "torch_npu built for another CANN, its extension release not supporting ours",
			chain:  compat.Chain{Hardware: "Snt9B", SoftwareSpec: v1alpha1.SoftwareSpec{Driver: "24.1.0.3", CANN: "8.2.RC1", TorchNPU: "2.9.0.post6"}},
			vendor: compat.VendorAscend, verdict: compat.Incompatible,
			links: []linkWant{
				{"hardware", compat.Compatible, "known Ascend model: Snt9B"},
				{"driver", compat.Compatible, "published for Snt9B: recommended (ModelArts 7.3.0, Lite Server / Lite Cluster / Standard)"},
				{"cann", compat.Compatible, "listed with driver 24.1.0.3 for Snt9B"},
				{"torch_npu", compat.Incompatible, "torch_npu 2.9.0.post6 is built for CANN 9.1.0, not 8.2.RC1"},
			},
		},
		{
			name:   "image CANN differs from the declared CANN",
			chain:  compat.Chain{Hardware: "Snt9B", SoftwareSpec: v1alpha1.SoftwareSpec{Driver: "24.1.0.3", CANN: "8.0.1", Image: "quay.io/ascend/cann:8.2.rc1-910b-ubuntu22.04-py3.11"}},
			vendor: compat.VendorAscend, verdict: compat.Incompatible,
			links: []linkWant{
				{"hardware", compat.Compatible, "known Ascend model: Snt9B"},
				{"driver", compat.Compatible, "published for Snt9B: recommended (ModelArts 7.3.0, Lite Server / Lite Cluster / Standard)"},
				{"cann", compat.Compatible, "listed with driver 24.1.0.3 for Snt9B"},
				{"image", compat.Incompatible, "carries CANN 8.2.rc1, the chain declares CANN 8.0.1"},
			},
		},
		{
			name:   "nvidia chain within minor-version compatibility",
			chain:  compat.Chain{Hardware: "A100-80G", SoftwareSpec: v1alpha1.SoftwareSpec{Driver: "535.104.05", CUDA: "12.4", PyTorch: "2.5.1", Image: "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"}},
			vendor: compat.VendorNVIDIA, verdict: compat.Compatible,
			links: []linkWant{
				{"hardware", compat.Compatible, "NVIDIA A100 (Ampere, compute capability 8.0), needs CUDA >= 11.0"},
				{"driver", compat.Compatible, "driver branch R535 (Long Term Support Branch, EOL June 2026)"},
				{"cuda", compat.Compatible, "driver 535.104.05 >= 525.60.13: minor-version compatibility, limited features (all features from 550.54.14)"},
				{"pytorch", compat.Compatible, "published as a cu124 build (stable)"},
				{"image", compat.Compatible, "carries CUDA 12.4, as declared"},
			},
		},
		{
			name:   "nvidia driver too old for the CUDA major",
			chain:  compat.Chain{Hardware: "NVIDIA-A100-SXM4-80GB", SoftwareSpec: v1alpha1.SoftwareSpec{Driver: "535.104.05", CUDA: "13.0"}},
			vendor: compat.VendorNVIDIA, verdict: compat.Incompatible,
			links: []linkWant{
				{"hardware", compat.Compatible, "NVIDIA A100 (Ampere, compute capability 8.0), needs CUDA >= 11.0"},
				{"driver", compat.Compatible, "driver branch R535 (Long Term Support Branch, EOL June 2026)"},
				{"cuda", compat.Incompatible, "CUDA 13.0 needs driver >= 580.65.06 (all features: 580.65.06)"},
			},
		},
		{
			name:   "A10 is not A100; PyTorch checked against the driver when no CUDA is given",
			chain:  compat.Chain{Hardware: "A10-24G", SoftwareSpec: v1alpha1.SoftwareSpec{Driver: "550.54.15", PyTorch: "2.3", Image: "my/train:cu121-v2"}},
			vendor: compat.VendorNVIDIA, verdict: compat.Unknown,
			links: []linkWant{
				{"hardware", compat.Compatible, "NVIDIA A10 (Ampere, compute capability 8.6), needs CUDA >= 11.1"},
				{"driver", compat.Compatible, "driver branch R550"},
				{"pytorch", compat.Compatible, "its cu118 build runs on driver 550.54.15"},
				{"image", compat.Unknown, "carries CUDA 12.1; no CUDA declared to check against"},
			},
		},
		{
			name:   "GPU newer than the driver's CUDA",
			chain:  compat.Chain{Hardware: "H100", SoftwareSpec: v1alpha1.SoftwareSpec{Driver: "450.51.05"}},
			vendor: compat.VendorNVIDIA, verdict: compat.Incompatible,
			links: []linkWant{
				{"hardware", compat.Compatible, "NVIDIA H100 (Hopper, compute capability 9.0), needs CUDA >= 11.8"},
				{"driver", compat.Incompatible, "H100 needs CUDA >= 11.8, which needs driver >= 520.61.05"},
			},
		},
		{
			name:   "unknown hardware",
			chain:  compat.Chain{Hardware: "Gaudi2", SoftwareSpec: v1alpha1.SoftwareSpec{Driver: "1.2"}},
			vendor: "", verdict: compat.Unknown,
			links: []linkWant{
				{"hardware", compat.Unknown, "hardware model not in the matrix (neither an Ascend model nor an NVIDIA GPU it lists)"},
				{"driver", compat.Unknown, "unknown hardware: nothing to check it against"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := compat.Check(m, tc.chain)
			assert.Equal(t, tc.vendor, res.Vendor)
			assert.Equal(t, tc.verdict, res.Verdict)
			var got []linkWant
			for _, l := range res.Links {
				if l.Verdict != compat.NotDeclared {
					got = append(got, linkWant{l.Link, l.Verdict, l.Reason})
				}
			}
			assert.Equal(t, tc.links, got)
			if tc.verdict == compat.Compatible {
				assert.NoError(t, res.Err())
			} else {
				assert.Error(t, res.Err())
			}
		})
	}
}

func TestCompatErrNamesTheBadLinks(t *testing.T) {
	m, err := compat.Embedded()
	require.NoError(t, err)
	res := compat.Check(m, compat.Chain{Hardware: "Snt9B", SoftwareSpec: v1alpha1.SoftwareSpec{Driver: "23.0.rc3", CANN: "8.2.RC1"}})
	assert.EqualError(t, res.Err(), "[C1] version chain is incompatible: cann 8.2.RC1 incompatible: driver 23.0.rc3 is published with CANN 7.0.RC1, and no CANN/HDK statement pairs CANN 8.2.RC1 with it")
}

func TestImageVersions(t *testing.T) {
	m, err := compat.Embedded()
	require.NoError(t, err)
	for image, want := range map[string]string{
		"quay.io/ascend/cann:8.3.rc2-310p-ubuntu22.04-py3.11":          "8.3.rc2",
		"pytorch_2.1.0-cann_7.0.1.1-py_3.9-euler_2.10.7-aarch64-snt9b": "7.0.1.1",
		"quay.io/ascend/vllm-ascend:v0.9.1":                            "8.2.RC1",
		"busybox":                                                      "",
	} {
		assert.Equal(t, want, compat.ImageCANN(m, image), image)
	}
	for image, want := range map[string]string{
		"pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime": "12.4",
		"nvcr.io/x/torch:cu118":                         "11.8",
		"my:cu130-py3":                                  "13.0",
		"docu124":                                       "",
	} {
		assert.Equal(t, want, compat.ImageCUDA(image), image)
	}
}
