package kittest

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
)

// RunContext is Run with the command's context ctx instead of a background one: cancel
// it (from a reactor, say) to interrupt the command as the first Ctrl-C does
// (kit.Execute cancels the context of the running command).
func RunContext(ctx context.Context, f *Factory, newCmd func(kit.Factory, genericiooptions.IOStreams) *cobra.Command, stdin string, args ...string) Result {
	return Run(f, func(kf kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
		cmd := newCmd(kf, streams)
		run := cmd.RunE
		cmd.RunE = func(c *cobra.Command, args []string) error {
			c.SetContext(ctx)
			return run(c, args)
		}
		return cmd
	}, stdin, args...)
}
