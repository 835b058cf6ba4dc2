// Package describe is `kubectl litepool describe pool|node`.
package describe

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// NewCmdDescribe is `kubectl litepool describe NOUN NAME`.
func NewCmdDescribe(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "Show details of a pool or a node",
		Long: templates.LongDesc(`
			Show the details of one pool (its policy, node pools, member nodes with
			their status, accelerator use, driver versions and recent events) or of one
			node (pool membership, status, accelerators, pods and events).`),
		Example: templates.Examples(`
			kubectl litepool describe pool train-a100
			kubectl litepool describe node a100-node-1`),
	}
	cmd.AddCommand(NewCmdDescribePool(f, streams), NewCmdDescribeNode(f, streams))
	return cmd
}

// Describer writes descriptions: it counts with the command's accelerator set and ages
// events from the command's clock.
type Describer struct {
	Accelerators policy.Accelerators
	Now          time.Time
	// DRA is the nodes' DRA devices (describe_dra.go), read before describing a node.
	DRA inventory.DRANodes
}

func newDescriber(f kit.Factory, c *kit.Clients) Describer {
	return Describer{Accelerators: c.Accelerators, Now: f.Clock().Now()}
}

// Options is what describe pool and describe node share: the names asked for, and
// how one is described.
type Options struct {
	Names []string

	clients   *kit.Clients
	describer Describer
	genericiooptions.IOStreams
}

// Complete reads the names and builds the clients.
func (o *Options) Complete(f kit.Factory, _ *cobra.Command, args []string) error {
	o.Names = args
	c, err := f.Clients()
	if err != nil {
		return err
	}
	o.clients, o.describer = c, newDescriber(f, c)
	return nil
}

// Validate has nothing to check: cobra has checked that names were given.
func (o *Options) Validate() error { return nil }

// each describes each name in turn, a blank line apart, stopping at the first error.
func (o *Options) each(ctx context.Context, describe func(ctx context.Context, name string) error) error {
	for i, name := range o.Names {
		if i > 0 {
			fmt.Fprintln(o.Out)
		}
		if err := describe(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// Indentation levels of describe output.
const (
	level0 = iota
	level1
)

// prefixWriter writes describe output at indentation levels, as kubectl describe's
// PrefixWriter does (that package would pull half of kubectl into the plugin).
type prefixWriter struct{ out *tabwriter.Writer }

func (w prefixWriter) Write(level int, format string, a ...any) {
	fmt.Fprintf(w.out, strings.Repeat("  ", level)+format, a...)
}

// Flush ends a block of aligned columns: a nested table is aligned on its own.
func (w prefixWriter) Flush() { _ = w.out.Flush() }

// tabbed renders describe output through a tabwriter, as kubectl describe does.
func tabbed(out io.Writer, fn func(w prefixWriter)) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 8, 2, ' ', 0)
	fn(prefixWriter{tw})
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := out.Write(buf.Bytes())
	return err
}

// writeMap writes "k=v" lines, the first after the title, as kubectl describe writes
// labels.
func writeMap(w prefixWriter, title string, m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lines := make([]string, len(keys))
	for i, k := range keys {
		lines[i] = k + "=" + m[k]
	}
	writeLines(w, title, lines)
}

// writeLines writes a title and values, one per line, aligned; <none> when empty.
func writeLines(w prefixWriter, title string, lines []string) {
	if len(lines) == 0 {
		w.Write(level0, "%s:\t<none>\n", title)
		return
	}
	w.Write(level0, "%s:\t%s\n", title, lines[0])
	for _, l := range lines[1:] {
		w.Write(level0, "\t%s\n", l)
	}
}

// nodeEvents lists the events about one node, as kubectl describe node finds them.
func nodeEvents(ctx context.Context, c *kit.Clients, node *corev1.Node) (*corev1.EventList, error) {
	return listEvents(ctx, c, fields.Set{"involvedObject.kind": "Node", "involvedObject.name": node.Name})
}

// poolEvents lists the events about a pool: those on the Pool object and those litepool
// recorded on nodes with the pool as the related object (nodes that joined or left it).
func poolEvents(ctx context.Context, c *kit.Clients, pool string) (*corev1.EventList, error) {
	out, err := listEvents(ctx, c, fields.Set{"involvedObject.kind": "Pool", "involvedObject.name": pool})
	if err != nil {
		return nil, err
	}
	ours, err := listEvents(ctx, c, fields.Set{"source": events.Component, "involvedObject.kind": "Node"})
	if err != nil {
		return nil, err
	}
	for _, e := range ours.Items {
		if r := e.Related; r != nil && r.Kind == "Pool" && r.Name == pool {
			out.Items = append(out.Items, e)
		}
	}
	return out, nil
}

// listEvents lists the events whose fields are set, with the server's field selector,
// and keeps only those that match it (so that the answer holds whatever the client).
func listEvents(ctx context.Context, c *kit.Clients, set fields.Set) (*corev1.EventList, error) {
	sel := set.AsSelector()
	list, err := c.Kube.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	kept := list.Items[:0]
	for _, e := range list.Items {
		if sel.Matches(fields.Set{"involvedObject.kind": e.InvolvedObject.Kind, "involvedObject.name": e.InvolvedObject.Name, "source": e.Source.Component}) {
			kept = append(kept, e)
		}
	}
	list.Items = kept
	return list, nil
}

// describeEvents writes events (oldest first) with the involved object in the message
// when it is not the described object itself.
func describeEvents(w prefixWriter, list *corev1.EventList, self string, now time.Time) {
	for i := range list.Items {
		e := &list.Items[i]
		if e.InvolvedObject.Name != self {
			e.Message = fmt.Sprintf("%s/%s: %s", strings.ToLower(e.InvolvedObject.Kind), e.InvolvedObject.Name, e.Message)
		}
	}
	writeEvents(w, list, now)
}

// writeEvents writes events oldest first in kubectl describe's layout.
func writeEvents(w prefixWriter, list *corev1.EventList, now time.Time) {
	w.Flush()
	if len(list.Items) == 0 {
		w.Write(level0, "Events:\t<none>\n")
		return
	}
	items := append([]corev1.Event(nil), list.Items...)
	sort.SliceStable(items, func(i, j int) bool { return eventTime(&items[i]).Before(eventTime(&items[j])) })
	w.Write(level0, "Events:\n  Type\tReason\tAge\tFrom\tMessage\n")
	w.Write(level1, "----\t------\t----\t----\t-------\n")
	for i := range items {
		e := &items[i]
		age := duration.HumanDuration(now.Sub(eventTime(e)))
		if e.Count > 1 {
			age = fmt.Sprintf("%s (x%d over %s)", duration.HumanDuration(now.Sub(e.LastTimestamp.Time)), e.Count,
				duration.HumanDuration(now.Sub(e.FirstTimestamp.Time)))
		}
		from := e.Source.Component
		if from == "" {
			from = e.ReportingController
		}
		w.Write(level1, "%s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, age, from, strings.TrimSpace(e.Message))
	}
}

func eventTime(e *corev1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	return e.FirstTimestamp.Time
}
