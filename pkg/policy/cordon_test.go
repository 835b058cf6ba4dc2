package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func cordonNode(unschedulable bool, ann map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: ann}, Spec: corev1.NodeSpec{Unschedulable: unschedulable}}
}

// The overlap the shared was-cordoned key got wrong: a scale-down and an upgrade both
// hold a node; the first to finish must not uncordon it, the last one must.
func TestOverlappingOperationsUncordonOnlyWhenTheLastLetsGo(t *testing.T) {
	for _, order := range [][2]CordonHolder{{CordonScaleDown, CordonUpgrade}, {CordonUpgrade, CordonScaleDown}} {
		n := cordonNode(false, nil)
		ApplyCordon(order[0], n)
		ApplyCordon(order[1], n)
		assert.True(t, n.Spec.Unschedulable)
		assert.Equal(t, "false", n.Annotations[order[1].Annotation()], "the second remembers the state before litepool, not the first one's cordon")

		held, stays := ApplyRelease(order[0], n)
		assert.Equal(t, []string{string(order[1])}, held)
		assert.True(t, stays, "%s finished first: %s still holds the node", order[0], order[1])
		assert.True(t, n.Spec.Unschedulable)

		held, stays = ApplyRelease(order[1], n)
		assert.Empty(t, held)
		assert.False(t, stays)
		assert.False(t, n.Spec.Unschedulable, "the last operation to let go uncordons")
		assert.Empty(t, n.Annotations)
	}
}

func TestCordonedBeforeStaysCordoned(t *testing.T) {
	n := cordonNode(true, nil)
	ApplyCordon(CordonUpgrade, n)
	ApplyCordon(CordonScaleDown, n)
	_, stays := ApplyRelease(CordonUpgrade, n)
	assert.True(t, stays)
	_, stays = ApplyRelease(CordonScaleDown, n)
	assert.True(t, stays, "cordoned before litepool: stays cordoned")
	assert.True(t, n.Spec.Unschedulable)
}

func TestOperatorCordonWhileHeld(t *testing.T) {
	n := cordonNode(false, nil)
	ApplyCordon(CordonScaleDown, n)
	ApplyOperatorCordon(n)
	_, stays := ApplyRelease(CordonScaleDown, n)
	assert.True(t, stays, "the operator cordoned it meanwhile")

	ApplyCordon(CordonUpgrade, n)
	ApplyOperatorUncordon(n)
	assert.False(t, n.Spec.Unschedulable)
	assert.Empty(t, n.Annotations, "an operator's uncordon clears every memory")
}

func TestReleaseOfANodeNotHeldChangesNothing(t *testing.T) {
	n := cordonNode(true, map[string]string{CordonUpgrade.Annotation(): "false"})
	held, stays := ApplyRelease(CordonScaleDown, n)
	assert.Equal(t, []string{"upgrade"}, held)
	assert.True(t, stays)
	assert.Equal(t, map[string]string{CordonUpgrade.Annotation(): "false"}, n.Annotations)
}

func TestLegacyMemoryIsTheOperationsOwn(t *testing.T) {
	n := cordonNode(true, map[string]string{AnnotationWasCordoned: "false"})
	assert.True(t, HoldsCordon(CordonUpgrade, n))
	ApplyCordon(CordonUpgrade, n) // a resumed step: nothing new recorded
	assert.Equal(t, map[string]string{AnnotationWasCordoned: "false"}, n.Annotations)
	_, stays := ApplyRelease(CordonUpgrade, n)
	assert.False(t, stays)
	assert.Empty(t, n.Annotations)
}
