package kit

import (
	"context"

	"github.com/spf13/cobra"
)

// Runner is a command's options once read from its arguments: kubectl's Validate, then
// Run.
type Runner interface {
	Validate() error
	Run(ctx context.Context) error
}

// RunMutation is what every mutating command's RunE does once it has read its
// arguments: build the clients (stored in *clients), complete m (--dry-run, the event
// recorder), validate o (with m's -o) and run it.
func RunMutation(f Factory, cmd *cobra.Command, m *Mutation, clients **Clients, o Runner) error {
	return run(f, cmd, clients, o, func(c *Clients) error { return m.Complete(cmd, c) })
}

// Run is what a command that changes nothing does once it has read its arguments:
// build the clients (stored in *clients), validate o and run it.
func Run(f Factory, cmd *cobra.Command, clients **Clients, o Runner) error {
	return run(f, cmd, clients, o, func(*Clients) error { return nil })
}

func run(f Factory, cmd *cobra.Command, clients **Clients, o Runner, complete func(*Clients) error) error {
	c, err := f.Clients()
	if err != nil {
		return err
	}
	*clients = c
	if err := complete(c); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}
	return o.Run(cmd.Context())
}

// Completer is kubectl's Options shape: Complete reads the flags, arguments and
// clients, then Validate and Run.
type Completer interface {
	Complete(f Factory, cmd *cobra.Command, args []string) error
	Runner
}

// RunE is kubectl's RunE for o: Complete, Validate, Run.
func RunE(f Factory, o Completer) func(*cobra.Command, []string) error {
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
