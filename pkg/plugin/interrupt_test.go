package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/cmd/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// failingWrites makes the fake API server refuse the n-th write to a node (update or
// patch), as a webhook timeout or a lost connection would.
func failingWrites(kube *fake.Clientset, n int) {
	count := 0
	fail := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetResource().Resource != "nodes" {
			return false, nil, nil
		}
		count++
		if count == n {
			return true, nil, apierrors.NewInternalError(errors.New("connection lost"))
		}
		return false, nil, nil
	}
	kube.PrependReactor("update", "nodes", fail)
	kube.PrependReactor("patch", "nodes", fail)
}

// Whatever write fails while a drained node leaves the pool, "run the command again"
// can still reach it: it is either still a marked member of the pool, or out of the
// pool and uncordoned. (leave used to remove the label first and uncordon after: a
// failed uncordon left it cordoned in the default pool for good.)
func TestLeaveNeverStrandsACordonedNodeOutsideThePool(t *testing.T) {
	pool := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	for failAt := 1; failAt <= 3; failAt++ {
		t.Run(fmt.Sprint("write ", failAt, " fails"), func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1",
				Labels:      map[string]string{policy.LabelPool: "p"},
				Annotations: map[string]string{policy.AnnotationScaleDown: "p", policy.CordonScaleDown.Annotation(): "false"}},
				Spec: corev1.NodeSpec{Unschedulable: true}}
			kube := fake.NewSimpleClientset(n)
			failingWrites(kube, failAt)
			o := &ScaleOptions{clients: &kit.Clients{Kube: kube}, IOStreams: genericiooptions.NewTestIOStreamsDiscard()}
			err := o.leave(context.Background(), pool, "n1")
			got, gerr := kube.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
			require.NoError(t, gerr)
			inPool := got.Labels[policy.LabelPool] == "p" && got.Annotations[policy.AnnotationScaleDown] == "p"
			released := got.Labels[policy.LabelPool] == "" && !got.Spec.Unschedulable && got.Annotations[policy.AnnotationScaleDown] == ""
			assert.True(t, inPool || released, "stranded: labels %v, annotations %v, unschedulable %v (err %v)", got.Labels, got.Annotations, got.Spec.Unschedulable, err)
			if err == nil {
				assert.True(t, released)
			}
		})
	}
}

func TestScaleUpLeftoversNameTheJoinedNodesAndTheCommands(t *testing.T) {
	p := &scaleUpProgress{pool: "p"}
	assert.Equal(t, "scale-up of pool p: no node had joined yet", p.describe())
	p.joined("n1")
	p.joined("n2")
	assert.Contains(t, p.describe(), "scale-up of pool p stopped half-way: node(s) n1, n2 joined.\nFinish it (with --add, leave out the nodes that joined):\n  kubectl litepool ")
	assert.True(t, strings.HasSuffix(p.describe(), "\nOr put them back in the default pool:\n  kubectl litepool scale p --remove n1,n2 --yes"), p.describe())
}
