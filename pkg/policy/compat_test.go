package policy_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runwhere-ai/litepool/pkg/compat"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

type linkWant struct {
	link    string
	verdict policy.Verdict
	reason  string
}

func TestCheckCompat(t *testing.T) {
	m, err := compat.Embedded()
	require.NoError(t, err)
	snt9bImage := "swr.cn-southwest-2.myhuaweicloud.com/atelier/pytorch_ascend:pytorch_2.5.1-cann_8.2.rc1-py_3.11-hce_2.0.2503-aarch64-snt9b-20250729103313-3a25129"
	cases := []struct {
		name    string
		chain   policy.SoftwareChain
		vendor  string
		verdict policy.Verdict
		links   []linkWant // declared links only, in chain order
	}{
		{
			name:   "ascend full chain as ModelArts 7.3.0 publishes it",
			chain:  policy.SoftwareChain{Hardware: "Snt9B", Driver: "24.1.0.3", Firmware: "7.5.0.5.220", CANN: "8.2.RC1", TorchNPU: "2.5.1.post1", PyTorch: "2.5.1", Image: snt9bImage},
			vendor: policy.VendorAscend, verdict: policy.Compatible,
			links: []linkWant{
				{"hardware", policy.Compatible, "known Ascend model: Snt9B"},
				{"driver", policy.Compatible, "published for Snt9B: recommended (ModelArts 7.3.0, Lite Server / Lite Cluster / Standard)"},
				{"firmware", policy.Compatible, "published with driver 24.1.0.3"},
				{"cann", policy.Compatible, "listed with driver 24.1.0.3 for Snt9B"},
				{"torch_npu", policy.Compatible, "built for CANN 8.2.RC1"},
				{"pytorch", policy.Compatible, "torch_npu 2.5.1.post1 is built for PyTorch 2.5.1"},
				{"image", policy.Compatible, "carries CANN 8.2.rc1, as declared"},
			},
		},
		{
			name:   "chip-level rows reached through an inferred alias say so",
			chain:  policy.SoftwareChain{Hardware: "Snt9B", Driver: "24.1.rc2", CANN: "8.0.RC3"},
			vendor: policy.VendorAscend, verdict: policy.Compatible,
			links: []linkWant{
				{"hardware", policy.Compatible, "known Ascend model: Snt9B"},
				{"driver", policy.Compatible, "published for Ascend910B (chip_type 910b), which lists Snt9B as an INFERRED alias"},
				{"cann", policy.Compatible, "listed with driver 24.1.rc2 for Ascend910B (chip_type 910b), which lists Snt9B as an INFERRED alias"},
			},
		},
		{
			name:   "a known driver not published with the CANN is incompatible",
			chain:  policy.SoftwareChain{Hardware: "Snt9B", Driver: "23.0.rc3", CANN: "8.2.RC1"},
			vendor: policy.VendorAscend, verdict: policy.Incompatible,
			links: []linkWant{
				{"hardware", policy.Compatible, "known Ascend model: Snt9B"},
				{"driver", policy.Compatible, "published for Snt9B"},
				{"cann", policy.Incompatible, "driver 23.0.rc3 is published with CANN 7.0.RC1, and no CANN/HDK statement pairs CANN 8.2.RC1 with it"},
			},
		},
		{
			name:   "CANN/HDK wildcard statements decide when no driver row lists the CANN",
			chain:  policy.SoftwareChain{Hardware: "Snt9B", Driver: "25.0.rc1.1", CANN: "9.1.0"},
			vendor: policy.VendorAscend, verdict: policy.Incompatible,
			links: []linkWant{
				{"hardware", policy.Compatible, "known Ascend model: Snt9B"},
				{"driver", policy.Compatible, "published for Ascend910B (chip_type 910b), which lists Snt9B as an INFERRED alias"},
				{"cann", policy.Incompatible, "CANN 9.1.0 is incompatible with HDK 25.0.X"},
			},
		},
		{
			name:   "an unknown driver is unknown, never compatible",
			chain:  policy.SoftwareChain{Hardware: "Snt9B", Driver: "99.9.9", CANN: "8.2.RC1"},
			vendor: policy.VendorAscend, verdict: policy.Unknown,
			links: []linkWant{
				{"hardware", policy.Compatible, "known Ascend model: Snt9B"},
				{"driver", policy.Unknown, "driver not listed for Snt9B in the matrix (listed: 24.1.0.3, 24.1.0.6, 23.0.6, 23.0.5, 23.0.3, 23.0.rc3, 25.0.rc1.1, 24.1.rc2, 24.1.rc1)"},
				{"cann", policy.Unknown, "no statement pairs this CANN with driver 99.9.9"},
			},
		},
		{
			name:   "firmware other than the driver's",
			chain:  policy.SoftwareChain{Hardware: "Snt9B", Driver: "24.1.0.3", Firmware: "7.1.0.9.220"},
			vendor: policy.VendorAscend, verdict: policy.Incompatible,
			links: []linkWant{
				{"hardware", policy.Compatible, "known Ascend model: Snt9B"},
				{"driver", policy.Compatible, "published for Snt9B: recommended (ModelArts 7.3.0, Lite Server / Lite Cluster / Standard)"},
				{"firmware", policy.Incompatible, "driver 24.1.0.3 is published with firmware 7.5.0.5.220"},
			},
		},
		{
			name:   "torch_npu built for another CANN, its extension release not supporting ours",
			chain:  policy.SoftwareChain{Hardware: "Snt9B", Driver: "24.1.0.3", CANN: "8.2.RC1", TorchNPU: "2.9.0.post6"},
			vendor: policy.VendorAscend, verdict: policy.Incompatible,
			links: []linkWant{
				{"hardware", policy.Compatible, "known Ascend model: Snt9B"},
				{"driver", policy.Compatible, "published for Snt9B: recommended (ModelArts 7.3.0, Lite Server / Lite Cluster / Standard)"},
				{"cann", policy.Compatible, "listed with driver 24.1.0.3 for Snt9B"},
				{"torch_npu", policy.Incompatible, "torch_npu 2.9.0.post6 is built for CANN 9.1.0, not 8.2.RC1"},
			},
		},
		{
			name:   "image CANN differs from the declared CANN",
			chain:  policy.SoftwareChain{Hardware: "Snt9B", Driver: "24.1.0.3", CANN: "8.0.1", Image: "quay.io/ascend/cann:8.2.rc1-910b-ubuntu22.04-py3.11"},
			vendor: policy.VendorAscend, verdict: policy.Incompatible,
			links: []linkWant{
				{"hardware", policy.Compatible, "known Ascend model: Snt9B"},
				{"driver", policy.Compatible, "published for Snt9B: recommended (ModelArts 7.3.0, Lite Server / Lite Cluster / Standard)"},
				{"cann", policy.Compatible, "listed with driver 24.1.0.3 for Snt9B"},
				{"image", policy.Incompatible, "carries CANN 8.2.rc1, the chain declares CANN 8.0.1"},
			},
		},
		{
			name:   "nvidia chain within minor-version compatibility",
			chain:  policy.SoftwareChain{Hardware: "A100-80G", Driver: "535.104.05", CUDA: "12.4", PyTorch: "2.5.1", Image: "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"},
			vendor: policy.VendorNVIDIA, verdict: policy.Compatible,
			links: []linkWant{
				{"hardware", policy.Compatible, "NVIDIA A100 (Ampere, compute capability 8.0), needs CUDA >= 11.0"},
				{"driver", policy.Compatible, "driver branch R535 (Long Term Support Branch, EOL June 2026)"},
				{"cuda", policy.Compatible, "driver 535.104.05 >= 525.60.13: minor-version compatibility, limited features (all features from 550.54.14)"},
				{"pytorch", policy.Compatible, "published as a cu124 build (stable)"},
				{"image", policy.Compatible, "carries CUDA 12.4, as declared"},
			},
		},
		{
			name:   "nvidia driver too old for the CUDA major",
			chain:  policy.SoftwareChain{Hardware: "NVIDIA-A100-SXM4-80GB", Driver: "535.104.05", CUDA: "13.0"},
			vendor: policy.VendorNVIDIA, verdict: policy.Incompatible,
			links: []linkWant{
				{"hardware", policy.Compatible, "NVIDIA A100 (Ampere, compute capability 8.0), needs CUDA >= 11.0"},
				{"driver", policy.Compatible, "driver branch R535 (Long Term Support Branch, EOL June 2026)"},
				{"cuda", policy.Incompatible, "CUDA 13.0 needs driver >= 580.65.06 (all features: 580.65.06)"},
			},
		},
		{
			name:   "A10 is not A100; PyTorch checked against the driver when no CUDA is given",
			chain:  policy.SoftwareChain{Hardware: "A10-24G", Driver: "550.54.15", PyTorch: "2.3", Image: "my/train:cu121-v2"},
			vendor: policy.VendorNVIDIA, verdict: policy.Unknown,
			links: []linkWant{
				{"hardware", policy.Compatible, "NVIDIA A10 (Ampere, compute capability 8.6), needs CUDA >= 11.1"},
				{"driver", policy.Compatible, "driver branch R550"},
				{"pytorch", policy.Compatible, "its cu118 build runs on driver 550.54.15"},
				{"image", policy.Unknown, "carries CUDA 12.1; no CUDA declared to check against"},
			},
		},
		{
			name:   "GPU newer than the driver's CUDA",
			chain:  policy.SoftwareChain{Hardware: "H100", Driver: "450.51.05"},
			vendor: policy.VendorNVIDIA, verdict: policy.Incompatible,
			links: []linkWant{
				{"hardware", policy.Compatible, "NVIDIA H100 (Hopper, compute capability 9.0), needs CUDA >= 11.8"},
				{"driver", policy.Incompatible, "H100 needs CUDA >= 11.8, which needs driver >= 520.61.05"},
			},
		},
		{
			name:   "unknown hardware",
			chain:  policy.SoftwareChain{Hardware: "Gaudi2", Driver: "1.2"},
			vendor: "", verdict: policy.Unknown,
			links: []linkWant{
				{"hardware", policy.Unknown, "hardware model not in the matrix (neither an Ascend model nor an NVIDIA GPU it lists)"},
				{"driver", policy.Unknown, "unknown hardware: nothing to check it against"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := policy.CheckCompat(m, tc.chain)
			assert.Equal(t, tc.vendor, res.Vendor)
			assert.Equal(t, tc.verdict, res.Verdict)
			var got []linkWant
			for _, l := range res.Links {
				if l.Verdict != policy.NotDeclared {
					got = append(got, linkWant{l.Link, l.Verdict, l.Reason})
				}
			}
			assert.Equal(t, tc.links, got)
			if tc.verdict == policy.Compatible {
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
	res := policy.CheckCompat(m, policy.SoftwareChain{Hardware: "Snt9B", Driver: "23.0.rc3", CANN: "8.2.RC1"})
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
		assert.Equal(t, want, policy.ImageCANN(m, image), image)
	}
	for image, want := range map[string]string{
		"pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime": "12.4",
		"nvcr.io/x/torch:cu118":                         "11.8",
		"my:cu130-py3":                                  "13.0",
		"docu124":                                       "",
	} {
		assert.Equal(t, want, policy.ImageCUDA(image), image)
	}
}
