package upgrade

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/interrupt"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
)

// upgradeScope is --pool or --node of status, resume and abort.
type upgradeScope struct {
	Pool, Node string
}

func (s *upgradeScope) addFlags(cmd *cobra.Command, f kit.Factory) {
	cmd.Flags().StringVar(&s.Pool, "pool", "", "The pool's rollout")
	cmd.Flags().StringVar(&s.Node, "node", "", "The node's upgrade")
	_ = cmd.RegisterFlagCompletionFunc("pool", kit.CompletePoolNames(f))
}

func (s *upgradeScope) validate(required bool) error {
	if s.Pool != "" && s.Node != "" {
		return fmt.Errorf("give one of --pool or --node, not both")
	}
	if required && s.Pool == "" && s.Node == "" {
		return fmt.Errorf("give --pool POOL or --node NODE")
	}
	return nil
}

// nodes returns the nodes in scope that carry an upgrade state: a pool's members, one
// node, or (no scope) every node of the cluster.
func (s *upgradeScope) nodes(ctx context.Context, c *kit.Clients) ([]corev1.Node, error) {
	var items []corev1.Node
	switch {
	case s.Node != "":
		n, err := c.Kube.CoreV1().Nodes().Get(ctx, s.Node, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		items = []corev1.Node{*n}
	default:
		opts := metav1.ListOptions{}
		if s.Pool != "" {
			opts.LabelSelector = labels.Set{policy.LabelPool: s.Pool}.String()
		}
		list, err := c.Kube.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return nil, err
		}
		items = list.Items
	}
	var out []corev1.Node
	for _, n := range items {
		if n.Annotations[policy.AnnotationUpgradeState] != "" {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *upgradeScope) String() string { return s.named("pool ", "node ", "the cluster") }

// flag is the scope as the flag that names it ("--pool P", "--node N", or nothing).
func (s *upgradeScope) flag() string { return s.named("--pool ", "--node ", "") }

func (s *upgradeScope) named(pool, node, none string) string {
	switch {
	case s.Pool != "":
		return pool + s.Pool
	case s.Node != "":
		return node + s.Node
	}
	return none
}

// ---- status ----

// UpgradeStatusOptions is `upgrade status`.
type UpgradeStatusOptions struct {
	Scope   upgradeScope
	Output  *kit.DataOutput
	Watch   bool
	clients *kit.Clients
	genericiooptions.IOStreams
}

// NewCmdUpgradeStatus is `kubectl litepool upgrade status`.
func NewCmdUpgradeStatus(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradeStatusOptions{IOStreams: streams, Output: kit.NewDataOutput()}
	cmd := &cobra.Command{
		Use:   "status [--pool POOL | --node NODE] [-o json|yaml|jsonpath=...]",
		Short: "Show each node's driver-upgrade state and the rollout's progress",
		Long: templates.LongDesc(`
			Show the driver-upgrade state of every node that has one (of a pool, one
			node, or the whole cluster), read from the nodes' runwhere.ai/ annotations:
			state, target version, the driver version the node reports now, whether it
			is cordoned, and the last step's message; then each rollout's progress.`),
		Example: templates.Examples(`
			# Every node with an upgrade state
			kubectl litepool upgrade status

			# One pool's rollout
			kubectl litepool upgrade status --pool train-snt9b

			# Follow a rollout (one handed to the cluster, or another operator's) until it ends
			kubectl litepool upgrade status --pool train-snt9b -w

			# As data, for scripts
			kubectl litepool upgrade status --pool train-snt9b -o json`),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("upgrade status takes no arguments: use --pool or --node")
			}
			if err := o.Scope.validate(false); err != nil {
				return err
			}
			if err := o.Output.Validate(); err != nil {
				return err
			}
			if o.Watch && o.Output.Data() {
				return fmt.Errorf("--watch prints progress lines: it does not go with -o %s", o.Output.Format)
			}
			var err error
			if o.clients, err = f.Clients(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	o.Scope.addFlags(cmd, f)
	o.Output.AddFlags(cmd)
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", false, "After the table, print each rollout's progress line whenever it changes, until no rollout is in progress")
	return cmd
}

// UpgradeNodeStatus is one node in `upgrade status`.
type UpgradeNodeStatus struct {
	Node     string `json:"node"`
	Pool     string `json:"pool,omitempty"`
	State    string `json:"state"`
	Target   string `json:"target,omitempty"`
	Driver   string `json:"driver,omitempty"`
	Cordoned bool   `json:"cordoned"`
	Message  string `json:"message,omitempty"`
	Rollout  string `json:"rollout,omitempty"`
}

// UpgradeRolloutStatus is one rollout's progress.
type UpgradeRolloutStatus struct {
	ID         string `json:"id"`
	Pool       string `json:"pool,omitempty"`
	Target     string `json:"target"`
	Phase      string `json:"phase"`
	Total      int    `json:"total"`
	Done       int    `json:"done"`
	InProgress int    `json:"inProgress"`
	Pending    int    `json:"pending"`
	Failed     int    `json:"failed"`
}

// UpgradeStatus is what `upgrade status -o json|yaml` prints.
type UpgradeStatus struct {
	Nodes    []UpgradeNodeStatus    `json:"nodes"`
	Rollouts []UpgradeRolloutStatus `json:"rollouts"`
}

func upgradeStatusOf(nodes []corev1.Node) UpgradeStatus {
	var st UpgradeStatus
	runs := map[string]*UpgradeRolloutStatus{}
	for i := range nodes {
		n := &nodes[i]
		state := policy.UpgradeState(n.Annotations[policy.AnnotationUpgradeState])
		ns := UpgradeNodeStatus{Node: n.Name, Pool: n.Labels[policy.LabelPool], State: string(state),
			Target: n.Annotations[policy.AnnotationUpgradeTarget], Driver: policy.DriverVersion(n), Cordoned: n.Spec.Unschedulable,
			Message: n.Annotations[policy.AnnotationUpgradeMessage]}
		run, err := policy.DecodeUpgradeRun(n.Annotations[policy.AnnotationUpgradeRun])
		if err == nil {
			ns.Rollout = run.ID
			p := runs[run.ID]
			if p == nil {
				st.Rollouts = append(st.Rollouts, UpgradeRolloutStatus{ID: run.ID, Pool: run.Pool, Target: run.Target})
				p = &st.Rollouts[len(st.Rollouts)-1]
				runs[run.ID] = p
			}
			p.Total++
			switch {
			case state == policy.UpgradeDone:
				p.Done++
			case state == policy.UpgradeFailed:
				p.Failed++
			case policy.UpgradeStarted(state):
				p.InProgress++
			default:
				p.Pending++
			}
		}
		st.Nodes = append(st.Nodes, ns)
	}
	for i := range st.Rollouts {
		p := &st.Rollouts[i]
		switch {
		case p.Failed > 0:
			p.Phase = "stopped on failure"
		case p.Done == p.Total:
			p.Phase = "complete"
		default:
			p.Phase = "in progress"
		}
	}
	return st
}

// Run prints the table and the progress.
func (o *UpgradeStatusOptions) Run(ctx context.Context) error {
	nodes, err := o.Scope.nodes(ctx, o.clients)
	if err != nil {
		return err
	}
	st := upgradeStatusOf(nodes)
	if o.Output.Data() {
		return o.Output.Print(o.Out, st)
	}
	if len(nodes) == 0 {
		fmt.Fprintf(o.Out, "no driver upgrade in %s\n", o.Scope.String())
		return nil
	}
	w := printers.GetNewTabWriter(o.Out)
	fmt.Fprintln(w, "NODE\tPOOL\tSTATE\tTARGET\tDRIVER\tCORDONED\tMESSAGE")
	for _, n := range st.Nodes {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%t\t%s\n", n.Node, kit.None(n.Pool), n.State, kit.None(n.Target), kit.None(n.Driver), n.Cordoned, kit.None(n.Message))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, p := range st.Rollouts {
		fmt.Fprintln(o.Out, rolloutLine(p))
	}
	if o.Watch {
		return o.watch(ctx, st)
	}
	return nil
}

// rolloutLine is a rollout's progress line.
func rolloutLine(p UpgradeRolloutStatus) string {
	scope := "nodes"
	if p.Pool != "" {
		scope = "pool " + p.Pool
	}
	return fmt.Sprintf("rollout %s (%s → %s): %s: %d/%d done (%d%%), %d in progress, %d pending, %d failed",
		p.ID, scope, p.Target, p.Phase, p.Done, p.Total, p.Done*100/p.Total, p.InProgress, p.Pending, p.Failed)
}

// scopedMutation is what resume and abort share: a scope and the kit's mutation flags.
type scopedMutation struct {
	Scope upgradeScope
	kit.Mutation
	clients *kit.Clients
	genericiooptions.IOStreams
}

func newScopedMutation(streams genericiooptions.IOStreams) scopedMutation {
	return scopedMutation{Mutation: kit.NewMutation(), IOStreams: streams}
}

func (s *scopedMutation) addFlags(cmd *cobra.Command, f kit.Factory) {
	s.Scope.addFlags(cmd, f)
	s.Mutation.AddFlags(cmd, false)
}

// complete checks the scope, builds the clients and reads --dry-run and -o.
func (s *scopedMutation) complete(f kit.Factory, cmd *cobra.Command, args []string) (err error) {
	if len(args) > 0 {
		return fmt.Errorf("%s %s takes no arguments: use --pool or --node", cmd.Parent().Name(), cmd.Name())
	}
	if err := s.Scope.validate(true); err != nil {
		return err
	}
	s.clients, err = completeMutation(f, cmd, &s.Mutation)
	return err
}

// ---- resume ----

// UpgradeResumeOptions is `upgrade resume`.
type UpgradeResumeOptions struct {
	scopedMutation
	RetryFailed    bool
	MaxUnavailable string
}

// NewCmdUpgradeResume is `kubectl litepool upgrade resume`.
func NewCmdUpgradeResume(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradeResumeOptions{scopedMutation: newScopedMutation(streams)}
	cmd := &cobra.Command{
		Use:   "resume (--pool POOL | --node NODE) [--retry-failed]",
		Short: "Continue an interrupted driver upgrade from the state stored in the cluster",
		Long: templates.LongDesc(`
			Continue a driver upgrade whose plugin stopped (killed, lost its
			connection, or stopped on a failure) from the state stored in the nodes'
			annotations, with the parameters the rollout started with. Nodes already
			done are never touched again; nodes in the middle of a step repeat that
			step (every step is safe to repeat); then the remaining waves run.

			A failed node stops the rollout. Once it is fixed, --retry-failed marks it
			upgrade-required again (its installer Job is deleted and runs afresh).

			--max-unavailable replaces the rollout's budget for this resume, for
			example when nodes cordoned by someone else take all of it.`),
		Example: templates.Examples(`
			# Continue a pool's rollout
			kubectl litepool upgrade resume --pool train-snt9b

			# Retry the failed node and continue
			kubectl litepool upgrade resume --pool train-snt9b --retry-failed

			# Continue with a larger budget
			kubectl litepool upgrade resume --pool train-snt9b --max-unavailable 2

			# What would resume do?
			kubectl litepool upgrade resume --pool train-snt9b --dry-run=client`),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.MaxUnavailable != "" {
				if _, err := policy.ParseMaxUnavailable(o.MaxUnavailable); err != nil {
					return err
				}
			}
			if err := o.complete(f, cmd, args); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	o.addFlags(cmd, f)
	cmd.Flags().BoolVar(&o.RetryFailed, "retry-failed", false, "Mark failed nodes upgrade-required again and retry them")
	cmd.Flags().StringVar(&o.MaxUnavailable, "max-unavailable", "", "Replace the rollout's max-unavailable for this resume (a count or a percentage)")
	return cmd
}

// Run resumes.
func (o *UpgradeResumeOptions) Run(ctx context.Context) error {
	nodes, err := o.Scope.nodes(ctx, o.clients)
	if err != nil {
		return err
	}
	var run *policy.UpgradeRun
	var unfinished, failed []*corev1.Node
	for i := range nodes {
		n := &nodes[i]
		state := policy.UpgradeState(n.Annotations[policy.AnnotationUpgradeState])
		if state == policy.UpgradeDone {
			continue
		}
		r, err := policy.DecodeUpgradeRun(n.Annotations[policy.AnnotationUpgradeRun])
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		if run != nil && run.ID != r.ID {
			return policy.Violationf("U3", "%s has nodes of two rollouts (%s and %s): resume them one node at a time with --node", o.Scope.String(), run.ID, r.ID)
		}
		run = &r
		unfinished = append(unfinished, n)
		if state == policy.UpgradeFailed {
			failed = append(failed, n)
		}
	}
	if run == nil {
		o.Say(o.IOStreams, "nothing to resume in %s: no unfinished driver upgrade\n", o.Scope.String())
		return nil
	}
	if o.Scope.Node != "" && run.Pool != "" {
		return fmt.Errorf("node %s belongs to pool %s's rollout %s: resume it with --pool %s, so that max-unavailable holds", o.Scope.Node, run.Pool, run.ID, run.Pool)
	}
	if o.MaxUnavailable != "" {
		if run.Pool == "" {
			return fmt.Errorf("--max-unavailable applies to a pool rollout; rollout %s upgrades single nodes", run.ID)
		}
		if run.InCluster {
			return fmt.Errorf("[U3] rollout %s is driven by the controller in litepool-webhook with the budget it started with: abort it and start it again with --max-unavailable", run.ID)
		}
		run.MaxUnavailable = o.MaxUnavailable
	}
	u := &upgrade.Upgrader{Kube: o.clients.Kube, Recorder: o.Recorder, Progress: o.SayTo(o.IOStreams)}
	if len(failed) > 0 && o.RetryFailed && o.DryRun != cmdutil.DryRunNone {
		for _, n := range failed {
			o.Say(o.IOStreams, "would retry node %s (failed: %s)\n", n.Name, n.Annotations[policy.AnnotationUpgradeMessage])
		}
		failed = nil
	}
	if len(failed) > 0 {
		if !o.RetryFailed {
			var names []string
			for _, n := range failed {
				names = append(names, fmt.Sprintf("%s (%s)", n.Name, n.Annotations[policy.AnnotationUpgradeMessage]))
			}
			return policy.Violationf("U4", "rollout %s stopped on failed node(s) %s: fix them, then resume with --retry-failed", run.ID, strings.Join(names, "; "))
		}
		for _, n := range failed {
			if err := u.Retry(ctx, *run, n); err != nil {
				return fmt.Errorf("re-marking node %s: %w", n.Name, err)
			}
			o.Say(o.IOStreams, "node/%s: failed → upgrade-required (retry)\n", n.Name)
			if err := printNodes(ctx, &o.Mutation, o.clients, o.Out, []string{n.Name}, "retried", nil); err != nil {
				return err
			}
		}
	}
	var scope []string
	for _, n := range unfinished {
		scope = append(scope, n.Name)
	}
	if o.DryRun != cmdutil.DryRunNone {
		return o.printPlan(ctx, u, *run, scope)
	}
	if run.InCluster {
		o.Say(o.IOStreams, "rollout %s (%s → %s): %d node(s) unfinished; the controller in litepool-webhook drives it: follow it with `kubectl litepool upgrade status %s -w`\n",
			run.ID, o.Scope.String(), run.Target, len(unfinished), o.Scope.flag())
		return nil
	}
	o.Say(o.IOStreams, "resuming rollout %s (%s → %s): %d node(s) unfinished\n", run.ID, o.Scope.String(), run.Target, len(unfinished))
	return followRollout(ctx, u, *run, scope)
}

// followRollout runs a rollout; interrupted, it says how to resume or stop it (its
// state lives in the nodes' annotations, so nothing is lost).
func followRollout(ctx context.Context, u *upgrade.Upgrader, run policy.UpgradeRun, scope []string) error {
	interrupt.InFlight.Set(func() string { return rolloutLeftovers(run, scope) })
	defer interrupt.InFlight.Clear()
	err := u.Rollout(ctx, run, scope)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("rollout %s interrupted; %s", run.ID, rolloutLeftovers(run, scope))
	}
	return err
}

// rolloutLeftovers says what an interrupted rollout leaves and how to go on.
func rolloutLeftovers(run policy.UpgradeRun, scope []string) string {
	flag := "--pool " + run.Pool
	if run.Pool == "" {
		flag = "--node " + strings.Join(scope, ",")
	}
	return fmt.Sprintf("rollout %s stopped half-way: each node keeps its upgrade state (%s), and a node in the middle of its upgrade stays cordoned.\nResume it:\n  kubectl litepool upgrade resume %s\nOr stop it (nodes that have not started are unmarked, started ones finish or stay as they are):\n  kubectl litepool upgrade abort %s",
		run.ID, policy.AnnotationUpgradeState, flag, flag)
}

// printPlan shows what resume would do: the nodes it finishes, then the waves.
func (o *UpgradeResumeOptions) printPlan(ctx context.Context, u *upgrade.Upgrader, run policy.UpgradeRun, scope []string) error {
	snap, err := u.Snapshot(ctx, run, scope)
	if err != nil {
		return err
	}
	maxU := 1
	if run.MaxUnavailable != "" {
		v, _ := policy.ParseMaxUnavailable(run.MaxUnavailable)
		maxU = policy.MaxUnavailableNodes(v, len(snap.Nodes))
	}
	for i := range snap.Nodes {
		if snap.Nodes[i].State == policy.UpgradeFailed && o.RetryFailed {
			snap.Nodes[i].State = policy.UpgradeRequired
		}
	}
	waves, waiting := policy.PredictUpgradeWaves(snap.Nodes, maxU, run.Canary)
	o.Say(o.IOStreams, "would resume rollout %s (%s → %s), max unavailable %d:\n", run.ID, o.Scope.String(), run.Target, maxU)
	for i, w := range waves {
		var parts []string
		for _, n := range w {
			if s := policy.UpgradeState(snap.ByName[n].Annotations[policy.AnnotationUpgradeState]); policy.UpgradeStarted(s) {
				n += " (from " + string(s) + ")"
			}
			parts = append(parts, n)
		}
		o.Say(o.IOStreams, "  wave %d: %s\n", i+1, strings.Join(parts, ", "))
	}
	if len(waiting) > 0 {
		o.Say(o.IOStreams, "  not started: %s\n", strings.Join(waiting, ", "))
	}
	o.Say(o.IOStreams, "(dry run: nothing changed)\n")
	return nil
}

// ---- abort ----

// UpgradeAbortOptions is `upgrade abort`.
type UpgradeAbortOptions struct{ scopedMutation }

// NewCmdUpgradeAbort is `kubectl litepool upgrade abort`.
func NewCmdUpgradeAbort(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradeAbortOptions{newScopedMutation(streams)}
	cmd := &cobra.Command{
		Use:   "abort (--pool POOL | --node NODE)",
		Short: "Stop a driver upgrade: nodes not yet started leave the rollout",
		Long: templates.LongDesc(`
			Stop a driver upgrade. Nodes still waiting for their wave
			(upgrade-required) leave the rollout: their upgrade annotations are
			removed and a rollout that is running starts no further nodes. Nodes in
			the middle of their upgrade are never left half-done: a running rollout
			finishes them, or "upgrade resume" does. Failed nodes stay failed and
			cordoned for an operator to look at.`),
		Example: templates.Examples(`
			# Stop a pool's rollout after the nodes in flight
			kubectl litepool upgrade abort --pool train-snt9b

			# See what would leave the rollout
			kubectl litepool upgrade abort --pool train-snt9b --dry-run=client`),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.complete(f, cmd, args); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	o.addFlags(cmd, f)
	return cmd
}

// Run aborts.
func (o *UpgradeAbortOptions) Run(ctx context.Context) error {
	nodes, err := o.Scope.nodes(ctx, o.clients)
	if err != nil {
		return err
	}
	u := &upgrade.Upgrader{Kube: o.clients.Kube}
	var removed, inflight, failed []string
	for i := range nodes {
		n := &nodes[i]
		switch state := policy.UpgradeState(n.Annotations[policy.AnnotationUpgradeState]); {
		case state == policy.UpgradeRequired:
			if err := u.Unmark(ctx, n.Name, o.DryRun); err != nil {
				return err
			}
			o.NodeEvent(ctx, n, false, "DriverUpgradeAborted", "driver upgrade to %s aborted before it started on this node",
				n.Annotations[policy.AnnotationUpgradeTarget])
			removed = append(removed, n.Name)
		case state == policy.UpgradeFailed:
			failed = append(failed, n.Name)
		case policy.UpgradeStarted(state):
			inflight = append(inflight, n.Name+" ("+string(state)+")")
		}
	}
	if len(removed)+len(inflight)+len(failed) == 0 {
		o.Say(o.IOStreams, "no unfinished driver upgrade in %s\n", o.Scope.String())
		return nil
	}
	o.Say(o.IOStreams, "aborted%s: %d node(s) left the rollout: %s\n", o.Suffix(), len(removed), upgradeOrNone(removed))
	if len(inflight) > 0 {
		o.Say(o.IOStreams, "in progress, finished by the running rollout or `kubectl litepool upgrade resume`: %s\n", strings.Join(inflight, ", "))
	}
	if len(failed) > 0 {
		o.Say(o.IOStreams, "failed, left cordoned for inspection: %s\n", strings.Join(failed, ", "))
	}
	return printNodes(ctx, &o.Mutation, o.clients, o.Out, removed, "left the rollout", func(n *corev1.Node) {
		setAnnotations(n, map[string]string{policy.AnnotationUpgradeState: "", policy.AnnotationUpgradeTarget: "",
			policy.AnnotationUpgradeRun: "", policy.AnnotationUpgradeMessage: ""})
	})
}

// completeMutation builds the clients and reads --dry-run and -o.
func completeMutation(f kit.Factory, cmd *cobra.Command, m *kit.Mutation) (*kit.Clients, error) {
	c, err := f.Clients()
	if err != nil {
		return nil, err
	}
	if err := m.Complete(cmd, c); err != nil {
		return nil, err
	}
	return c, m.Validate()
}
