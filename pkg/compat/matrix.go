package compat

// Matrix is the part of the compatibility matrix (docs/compat.md; the data ships
// embedded here, compat-matrix.yaml) that the checks read. Fields the checks do not use
// are left out; the YAML may carry more (sources, notes, lifecycles) and they are
// ignored.
type Matrix struct {
	SchemaVersion int `json:"schema_version"`
	Vendors       struct {
		Ascend AscendMatrix `json:"huawei-ascend"`
		NVIDIA NVIDIAMatrix `json:"nvidia"`
	} `json:"vendors"`
}

// AscendMatrix is hardware → HDK driver/firmware → CANN → torch_npu → image.
type AscendMatrix struct {
	Hardware           []AscendHardware     `json:"hardware"`
	CANNHDKCompat      []CANNHDKCompat      `json:"cann_hdk_compat"`
	TorchNPU           []TorchNPURow        `json:"torch_npu"`
	TorchNPUCANNCompat []TorchNPUCANNCompat `json:"torch_npu_cann_compat"`
	ContainerImages    struct {
		VLLMAscend []VLLMAscendImage `json:"vllm_ascend"`
	} `json:"container_images"`
}

// AscendHardware is one hardware model and the driver releases published for it.
type AscendHardware struct {
	Model           string          `json:"model"`
	Aliases         []string        `json:"aliases"`
	AliasesInferred []string        `json:"aliases_inferred"`
	Releases        []AscendRelease `json:"releases"`
}

// AscendRelease is one driver (or HDK line) with the firmware and CANN versions published
// with it.
type AscendRelease struct {
	HDK             string   `json:"hdk"`
	Driver          string   `json:"driver"`
	Firmware        string   `json:"firmware"`
	CANN            []string `json:"cann"`
	ContainerImages []string `json:"container_images"`
	Status          string   `json:"status"`
	Source          string   `json:"source"`
}

// CANNHDKCompat is one CANN ↔ HDK statement. CANN (or CANNSet) may use "X" wildcards
// ("9.1.X"); the HDK lists likewise ("25.2.X", "26.0.RC1/25.7.RC1").
type CANNHDKCompat struct {
	CANN                   string   `json:"cann"`
	CANNSet                []string `json:"cann_set"`
	HDKCompatible          []string `json:"hdk_compatible"`
	HDKIncompatible        []string `json:"hdk_incompatible"`
	HDKMapped              []string `json:"hdk_mapped"`
	HDKSet                 []string `json:"hdk_set"`
	HDKRequiredByInstaller string   `json:"hdk_required_by_installer"`
	Context                string   `json:"context"`
	Source                 string   `json:"source"`
}

// TorchNPURow is one torch_npu release and the PyTorch and CANN it is built for.
type TorchNPURow struct {
	TorchNPU               string `json:"torch_npu"`
	PyTorch                string `json:"pytorch"`
	CANN                   string `json:"cann"`
	AscendExtensionVersion string `json:"ascend_extension_version"`
	Source                 string `json:"source"`
	Table                  string `json:"table"`
}

// TorchNPUCANNCompat lists the CANN versions one Ascend Extension for PyTorch release
// supports besides the one each torch_npu row names.
type TorchNPUCANNCompat struct {
	AscendExtensionVersion string   `json:"ascend_extension_version"`
	CANNCompatible         []string `json:"cann_compatible"`
	Source                 string   `json:"source"`
}

// VLLMAscendImage is a published vllm-ascend image and the CANN inside it.
type VLLMAscendImage struct {
	Image     string `json:"image"`
	BaseImage string `json:"base_image"`
	CANN      string `json:"cann"`
	TorchNPU  string `json:"torch_npu"`
	Source    string `json:"source"`
}

// NVIDIAMatrix is GPU → driver → CUDA → PyTorch.
type NVIDIAMatrix struct {
	CUDAMinDriver     []CUDAMinDriver `json:"cuda_min_driver"`
	DriverBranches    []DriverBranch  `json:"driver_branches"`
	GPUProducts       []GPUProduct    `json:"gpu_products"`
	PyTorchCUDABuilds []PyTorchCUDA   `json:"pytorch_cuda_builds"`
}

// CUDAMinDriver is the Linux driver a CUDA minor needs: ToolkitDriverLinux for every
// feature, MinDriverLinux for minor-version compatibility (limited features).
type CUDAMinDriver struct {
	CUDA               string `json:"cuda"`
	ToolkitDriverLinux string `json:"toolkit_driver_linux"`
	MinDriverLinux     string `json:"min_driver_linux"`
	Source             string `json:"source"`
}

// DriverBranch is an NVIDIA data-center driver branch (R535, R580, ...).
type DriverBranch struct {
	Branch      string `json:"branch"`
	Designation string `json:"designation"`
	EOL         string `json:"eol"`
	Source      string `json:"source"`
}

// GPUProduct is a GPU model and the oldest CUDA toolkit that supports it.
type GPUProduct struct {
	Product           string `json:"product"`
	Architecture      string `json:"architecture"`
	ComputeCapability string `json:"compute_capability"`
	MinCUDAToolkit    string `json:"min_cuda_toolkit"`
	Source            string `json:"source"`
}

// PyTorchCUDA is one PyTorch minor and the CUDA builds published for it.
type PyTorchCUDA struct {
	PyTorch    string `json:"pytorch"`
	CUDABuilds []struct {
		CUDA     string `json:"cuda"`
		WheelTag string `json:"wheel_tag"`
		Kind     string `json:"kind"`
	} `json:"cuda_builds"`
	Source string `json:"source"`
}
