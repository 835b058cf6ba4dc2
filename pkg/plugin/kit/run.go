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

// The old ways to run a command, kept only for the commands not yet on Bind (scale,
// label node, nodepool, upgrade and stress: pkg/plugin's TestEveryCommandIsBound lists
// them). Remove them once those are converted.

// Runner is the Validate and Run of a command still on RunMutation.
//
// Old path: remove with RunMutation.
type Runner interface {
	Validate() error
	Run(ctx context.Context) error
}

// RunMutation builds the clients (stored in *clients), completes m, validates o and
// runs it.
//
// Old path: use Bind, with Mutation.CompleteClients in the command's Complete.
func RunMutation(f Factory, cmd *cobra.Command, m *Mutation, clients **Clients, o Runner) error {
	c, err := m.CompleteClients(f, cmd)
	if err != nil {
		return err
	}
	*clients = c
	if err := o.Validate(); err != nil {
		return err
	}
	return o.Run(cmd.Context())
}

// RunE is a RunE that runs o's Complete, Validate and Run, without marking the command
// as bound.
//
// Old path: use Bind.
func RunE(f Factory, o Options) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(f, cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(cmd.Context())
	}
}
