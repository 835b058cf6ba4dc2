package plugin

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/nodeops"
)

// dryRunSuffix is what kubectl appends to its messages under --dry-run.
func dryRunSuffix(s cmdutil.DryRunStrategy) string {
	switch s {
	case cmdutil.DryRunClient:
		return " (dry run)"
	case cmdutil.DryRunServer:
		return " (server dry run)"
	}
	return ""
}

// getOpts are plain get options.
var getOpts = metav1.GetOptions{}

// serverDryRun is the DryRun field of write options.
func serverDryRun(s cmdutil.DryRunStrategy) []string {
	if s == cmdutil.DryRunServer {
		return []string{metav1.DryRunAll}
	}
	return nil
}

// Mutation holds what every mutating command shares: --dry-run and its output suffix,
// the event recorder (off under dry run) and, for risky commands, --yes.
type Mutation struct {
	DryRun cmdutil.DryRunStrategy
	Yes    bool

	recorder *events.Recorder
}

func addDryRunFlag(cmd *cobra.Command) { cmdutil.AddDryRunFlag(cmd) }

func addYesFlag(cmd *cobra.Command, m *Mutation) {
	cmd.Flags().BoolVarP(&m.Yes, "yes", "y", false, "Skip the confirmation prompt")
}

// complete reads --dry-run and sets up the event recorder.
func (m *Mutation) complete(cmd *cobra.Command, c *clients) (err error) {
	m.DryRun, err = cmdutil.GetDryRunStrategy(cmd)
	if err != nil {
		return err
	}
	m.recorder = &events.Recorder{Client: c.kube, DryRun: m.DryRun != cmdutil.DryRunNone}
	return nil
}

func (m *Mutation) suffix() string { return dryRunSuffix(m.DryRun) }

// nodeEvent records an event on a node; a failure to record never stops an operation.
func (m *Mutation) nodeEvent(ctx context.Context, node *corev1.Node, warning bool, reason, format string, args ...any) {
	if m.recorder == nil || node == nil {
		return
	}
	ref := events.NodeRef(node)
	if warning {
		_ = m.recorder.Warning(ctx, ref, reason, format, args...)
		return
	}
	_ = m.recorder.Normal(ctx, ref, reason, format, args...)
}

// updateNode reads a node, lets change modify it and writes it back if anything
// changed, retrying on conflicts. It returns the node as written (as it would be under
// client dry run) and whether it changed. change may refuse by returning an error.
func updateNode(ctx context.Context, c *clients, name string, dryRun cmdutil.DryRunStrategy, change func(*corev1.Node) error) (*corev1.Node, bool, error) {
	var out *corev1.Node
	var changed bool
	err := nodeops.RetryOnConflict(func() error { // not retry.RetryOnConflict: it hides a cancelled context
		node, err := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		updated := node.DeepCopy()
		if err := change(updated); err != nil {
			return err
		}
		changed = !sameNode(node, updated)
		out = updated
		if !changed || dryRun == cmdutil.DryRunClient {
			return nil
		}
		out, err = c.kube.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{DryRun: serverDryRun(dryRun)})
		return err
	})
	return out, changed, err
}

// sameNode compares what litepool changes on nodes.
func sameNode(a, b *corev1.Node) bool {
	return equalMaps(a.Labels, b.Labels) && equalMaps(a.Annotations, b.Annotations) &&
		a.Spec.Unschedulable == b.Spec.Unschedulable && reflect.DeepEqual(normTaints(a.Spec.Taints), normTaints(b.Spec.Taints))
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func normTaints(t []corev1.Taint) []corev1.Taint {
	if len(t) == 0 {
		return nil
	}
	return t
}

// Risk describes a risky operation for the confirmation prompt, as the console of a
// managed AI platform shows it: risk level, what happens, and what to do first.
type Risk struct {
	Level      string // "critical" or "high"
	Operation  string
	Impact     []string
	Precaution []string
}

// confirm prints the risk and asks for confirmation on the command's input: a
// critical operation wants the object's name typed back, a high one "yes". --yes skips
// the prompt (and dry runs need none, as they change nothing).
func confirm(streams genericiooptions.IOStreams, m *Mutation, r Risk, name string) error {
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
