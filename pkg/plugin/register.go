// Package plugin holds the commands of `kubectl litepool` not yet moved to their own
// package under pkg/cmd.
package plugin

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/runwhere-ai/litepool/pkg/cmd/kit"
)

// Commands are the commands of this package, for the root command.
func Commands(f kit.Factory, streams genericiooptions.IOStreams) []*cobra.Command {
	var cmds []*cobra.Command
	for _, extra := range extraCommands {
		cmds = append(cmds, extra(f, streams))
	}
	return cmds
}

// extraCommands lets each command file register itself (see register below), so adding
// a command does not mean editing this file.
var extraCommands []func(kit.Factory, genericiooptions.IOStreams) *cobra.Command

func register(c func(kit.Factory, genericiooptions.IOStreams) *cobra.Command) bool {
	extraCommands = append(extraCommands, c)
	return true
}
