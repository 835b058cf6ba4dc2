package plugin

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
)

// TestEveryCommandIsBound walks the whole command tree and holds every command that
// runs anything to kubectl's shape through kit.Bind: Complete, Validate, Run with one
// signature. A command that only groups others (get, describe, ...) runs nothing.
func TestEveryCommandIsBound(t *testing.T) {
	root := NewCmdLitepool(genericiooptions.NewTestIOStreamsDiscard())
	var bound []string
	walkRunnable(root, func(cmd *cobra.Command) {
		path := cmd.CommandPath()
		switch {
		case !cmd.Runnable():
			assert.False(t, kit.IsBound(cmd), "%q runs nothing and is marked bound", path)
		case !kit.IsBound(cmd):
			t.Errorf("%q runs without kit.Bind: give its options Complete(f, cmd, args), Validate() and Run(ctx) and bind them", path)
		case cmd.Run != nil || cmd.PreRunE != nil || cmd.PreRun != nil:
			t.Errorf("%q is bound but runs code of its own around Bind's RunE", path)
		default:
			bound = append(bound, path)
		}
	})
	// check compat, completion, cordon, create, delete pool, describe pool and node,
	// drain, edit pool, get labels, nodepools, nodes, pools and quota, hccl get and set,
	// label node, nodepool add, apply and remove, scale, stress run and schedule,
	// uncordon, upgrade driver, status, resume and abort, version.
	assert.GreaterOrEqual(t, len(bound), 29, "%v", bound)
}

// walkRunnable visits every command, hidden ones too; cobra's own help and __complete
// are cobra's.
func walkRunnable(cmd *cobra.Command, visit func(*cobra.Command)) {
	visit(cmd)
	for _, c := range cmd.Commands() {
		if c.Name() == "help" || strings.HasPrefix(c.Name(), "__") {
			continue
		}
		walkRunnable(c, visit)
	}
}
