package policy

import (
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Accelerator models. The same GPU goes by many names: the gpu-type an operator or a
// gpuctl pool file writes (A10, a10-24g, A100-80G, Snt9B), the product NVIDIA GPU feature
// discovery reports (NVIDIA-A10, NVIDIA-A100-SXM4-80GB), the chip the Ascend device
// plugin reports (910B3, huawei-Ascend910). Every rule that compares accelerator types
// (N2 on a join, P5 on a pod, R1 on an adoption, create -f's device-plugin check, the
// model a pool of labels takes) compares them with SameGPUModel, never as strings, so
// that a node is judged the same way whichever of its names a rule happens to read.

// SameGPUModel says whether two accelerator type names name the same model:
//   - Ascend names compare by chip family (910: Ascend910B, 910B3, Snt9B; 310: Ascend310P,
//     310P3, Snt3), as ModelArts names its flavours;
//   - other names by their model word, the first word that is not a vendor or brand
//     (NVIDIA, GeForce, Tesla, ...) run together with the words before its first digit
//     (RTX-4090 = RTX4090, RTX-A6000 = RTXA6000): it must appear in the other name as a
//     word or as adjacent words run together, and a memory size both give (24G, 80GB)
//     must agree.
//
// So a10-24g, A10 and NVIDIA-A10 are one model; A10 and A100, A100-40G and
// NVIDIA-A100-SXM4-80GB, RTX-4090 and RTX-3090, L40 and L40S are not. Case does not
// matter. An empty name (no accelerator) is the same model only as another empty name.
func SameGPUModel(a, b string) bool {
	if strings.EqualFold(a, b) {
		return true
	}
	if a == "" || b == "" {
		return false
	}
	fa, fb := ascendFamilyOf(a), ascendFamilyOf(b)
	if fa != "" || fb != "" {
		return fa == fb
	}
	return modelWordIn(a, b) || modelWordIn(b, a)
}

// gpuVendorWords are words of a product name that name a vendor or a brand, not a model.
var gpuVendorWords = map[string]bool{"NVIDIA": true, "GEFORCE": true, "TESLA": true, "QUADRO": true, "AMD": true, "INSTINCT": true, "HUAWEI": true}

var (
	nonAlnum    = regexp.MustCompile(`[^A-Z0-9]+`)
	memoryToken = regexp.MustCompile(`^([0-9]+)GB?$`)
	hasDigit    = regexp.MustCompile(`[0-9]`)
)

func words(s string) []string {
	return strings.FieldsFunc(nonAlnum.ReplaceAllString(strings.ToUpper(s), " "), func(r rune) bool { return r == ' ' })
}

// modelWordIn says whether a's model word is in b (a word, or adjacent words run
// together) and their memory sizes, where both give one, agree.
func modelWordIn(a, b string) bool {
	wa, wb := words(a), words(b)
	key, rest := "", wa
	for i, w := range wa {
		if key == "" && gpuVendorWords[w] {
			continue
		}
		key += w
		if hasDigit.MatchString(w) {
			rest = wa[i+1:]
			break
		}
		rest = nil
	}
	if key == "" {
		return false
	}
	found := false
	for i := range wb {
		joined := ""
		for j := i; j < len(wb) && !found && len(joined) < len(key); j++ {
			joined += wb[j]
			found = joined == key
		}
	}
	return found && memoryAgrees(rest, wb)
}

func memoryAgrees(a, b []string) bool {
	size := func(ws []string) string {
		for _, w := range ws {
			if m := memoryToken.FindStringSubmatch(w); m != nil {
				return m[1]
			}
		}
		return ""
	}
	x, y := size(a), size(b)
	return x == "" || y == "" || x == y
}

// ascendFamilyOf is the Ascend chip family (910 or 310) a name gives, "" for none.
func ascendFamilyOf(s string) string {
	for _, w := range words(s) {
		w = strings.TrimPrefix(w, "ASCEND")
		switch {
		case strings.HasPrefix(w, "910"), strings.HasPrefix(w, "SNT9"):
			return "910"
		case strings.HasPrefix(w, "310"), strings.HasPrefix(w, "SNT3"):
			return "310"
		}
	}
	return ""
}

// ModelStatement is one thing a node's labels say about its accelerator model: the
// label and its value.
type ModelStatement struct{ Label, Value string }

func (s ModelStatement) String() string {
	if s.Label == LabelGPUType {
		return "gpu-type " + s.Value
	}
	return s.Label + "=" + s.Value
}

// NodeModelStatements lists what a node's labels say about its accelerator model, in
// the order they are trusted: runwhere.ai/gpu-type, then the device plugins'
// (nvidia.com/gpu.product, node.kubernetes.io/npu.chip.name, and accelerator when it
// names an Ascend chip). A node may carry several; a rule takes the node for a model
// only when every one of them names it.
func NodeModelStatements(node *corev1.Node) []ModelStatement {
	var out []ModelStatement
	for _, l := range []string{LabelGPUType, LabelNVIDIAProduct, LabelNPUChipName, LabelAscendFamily} {
		v := node.Labels[l]
		if v == "" || (l == LabelAscendFamily && !strings.HasPrefix(strings.ToUpper(v), "HUAWEI-ASCEND")) {
			continue
		}
		out = append(out, ModelStatement{Label: l, Value: v})
	}
	return out
}

// NodeContradicts returns the first of the node's model statements that does not name
// model, or nil when none does (including when the node says nothing).
func NodeContradicts(node *corev1.Node, model string) *ModelStatement {
	for _, s := range NodeModelStatements(node) {
		if !SameGPUModel(s.Value, model) {
			return &s
		}
	}
	return nil
}

// offersAccelerators says whether a node offers accelerator devices (a known
// accelerator resource in allocatable, even with 0 left after MIG partitioning).
func offersAccelerators(node *corev1.Node) bool {
	name, _ := Accelerators{}.NodeAccelerators(node)
	return name != "" || len(NodeMIG(node)) > 0
}
