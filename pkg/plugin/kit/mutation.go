package kit

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/nodeops"
)

// Mutation is what every mutating command shares: --dry-run, -o (kubectl's PrintFlags:
// the default prints "kind/name operation", -o name|json|yaml|jsonpath the object as
// written), the event recorder (off under dry run) and, for risky commands, --yes.
type Mutation struct {
	DryRun cmdutil.DryRunStrategy
	Yes    bool

	PrintFlags *genericclioptions.PrintFlags
	Recorder   *events.Recorder
}

// NewMutation returns a Mutation whose printer knows the core types and Pool.
func NewMutation() Mutation {
	return Mutation{PrintFlags: genericclioptions.NewPrintFlags("").WithTypeSetter(Scheme)}
}

// AddFlags adds --dry-run and -o (and --yes with yes).
func (m *Mutation) AddFlags(cmd *cobra.Command, yes bool) {
	cmdutil.AddDryRunFlag(cmd)
	if m.PrintFlags == nil {
		m.PrintFlags = NewMutation().PrintFlags
	}
	m.PrintFlags.AddFlags(cmd)
	if yes {
		m.AddYesFlag(cmd)
	}
}

// CompleteClients is a mutating command's part of Complete: it builds the clients, reads
// --dry-run and sets up the event recorder (on the Factory's clock), and returns the
// clients for the command to keep.
func (m *Mutation) CompleteClients(f Factory, cmd *cobra.Command) (*Clients, error) {
	c, err := f.Clients()
	if err != nil {
		return nil, err
	}
	if m.DryRun, err = cmdutil.GetDryRunStrategy(cmd); err != nil {
		return nil, err
	}
	m.Recorder = &events.Recorder{Client: c.Kube, DryRun: m.DryRun != cmdutil.DryRunNone, Clock: f.Clock()}
	return c, nil
}

// Validate checks -o.
func (m *Mutation) Validate() error {
	_, err := m.ToPrinter("")
	return err
}

// Suffix is what kubectl appends to its messages under --dry-run.
func (m *Mutation) Suffix() string { return DryRunSuffix(m.DryRun) }

// DryRunSuffix is what kubectl appends to its messages under a dry-run strategy.
func DryRunSuffix(s cmdutil.DryRunStrategy) string {
	switch s {
	case cmdutil.DryRunClient:
		return " (dry run)"
	case cmdutil.DryRunServer:
		return " (server dry run)"
	}
	return ""
}

// Output is the -o format given; "" for the default "kind/name operation" lines.
func (m *Mutation) Output() string {
	if m.PrintFlags == nil || m.PrintFlags.OutputFormat == nil {
		return ""
	}
	return *m.PrintFlags.OutputFormat
}

// ToPrinter is the printer of one operation, as kubectl's commands build it: by
// default "kind/name operation" with the dry-run suffix; with -o name, "kind/name";
// with -o json|yaml|jsonpath, the object as written (as it would be under dry run).
func (m *Mutation) ToPrinter(operation string) (printers.ResourcePrinter, error) {
	if m.PrintFlags == nil {
		m.PrintFlags = NewMutation().PrintFlags
	}
	m.PrintFlags.NamePrintFlags.Operation = operation + m.Suffix()
	return m.PrintFlags.ToPrinter()
}

// Print prints obj with ToPrinter(operation).
func (m *Mutation) Print(out io.Writer, obj runtime.Object, operation string) error {
	p, err := m.ToPrinter(operation)
	if err != nil {
		return err
	}
	return p.PrintObj(obj, out)
}

// Say prints a line that describes no single object (a plan, a progress line): on out
// in the default format, on errOut under -o so that stdout stays parseable.
func (m *Mutation) Say(streams genericiooptions.IOStreams, format string, args ...any) {
	w := streams.Out
	if m.Output() != "" {
		w = streams.ErrOut
	}
	fmt.Fprintf(w, format, args...)
}

// ServerDryRun is the DryRun field of write options.
func (m *Mutation) ServerDryRun() []string { return nodeops.ServerDryRun(m.DryRun) }

// NodeEvent records an event on a node; a failure to record never stops an operation.
func (m *Mutation) NodeEvent(ctx context.Context, node *corev1.Node, warning bool, reason, format string, args ...any) {
	m.Event(ctx, nodeRef(node), warning, reason, format, args...)
}

// Event records an event; a failure to record never stops an operation.
func (m *Mutation) Event(ctx context.Context, ref *events.Ref, warning bool, reason, format string, args ...any) {
	if m.Recorder == nil || ref == nil {
		return
	}
	if warning {
		_ = m.Recorder.Warning(ctx, *ref, reason, format, args...)
		return
	}
	_ = m.Recorder.Normal(ctx, *ref, reason, format, args...)
}

func nodeRef(node *corev1.Node) *events.Ref {
	if node == nil {
		return nil
	}
	ref := events.NodeRef(node)
	return &ref
}

// Risk describes a risky operation for the confirmation prompt, as the console of a
// managed AI platform shows it: risk level, what happens, and what to do first.
type Risk struct {
	Level      string // "critical" or "high"
	Operation  string
	Impact     []string
	Precaution []string
}

// Confirm prints the risk and asks for confirmation on the command's input: a
// critical operation wants the object's name typed back, a high one "yes". --yes skips
// the prompt (and dry runs need none, as they change nothing).
func (m *Mutation) Confirm(streams genericiooptions.IOStreams, r Risk, name string) error {
	if m.Yes || m.DryRun != cmdutil.DryRunNone {
		return nil
	}
	w := streams.ErrOut
	fmt.Fprintf(w, "Risk: %s: %s\n", r.Level, r.Operation)
	for _, s := range r.Impact {
		fmt.Fprintf(w, "  Impact: %s\n", s)
	}
	for _, s := range r.Precaution {
		fmt.Fprintf(w, "  Precaution: %s\n", s)
	}
	want := "yes"
	if r.Level == "critical" {
		want = name
		fmt.Fprintf(w, "Type the name %q to confirm: ", name)
	} else {
		fmt.Fprint(w, "Type \"yes\" to confirm: ")
	}
	answer, err := readLine(streams.In)
	fmt.Fprintln(w)
	if err != nil && answer == "" {
		return fmt.Errorf("%s: not confirmed (no answer on standard input); nothing was changed; pass --yes to skip the prompt", r.Operation)
	}
	if answer != want {
		return fmt.Errorf("%s: not confirmed (typed %q, expected %q); nothing was changed", r.Operation, answer, want)
	}
	return nil
}

func readLine(in io.Reader) (string, error) {
	if in == nil {
		return "", io.EOF
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	return strings.TrimSpace(line), err
}

// AddYesFlag adds --yes, which skips the confirmation prompt of a risky command.
func (m *Mutation) AddYesFlag(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&m.Yes, "yes", "y", false, "Skip the confirmation prompt")
}

// Printer prints through a Mutation on streams: what the workflows (pkg/scale,
// pkg/poolcreate) report to.
type Printer struct {
	*Mutation
	genericiooptions.IOStreams
}

// Print prints obj and what happened to it (see Mutation.Print).
func (p Printer) Print(obj runtime.Object, operation string) error {
	return p.Mutation.Print(p.Out, obj, operation)
}

// Say prints a line about no single object (see Mutation.Say).
func (p Printer) Say(format string, args ...any) { p.Mutation.Say(p.IOStreams, format, args...) }
