// Package health is `kubectl litepool health`: release a node the health loop holds
// out, hold one out by hand, and preview what the loop does next (docs/health.md).
package health

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/util/retry"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/templates"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	loop "github.com/runwhere-ai/litepool/pkg/health"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// NewCmdHealth is `kubectl litepool health`.
func NewCmdHealth(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Release, hold or preview nodes in a pool's health loop",
		Long: templates.LongDesc(`
			A pool with spec.health quarantines faulty members with the taint
			runwhere.ai/quarantine, re-checks them with the pool's stress test and
			returns them after a hold time. A node that flapped, failed its re-check or
			its remediation stays out until a person releases it here; a person can also
			hold a node out. These are orders in the Pool's spec (spec.health.hold and
			spec.health.release), a Pool editor's right; the Pool's status only reports
			what the controller did with them, and writing it orders nothing.`),
		Example: templates.Examples(`
			kubectl litepool health preview train-a100
			kubectl litepool health hold a100-node-3 --reason "fan noise"
			kubectl litepool health release a100-node-3`),
	}
	cmd.AddCommand(newCmdVerb(f, streams, verbRelease), newCmdVerb(f, streams, verbHold), newCmdPreview(f, streams))
	return cmd
}

const (
	verbRelease = "release"
	verbHold    = "hold"
)

// VerbOptions is `health release NODE` and `health hold NODE`.
type VerbOptions struct {
	Verb   string
	Node   string
	Reason string
	DryRun cmdutil.DryRunStrategy

	clients  *kit.Clients
	client   client.Client
	recorder *events.Recorder
	clock    func() metav1.Time
	genericiooptions.IOStreams
}

// newClient builds the controller-runtime client over kubectl's configuration; tests
// replace it.
var newClient = kit.ObjectClient

func newCmdVerb(f kit.Factory, streams genericiooptions.IOStreams, verb string) *cobra.Command {
	o := &VerbOptions{Verb: verb, IOStreams: streams}
	cmd := &cobra.Command{
		Use:   verb + " NODE",
		Args:  cobra.ExactArgs(1),
		Short: map[string]string{verbRelease: "Return a node the health loop holds out", verbHold: "Hold a node out of its pool until released by hand"}[verb],
		Long: templates.LongDesc(map[string]string{
			verbRelease: `
				Release a node the health loop holds out (quarantined, re-checking, holding,
				or held out after flapping, a failed re-check or remediation, or a hold by
				hand). The controller removes the taint runwhere.ai/quarantine and forgets
				the node's flap history. Writes spec.health.release of the node's Pool (and
				takes the node out of spec.health.hold): needs update on pools (ClusterRole
				litepool-health-operator).`,
			verbHold: `
				Hold a node out: the controller taints it runwhere.ai/quarantine and leaves
				it out until someone runs health release. Writes spec.health.hold of the
				node's Pool: needs update on pools.`,
		}[verb]),
		Example: templates.Examples(map[string]string{
			verbRelease: `kubectl litepool health release a100-node-3`,
			verbHold:    `kubectl litepool health hold a100-node-3 --reason "fan noise, ticket 4411"`,
		}[verb]),
		ValidArgsFunction: kit.CompleteNodeNames(f),
	}
	cmdutil.AddDryRunFlag(cmd)
	if verb == verbHold {
		cmd.Flags().StringVar(&o.Reason, "reason", "", "why the node is held out (shown in describe node and the Event)")
	}
	return kit.Bind(cmd, f, o)
}

// Complete reads the node and builds the clients.
func (o *VerbOptions) Complete(f kit.Factory, cmd *cobra.Command, args []string) (err error) {
	o.Node = args[0]
	if o.DryRun, err = cmdutil.GetDryRunStrategy(cmd); err != nil {
		return err
	}
	if o.clients, err = f.Clients(); err != nil {
		return err
	}
	if o.client, err = newClient(f); err != nil {
		return err
	}
	o.recorder = &events.Recorder{Client: o.clients.Kube, DryRun: o.DryRun != cmdutil.DryRunNone, Clock: f.Clock()}
	o.clock = func() metav1.Time { return metav1.NewTime(f.Clock().Now()) }
	return nil
}

// Validate has nothing to refuse before the cluster is read.
func (o *VerbOptions) Validate() error { return nil }

// Run writes the order into its Pool's spec.health, under optimistic concurrency.
func (o *VerbOptions) Run(ctx context.Context) error {
	node, err := o.clients.Kube.CoreV1().Nodes().Get(ctx, o.Node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	poolName := node.Labels[policy.LabelPool]
	if poolName == "" {
		return policy.Violationf("H1", "node %s belongs to no pool (no %s label): only a pool's health loop holds nodes out", o.Node, policy.LabelPool)
	}
	by := o.whoAmI(ctx)
	var pool v1alpha1.Pool
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := o.client.Get(ctx, client.ObjectKey{Name: poolName}, &pool); err != nil {
			return err
		}
		if pool.Spec.Health == nil {
			return policy.Violationf("H1", "pool %s has no spec.health: no controller loop would act on a %s; add spec.health (docs/health.md) first", poolName, o.Verb)
		}
		switch o.Verb {
		case verbRelease:
			if err := policy.CheckHealthRelease(entryOf(&pool, o.Node), node); err != nil {
				return err
			}
			release(pool.Spec.Health, o.Node, by, o.releaseTime(node))
		case verbHold:
			hold(pool.Spec.Health, v1alpha1.NodeHold{Node: o.Node, Reason: o.Reason, By: by})
		}
		opts := []client.UpdateOption{}
		switch o.DryRun {
		case cmdutil.DryRunClient:
			return nil
		case cmdutil.DryRunServer:
			opts = append(opts, client.DryRunAll)
		}
		return o.client.Update(ctx, &pool, opts...)
	})
	if err != nil {
		return err
	}
	suffix := map[cmdutil.DryRunStrategy]string{cmdutil.DryRunClient: " (dry run)", cmdutil.DryRunServer: " (server dry run)"}[o.DryRun]
	verb := map[string]string{verbRelease: "released", verbHold: "held out"}[o.Verb]
	msg := fmt.Sprintf("node %s %s by %s with kubectl litepool health %s", o.Node, verb, by, o.Verb)
	if o.Reason != "" {
		msg += ": " + o.Reason
	}
	reason := map[string]string{verbRelease: "HealthReleaseRequested", verbHold: "HealthHoldRequested"}[o.Verb]
	_ = o.recorder.Normal(ctx, events.NodeRef(node).About(events.PoolRef(poolName)), reason, "%s", msg)
	_, err = fmt.Fprintf(o.Out, "node/%s %s (pool %s; the controller applies it)%s\n", o.Node, verb, poolName, suffix)
	return err
}

func entryOf(p *v1alpha1.Pool, node string) *v1alpha1.NodeHealthStatus {
	for i := range p.Status.NodeHealth {
		if p.Status.NodeHealth[i].Node == node {
			return &p.Status.NodeHealth[i]
		}
	}
	return nil
}

// releaseTime is now, or the node's quarantine time if the cluster's clock is ahead of
// this one's: a release applies to a quarantine that began no later than it.
func (o *VerbOptions) releaseTime(node *corev1.Node) metav1.Time {
	at := o.clock()
	if t := policy.QuarantineTaintOf(node); t != nil && t.TimeAdded != nil && t.TimeAdded.After(at.Time) {
		at = *t.TimeAdded
	}
	return at
}

// hold puts h in spec.health.hold, replacing the node's earlier one.
func hold(h *v1alpha1.HealthPolicy, want v1alpha1.NodeHold) {
	for i := range h.Hold {
		if h.Hold[i].Node == want.Node {
			h.Hold[i] = want
			return
		}
	}
	h.Hold = append(h.Hold, want)
}

// release takes the node's hold out of spec.health and puts its release in, replacing
// the node's earlier one (at most one per node).
func release(h *v1alpha1.HealthPolicy, node, by string, at metav1.Time) {
	var holds []v1alpha1.NodeHold
	for _, x := range h.Hold {
		if x.Node != node {
			holds = append(holds, x)
		}
	}
	h.Hold = holds
	for i := range h.Release {
		if h.Release[i].Node == node {
			h.Release[i] = v1alpha1.NodeRelease{Node: node, At: at, By: by}
			return
		}
	}
	h.Release = append(h.Release, v1alpha1.NodeRelease{Node: node, At: at, By: by})
}

// whoAmI names the caller as the API server knows them (SelfSubjectReview).
func (o *VerbOptions) whoAmI(ctx context.Context) string {
	r, err := o.clients.Kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || r.Status.UserInfo.Username == "" {
		return "kubectl litepool"
	}
	return r.Status.UserInfo.Username
}

// PreviewOptions is `health preview POOL`.
type PreviewOptions struct {
	Pool string

	clients *kit.Clients
	client  client.Client
	now     func() metav1.Time
	genericiooptions.IOStreams
}

func newCmdPreview(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &PreviewOptions{IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "preview POOL",
		Args:  cobra.ExactArgs(1),
		Short: "Show each member's health state, signals and what the loop does next (a dry run)",
		Long: templates.LongDesc(`
			Run the pool's health loop once, in this process, without changing
			anything: for each member its state now, the signals seen, the state it
			would move to and the action the controller would take.`),
		Example:           templates.Examples(`kubectl litepool health preview train-a100`),
		ValidArgsFunction: kit.CompletePoolNames(f),
	}
	return kit.Bind(cmd, f, o)
}

// Complete builds the clients.
func (o *PreviewOptions) Complete(f kit.Factory, _ *cobra.Command, args []string) (err error) {
	o.Pool = args[0]
	if o.clients, err = f.Clients(); err != nil {
		return err
	}
	o.now = func() metav1.Time { return metav1.NewTime(f.Clock().Now()) }
	o.client, err = newClient(f)
	return err
}

// Validate has nothing to refuse before the cluster is read.
func (o *PreviewOptions) Validate() error { return nil }

// Run plans one pass of the loop and prints it.
func (o *PreviewOptions) Run(ctx context.Context) error {
	var pool v1alpha1.Pool
	if err := o.client.Get(ctx, client.ObjectKey{Name: o.Pool}, &pool); err != nil {
		return err
	}
	if pool.Spec.Health == nil {
		_, err := fmt.Fprintf(o.Out, "pool %s has no spec.health: the health loop is off\n", o.Pool)
		return err
	}
	var nodes corev1.NodeList
	if err := o.client.List(ctx, &nodes, client.MatchingLabels{policy.LabelPool: o.Pool}); err != nil {
		return err
	}
	steps, err := (&loop.Reconciler{Client: o.client, Kube: o.clients.Kube, Accelerators: o.clients.Accelerators,
		Now: func() time.Time { return o.now().Time }}).Plan(ctx, &pool, nodes.Items)
	if err != nil {
		return err
	}
	return PrintPreview(o.Out, steps)
}

// PrintPreview prints planned steps as a table.
func PrintPreview(out io.Writer, steps []loop.Step) error {
	w := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "NODE\tSTATE\tNEXT\tACTION\tSIGNALS")
	for _, st := range steps {
		next := "Healthy"
		if st.Entry != nil {
			next = string(st.Entry.State)
		}
		action := string(st.Action)
		if action == "" {
			action = "-"
		}
		var sig []string
		for _, s := range st.Signals {
			sig = append(sig, s.Reason)
		}
		signals := strings.Join(sig, ",")
		if signals == "" {
			signals = "<none>"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", st.Node, orHealthy(st.From), next, action, signals)
	}
	return w.Flush()
}

func orHealthy(s v1alpha1.NodeHealthState) string {
	if s == "" {
		return "Healthy"
	}
	return string(s)
}
