package inventory

import (
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// decoder turns one protobuf list item into the Pod or Node the Builder reads; it may
// keep only the resources of accel.
type decoder struct {
	name string
	pod  func(item []byte, pod *corev1.Pod, names map[string]string, accel policy.Accelerators) error
	node func(item []byte, node *corev1.Node, accel policy.Accelerators) error
	// claim and slice read DRA objects; names interns the strings the counter keeps.
	claim func(item []byte, claim *resourcev1.ResourceClaim, names *nameTable) error
	slice func(item []byte, slice *resourcev1.ResourceSlice, names *nameTable) error
}

// scanDecoder reads only the fields the inventory uses (scan.go).
var scanDecoder = decoder{name: "scan", pod: scanPod, node: scanNode, claim: scanClaim, slice: scanSlice}

// unmarshalDecoder decodes every field with the generated protobuf Unmarshal: the
// yardstick the scanner is measured against (bench/getpools builds a plugin with the
// build tag inventory_unmarshal that uses it, and runs both side by side).
var unmarshalDecoder = decoder{
	name: "unmarshal",
	pod: func(item []byte, pod *corev1.Pod, _ map[string]string, _ policy.Accelerators) error {
		pod.Reset()
		return pod.Unmarshal(item)
	},
	node: func(item []byte, node *corev1.Node, _ policy.Accelerators) error {
		node.Reset()
		return node.Unmarshal(item)
	},
	claim: func(item []byte, claim *resourcev1.ResourceClaim, _ *nameTable) error {
		claim.Reset()
		return claim.Unmarshal(item)
	},
	slice: func(item []byte, slice *resourcev1.ResourceSlice, _ *nameTable) error {
		slice.Reset()
		return slice.Unmarshal(item)
	},
}

// itemDecoder is the one Collect uses.
var itemDecoder = scanDecoder
