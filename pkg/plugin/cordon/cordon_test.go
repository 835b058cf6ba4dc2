package cordon

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
)

func node(name string, unschedulable bool) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Unschedulable: unschedulable}}
}

func TestCordon(t *testing.T) {
	for _, tc := range []struct {
		name          string
		uncordon      bool
		before        bool // the node is cordoned before
		args          []string
		out           string
		unschedulable bool
		events        []string
	}{
		{"cordons and records an event", false, false, []string{"n1"}, "node/n1 cordoned\n", true, []string{"Cordoned: node n1 cordoned by kubectl litepool"}},
		{"already cordoned: said, no event", false, true, []string{"n1"}, "node/n1 already cordoned\n", true, nil},
		{"client dry run changes nothing", false, false, []string{"n1", "--dry-run=client"}, "node/n1 cordoned (dry run)\n", false, nil},
		{"server dry run sends a dry run", false, false, []string{"n1", "--dry-run=server"}, "node/n1 cordoned (server dry run)\n", false, nil},
		{"-o name prints the name only", false, false, []string{"n1", "--dry-run=client", "-o", "name"}, "node/n1\n", false, nil},
		{"-o jsonpath prints the node as it would be", false, false, []string{"n1", "--dry-run=client", "-o", "jsonpath={.spec.unschedulable}"}, "true", false, nil},
		{"uncordons", true, true, []string{"n1"}, "node/n1 uncordoned\n", false, []string{"Uncordoned: node n1 uncordoned by kubectl litepool"}},
		{"uncordon -o name", true, true, []string{"n1", "-o", "name"}, "node/n1\n", false, []string{"Uncordoned: node n1 uncordoned by kubectl litepool"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := kittest.NewFactory(t, node("n1", tc.before))
			newCmd := NewCmdCordon
			if tc.uncordon {
				newCmd = NewCmdUncordon
			}
			r := kittest.Run(f, newCmd, "", tc.args...)
			require.NoError(t, r.Err)
			assert.Equal(t, tc.out, r.Out)
			assert.Empty(t, r.ErrOut)
			assert.Equal(t, tc.unschedulable, f.Node(t, "n1").Spec.Unschedulable)
			assert.Equal(t, tc.events, f.Events(t))
		})
	}
}

// A node that does not exist stops the command there: the nodes before it are done,
// the ones after it untouched.
func TestCordonStopsAtAMissingNode(t *testing.T) {
	f := kittest.NewFactory(t, node("n1", false), node("n3", false))
	r := kittest.Run(f, NewCmdCordon, "", "n1", "n2", "n3")
	require.True(t, apierrors.IsNotFound(r.Err), "%v", r.Err)
	assert.Equal(t, "node/n1 cordoned\n", r.Out)
	assert.True(t, f.Node(t, "n1").Spec.Unschedulable)
	assert.False(t, f.Node(t, "n3").Spec.Unschedulable)
}

// A write the API server refuses is the command's error, and nothing is claimed.
func TestCordonWriteFails(t *testing.T) {
	f := kittest.NewFactory(t, node("n1", false))
	f.Kube.PrependReactor("update", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("connection lost"))
	})
	r := kittest.Run(f, NewCmdCordon, "", "n1")
	require.EqualError(t, r.Err, "Internal error occurred: connection lost")
	assert.Empty(t, r.Out)
	assert.False(t, f.Node(t, "n1").Spec.Unschedulable)
	assert.Empty(t, f.Events(t))
}

func TestCordonRejectsAnUnknownOutput(t *testing.T) {
	f := kittest.NewFactory(t, node("n1", false))
	r := kittest.Run(f, NewCmdCordon, "", "n1", "-o", "table")
	require.Error(t, r.Err)
	assert.Contains(t, r.Err.Error(), `unable to match a printer suitable for the output format "table"`)
	assert.False(t, f.Node(t, "n1").Spec.Unschedulable, "bad input changes nothing")
}
