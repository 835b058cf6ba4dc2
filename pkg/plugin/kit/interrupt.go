package kit

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/runwhere-ai/litepool/pkg/interrupt"
	"github.com/spf13/cobra"
)

// Interruption. The first SIGINT or SIGTERM cancels the command's context: the command
// stops what it was doing and runs its put-back (or leaves a state that resumes), with
// a context of its own (RollbackContext). A second signal exits at once with code 130,
// after printing what the command had left half-done and the commands that resume it or
// put it back (the command registers them with InFlight while it works).

// ExitInterrupted is the exit code of a command stopped by a second Ctrl-C (128+SIGINT).
const ExitInterrupted = 130

// Execute runs the root command with a context that the first SIGINT or SIGTERM
// cancels; a second one exits the process at once (see watchSignals).
func Execute(cmd *cobra.Command, errOut io.Writer) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	done := make(chan struct{})
	defer close(done)
	go watchSignals(sigs, done, cancel, errOut, os.Exit)
	return cmd.ExecuteContext(ctx)
}

// watchSignals cancels the command at the first signal and exits at the second,
// saying what was left.
func watchSignals(sigs <-chan os.Signal, done <-chan struct{}, cancel func(), errOut io.Writer, exit func(int)) {
	select {
	case <-sigs:
	case <-done:
		return
	}
	fmt.Fprintln(errOut, "interrupted: stopping and putting back what this command changed; press Ctrl-C again to exit at once")
	cancel()
	select {
	case <-sigs:
	case <-done:
		return
	}
	fmt.Fprintln(errOut, "interrupted again: exiting at once.")
	if left := interrupt.InFlight.Describe(); left != "" {
		fmt.Fprintln(errOut, left)
	}
	exit(ExitInterrupted)
}
