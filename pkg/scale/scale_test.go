package scale

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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
			s := &Scaler{Kube: kube, Printer: &recorder{}}
			err := s.leave(context.Background(), pool, "n1")
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
	p := &upProgress{pool: "p"}
	assert.Equal(t, "scale-up of pool p: no node had joined yet", p.describe())
	p.joined("n1")
	p.joined("n2")
	assert.Contains(t, p.describe(), "scale-up of pool p stopped half-way: node(s) n1, n2 joined.\nFinish it (with --add, leave out the nodes that joined):\n  kubectl litepool ")
	assert.True(t, strings.HasSuffix(p.describe(), "\nOr put them back in the default pool:\n  kubectl litepool scale p --remove n1,n2 --yes"), p.describe())
}

// recorder is a Printer that remembers what it was given.
type recorder struct{ lines []string }

func (r *recorder) Print(obj runtime.Object, operation string) error {
	o, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	kind := strings.ToLower(obj.GetObjectKind().GroupVersionKind().Kind)
	if kind == "" {
		kind = fmt.Sprintf("%T", obj)
	}
	r.lines = append(r.lines, kind+"/"+o.GetName()+" "+operation)
	return nil
}

func (r *recorder) Say(format string, args ...any) {
	r.lines = append(r.lines, fmt.Sprintf(format, args...))
}

// Two concurrent `scale --nodes 3` of a pool of one: the second counted one member, then
// the first took every free node of the model. The second finds the pool at its target
// and succeeds instead of refusing for want of nodes (gpuctl's scale is idempotent).
func TestScaleUpByCountFindsTheTargetReachedByAConcurrentScale(t *testing.T) {
	pool := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	member := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{policy.LabelPool: "p"}}}
	}
	kube := fake.NewClientset(member("n1"), member("n2"), member("n3"))
	out := &recorder{}
	s := &Scaler{Kube: kube, Printer: out}
	require.NoError(t, s.Up(context.Background(), pool, 1, nil, 2))
	assert.Equal(t, []string{"*v1alpha1.Pool/p already has 3 node(s)"}, out.lines)

	// With no concurrent change the shortage is still refused, naming the rule.
	kube = fake.NewClientset(member("n1"))
	err := (&Scaler{Kube: kube, Printer: &recorder{}}).Up(context.Background(), pool, 1, nil, 2)
	require.Error(t, err)
	assert.Equal(t, []string{"S1"}, policy.Rules(err))
}
