package kittest

import (
	"context"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
)

// The factory names Events from their generateName, as the API server does: the bare
// fake would name them all "" and keep only the first.
func TestEveryEventIsKeptInOrder(t *testing.T) {
	f := NewFactory(t)
	rec := &events.Recorder{Client: f.Kube}
	ctx := context.Background()
	for _, n := range []string{"zz", "aa", "zz"} {
		ref := events.NodeRef(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		require.NoError(t, rec.Normal(ctx, ref, "Seen", "node %s", n))
	}
	assert.Equal(t, []string{"Seen: node zz", "Seen: node aa", "Seen: node zz"}, f.Events(t))
}

func TestRunContextGivesTheCommandItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	newCmd := func(kit.Factory, genericiooptions.IOStreams) *cobra.Command {
		return &cobra.Command{Use: "x", RunE: func(c *cobra.Command, _ []string) error { return c.Context().Err() }}
	}
	assert.ErrorIs(t, RunContext(ctx, NewFactory(t), newCmd, "").Err, context.Canceled)
	assert.NoError(t, Run(NewFactory(t), newCmd, "").Err)
}
