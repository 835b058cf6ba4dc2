package kit

import (
	"context"

	"github.com/spf13/cobra"
)

// Options is the one shape of a command, kubectl's: Complete reads the flags, the
// arguments and what the command needs from the Factory (its clients; for a mutating
// command also its Mutation, through Mutation.CompleteClients); Validate refuses what
// cannot run, before anything is read from or written to the cluster; Run does the work.
type Options interface {
	Complete(f Factory, cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
}

// BoundAnnotation marks a command whose RunE is Bind's (see IsBound).
const BoundAnnotation = "litepool.kit/bound"

// Bind makes o the command's work: its RunE runs o's Complete, Validate and Run, in
// that order, and stops at the first error. f is handed to Complete; a command that
// never reaches the cluster (version) may pass nil. It returns cmd.
func Bind(cmd *cobra.Command, f Factory, o Options) *cobra.Command {
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(f, cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(cmd.Context())
	}
	cmd.Run = nil
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[BoundAnnotation] = "true"
	return cmd
}

// IsBound says whether the command runs through Bind.
func IsBound(cmd *cobra.Command) bool { return cmd.Annotations[BoundAnnotation] == "true" }
