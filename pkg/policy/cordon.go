package policy

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Cordon memory. Every litepool operation that cordons a node (scale-down, driver
// upgrade) keeps its own memory on the node, runwhere.ai/was-cordoned-by-<operation>:
// whether the node was cordoned before litepool took it ("true" or "false"). Two
// operations that overlap on a node then never undo each other: an operation that ends
// drops only its own memory, and uncordons only when no other operation still holds the
// node and the node was schedulable before. The older shared key
// runwhere.ai/was-cordoned (AnnotationWasCordoned) is still read as the memory of an
// operation that started before the split.

// CordonHolder is a litepool operation that cordons nodes.
type CordonHolder string

// The operations that cordon nodes.
const (
	CordonScaleDown CordonHolder = "scale-down"
	CordonUpgrade   CordonHolder = "upgrade"
)

// cordonMemoryPrefix starts every per-operation cordon memory key.
const cordonMemoryPrefix = Prefix + "was-cordoned-by-"

// CordonHolders lists the operations that may cordon nodes.
var CordonHolders = []CordonHolder{CordonScaleDown, CordonUpgrade}

// Annotation is the key of the operation's cordon memory.
func (h CordonHolder) Annotation() string { return cordonMemoryPrefix + string(h) }

// cordonMemories returns every cordon memory key the node carries: the operations'
// and the legacy shared key.
func cordonMemories(node *corev1.Node) []string {
	var keys []string
	for k := range node.Annotations {
		if strings.HasPrefix(k, cordonMemoryPrefix) || k == AnnotationWasCordoned {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// HeldBy lists the operations (and "was-cordoned" for the legacy key) that hold the
// node cordoned, sorted.
func HeldBy(node *corev1.Node) []string {
	var out []string
	for _, k := range cordonMemories(node) {
		out = append(out, strings.TrimPrefix(strings.TrimPrefix(k, cordonMemoryPrefix), Prefix))
	}
	return out
}

// HoldsCordon says whether operation h has cordoned the node and not yet let it go (a
// legacy shared memory counts as h's: the operation that started before the split
// could have been either).
func HoldsCordon(h CordonHolder, node *corev1.Node) bool {
	_, ok := memoryOf(h, node)
	return ok
}

// memoryOf is the key of h's memory on the node: its own, else the legacy shared one.
func memoryOf(h CordonHolder, node *corev1.Node) (string, bool) {
	for _, k := range []string{h.Annotation(), AnnotationWasCordoned} {
		if _, ok := node.Annotations[k]; ok {
			return k, true
		}
	}
	return "", false
}

// ApplyCordon is operation h cordoning the node. The first time h takes the node it
// records whether the node was cordoned before litepool: when another operation holds
// it already, that operation's memory is the truth (the node is cordoned only because
// of it), else the node's own state. Taking a node h holds already changes nothing.
func ApplyCordon(h CordonHolder, node *corev1.Node) {
	if !HoldsCordon(h, node) {
		was := node.Spec.Unschedulable
		if held := cordonMemories(node); len(held) > 0 {
			was = node.Annotations[held[0]] == "true"
		}
		setAnnotation(node, h.Annotation(), boolString(was))
	}
	node.Spec.Unschedulable = true
}

// ApplyRelease is operation h letting the node go: its memory is dropped, and the node
// is uncordoned only when h cordoned a schedulable node and no other operation still
// holds it. It returns the operations still holding the node (empty when none) and
// whether the node stays cordoned. A node h does not hold is left as it is.
func ApplyRelease(h CordonHolder, node *corev1.Node) (stillHeldBy []string, staysCordoned bool) {
	key, held := memoryOf(h, node)
	v := node.Annotations[key]
	if held {
		delete(node.Annotations, key)
	}
	others := HeldBy(node)
	if !held {
		return others, node.Spec.Unschedulable
	}
	if v != "true" && len(others) == 0 {
		node.Spec.Unschedulable = false
	}
	return others, node.Spec.Unschedulable
}

// ApplyOperatorCordon is an operator cordoning the node by hand: every operation that
// holds it now remembers it as cordoned before, so none uncordons it when it ends.
func ApplyOperatorCordon(node *corev1.Node) {
	for _, k := range cordonMemories(node) {
		node.Annotations[k] = "true"
	}
	node.Spec.Unschedulable = true
}

// ApplyOperatorUncordon is an operator uncordoning the node: an explicit word that
// overrides every operation's memory.
func ApplyOperatorUncordon(node *corev1.Node) {
	for _, k := range cordonMemories(node) {
		delete(node.Annotations, k)
	}
	node.Spec.Unschedulable = false
}

func setAnnotation(node *corev1.Node, key, value string) {
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[key] = value
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
