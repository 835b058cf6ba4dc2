package upgrade

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/templates"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
)

// upgradeScope names the rollout of status, resume and abort: by name, or the newest
// rollout of --pool or --node.
type upgradeScope struct {
	Name, Pool, Node string
}

func (s *upgradeScope) addFlags(cmd *cobra.Command, f kit.Factory) {
	cmd.Flags().StringVar(&s.Pool, "pool", "", "The newest rollout of this pool")
	cmd.Flags().StringVar(&s.Node, "node", "", "The newest rollout of this node")
	_ = cmd.RegisterFlagCompletionFunc("pool", kit.CompletePoolNames(f))
}

func (s *upgradeScope) complete(cmd *cobra.Command, args []string, required bool) error {
	if len(args) > 1 {
		return fmt.Errorf("%s takes at most one rollout name, got %q", cmd.CommandPath(), strings.Join(args, " "))
	}
	if len(args) == 1 {
		s.Name = args[0]
	}
	n := 0
	for _, v := range []string{s.Name, s.Pool, s.Node} {
		if v != "" {
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("name the rollout one way: NAME, --pool or --node")
	}
	if required && n == 0 {
		return fmt.Errorf("name the rollout: NAME (kubectl get driverrollouts), --pool POOL or --node NODE")
	}
	return nil
}

func (s *upgradeScope) String() string {
	switch {
	case s.Name != "":
		return "driverrollout " + s.Name
	case s.Pool != "":
		return "pool " + s.Pool
	case s.Node != "":
		return "node " + s.Node
	}
	return "the cluster"
}

// rollouts are the rollouts in scope, oldest first: the named one, or those of the pool
// or node, or all.
func (s *upgradeScope) rollouts(ctx context.Context, c client.Client) ([]v1alpha1.DriverRollout, error) {
	if s.Name != "" {
		var ro v1alpha1.DriverRollout
		if err := c.Get(ctx, client.ObjectKey{Name: s.Name}, &ro); err != nil {
			return nil, noCRD(err)
		}
		return []v1alpha1.DriverRollout{ro}, nil
	}
	var list v1alpha1.DriverRolloutList
	if err := c.List(ctx, &list); err != nil {
		return nil, noCRD(err)
	}
	var out []v1alpha1.DriverRollout
	for _, ro := range list.Items {
		inNode := slices.Contains(ro.Spec.Nodes, s.Node) || slices.ContainsFunc(ro.Status.Nodes, func(n v1alpha1.DriverRolloutNode) bool { return n.Name == s.Node })
		switch {
		case s.Pool != "" && ro.Spec.Pool != s.Pool:
		case s.Node != "" && !inNode:
		default:
			out = append(out, ro)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreationTimestamp.Equal(&out[j].CreationTimestamp) {
			return out[i].CreationTimestamp.Before(&out[j].CreationTimestamp)
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// newest is the scope's newest rollout, or nil.
func (s *upgradeScope) newest(ctx context.Context, c client.Client) (*v1alpha1.DriverRollout, error) {
	list, err := s.rollouts(ctx, c)
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return &list[len(list)-1], nil
}

// checkNotInAnother is rule U4 before a rollout is created: one node, one unfinished
// rollout. The controller checks it again when the rollout starts.
func checkNotInAnother(ctx context.Context, c client.Client, need []string) error {
	var list v1alpha1.DriverRolloutList
	if err := c.List(ctx, &list); err != nil {
		return noCRD(err)
	}
	for _, ro := range list.Items {
		if upgrade.Final(&ro) {
			continue
		}
		for _, n := range ro.Status.Nodes {
			if slices.Contains(need, n.Name) && n.State != string(policy.UpgradeDone) && n.State != string(policy.UpgradeAborted) {
				return policy.Violationf("U4", "node %q is already in driver rollout %s (state %s): finish it with `kubectl litepool upgrade resume %s` or stop it with `kubectl litepool upgrade abort %s` first",
					n.Name, ro.Name, n.State, ro.Name, ro.Name)
			}
		}
	}
	return nil
}

// ---- status ----

// UpgradeStatusOptions is `upgrade status`.
type UpgradeStatusOptions struct {
	Scope    upgradeScope
	Output   *kit.DataOutput
	Watch    bool
	clients  *kit.Clients
	rollouts client.Client
	genericiooptions.IOStreams
}

// NewCmdUpgradeStatus is `kubectl litepool upgrade status`.
func NewCmdUpgradeStatus(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradeStatusOptions{IOStreams: streams, Output: kit.NewDataOutput()}
	cmd := &cobra.Command{
		Use:   "status [NAME | --pool POOL | --node NODE] [-o json|yaml|jsonpath=...]",
		Short: "Show a driver rollout's nodes and progress",
		Long: templates.LongDesc(`
			Show driver rollouts (DriverRollout objects): the named one, the newest of
			a pool or a node, or every rollout. For each of its nodes: the state the
			rollout's status records, the target, the driver version the node reports
			now, whether it is cordoned, and the last step's message; then the
			rollout's progress.`),
		Example: templates.Examples(`
			# Every rollout
			kubectl litepool upgrade status

			# A pool's newest rollout
			kubectl litepool upgrade status --pool train-snt9b

			# Follow it until it ends
			kubectl litepool upgrade status --pool train-snt9b -w

			# As data, for scripts
			kubectl litepool upgrade status --pool train-snt9b -o json`),
	}
	o.Scope.addFlags(cmd, f)
	o.Output.AddFlags(cmd)
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", false, "After the table, print the rollouts' progress lines whenever they change, until none is under way")
	return kit.Bind(cmd, f, o)
}

// Complete reads the rollout's name, if given, and builds the clients.
func (o *UpgradeStatusOptions) Complete(f kit.Factory, cmd *cobra.Command, args []string) (err error) {
	if err := o.Scope.complete(cmd, args, false); err != nil {
		return err
	}
	if o.clients, err = f.Clients(); err != nil {
		return err
	}
	o.rollouts, err = rolloutClientFor(f)
	return err
}

// Validate checks -o, and that --watch does not go with data.
func (o *UpgradeStatusOptions) Validate() error {
	if err := o.Output.Validate(); err != nil {
		return err
	}
	if o.Watch && o.Output.Data() {
		return fmt.Errorf("--watch prints progress lines: it does not go with -o %s", o.Output.Format)
	}
	return nil
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
	Job      string `json:"job,omitempty"`
}

// UpgradeRolloutStatus is one rollout's progress.
type UpgradeRolloutStatus struct {
	Name       string `json:"name"`
	Pool       string `json:"pool,omitempty"`
	Target     string `json:"target"`
	Phase      string `json:"phase"`
	Message    string `json:"message,omitempty"`
	Total      int    `json:"total"`
	Done       int    `json:"done"`
	InProgress int    `json:"inProgress"`
	Pending    int    `json:"pending"`
	Failed     int    `json:"failed"`
	Aborted    int    `json:"aborted"`
}

// UpgradeStatus is what `upgrade status -o json|yaml` prints.
type UpgradeStatus struct {
	Nodes    []UpgradeNodeStatus    `json:"nodes"`
	Rollouts []UpgradeRolloutStatus `json:"rollouts"`
}

func (o *UpgradeStatusOptions) statusOf(ctx context.Context, list []v1alpha1.DriverRollout) (UpgradeStatus, error) {
	st := UpgradeStatus{Nodes: []UpgradeNodeStatus{}, Rollouts: []UpgradeRolloutStatus{}}
	for i := range list {
		ro := &list[i]
		c := upgrade.CountsOf(ro)
		st.Rollouts = append(st.Rollouts, UpgradeRolloutStatus{Name: ro.Name, Pool: ro.Spec.Pool, Target: ro.Spec.Version,
			Phase: string(orPending(ro.Status.Phase)), Message: ro.Status.Message, Total: c.Total, Done: c.Done,
			InProgress: c.InProgress, Pending: c.Pending, Failed: c.Failed, Aborted: c.Aborted})
		for _, n := range ro.Status.Nodes {
			ns := UpgradeNodeStatus{Node: n.Name, State: n.State, Target: ro.Spec.Version, Message: n.Message, Rollout: ro.Name, Job: n.Job}
			node, err := o.clients.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			switch {
			case err == nil:
				ns.Pool, ns.Driver, ns.Cordoned = node.Labels[policy.LabelPool], policy.DriverVersion(node), node.Spec.Unschedulable
			case !apierrors.IsNotFound(err):
				return st, err
			}
			st.Nodes = append(st.Nodes, ns)
		}
	}
	return st, nil
}

// Run prints the table and the progress.
func (o *UpgradeStatusOptions) Run(ctx context.Context) error {
	list, err := o.Scope.rollouts(ctx, o.rollouts)
	if err != nil {
		return err
	}
	if o.Scope.Pool != "" || o.Scope.Node != "" {
		list = list[max(0, len(list)-1):]
	}
	st, err := o.statusOf(ctx, list)
	if err != nil {
		return err
	}
	if o.Output.Data() {
		return o.Output.Print(o.Out, st)
	}
	if len(list) == 0 {
		fmt.Fprintf(o.Out, "no driver rollout in %s\n", o.Scope.String())
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
	last := map[string]string{}
	for i := range list {
		line := progressLine(&list[i])
		fmt.Fprintln(o.Out, line)
		last[list[i].Name] = line
	}
	if !o.Watch {
		return nil
	}
	for {
		active := false
		for i := range list {
			ro := &list[i]
			if err := o.rollouts.Get(ctx, client.ObjectKeyFromObject(ro), ro); err != nil {
				return err
			}
			if line := progressLine(ro); line != last[ro.Name] {
				fmt.Fprintln(o.Out, line)
				last[ro.Name] = line
			}
			done, _ := ended(ro, true)
			active = active || !done
		}
		if !active {
			return nil
		}
		if err := sleep(ctx); err != nil {
			return err
		}
	}
}

// ---- resume ----

// UpgradeResumeOptions is `upgrade resume`.
type UpgradeResumeOptions struct {
	changeOptions
	RetryFailed    bool
	MaxUnavailable string
}

// changeOptions is what resume and abort share: the rollout, the kit's mutation flags
// and the following of the changed rollout.
type changeOptions struct {
	Scope upgradeScope
	kit.Mutation
	Follow   FollowFlags
	clients  *kit.Clients
	rollouts client.Client
	clock    clock.PassiveClock
	genericiooptions.IOStreams
}

func (s *changeOptions) addFlags(cmd *cobra.Command, f kit.Factory) {
	s.Scope.addFlags(cmd, f)
	s.Mutation.AddFlags(cmd, false)
	s.Follow.addFlags(cmd)
}

// Complete reads the rollout's name (it is required), and builds the clients.
func (s *changeOptions) Complete(f kit.Factory, cmd *cobra.Command, args []string) (err error) {
	if err := s.Scope.complete(cmd, args, true); err != nil {
		return err
	}
	if s.clients, err = s.CompleteClients(f, cmd); err != nil {
		return err
	}
	s.clock = f.Clock()
	s.rollouts, err = rolloutClientFor(f)
	return err
}

// patch changes the rollout's spec with edit (refused if another writer changed it
// in between), or under --dry-run=server has the API server check the change.
func (s *changeOptions) patch(ctx context.Context, ro *v1alpha1.DriverRollout, edit func(*v1alpha1.DriverRollout)) error {
	orig := ro.DeepCopy()
	edit(ro)
	var opts []client.PatchOption
	switch s.DryRun {
	case cmdutil.DryRunClient:
		return nil
	case cmdutil.DryRunServer:
		opts = append(opts, client.DryRunAll)
	}
	return s.rollouts.Patch(ctx, ro, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), opts...)
}

func (s *changeOptions) follow(ctx context.Context, name string) error {
	if s.DryRun != cmdutil.DryRunNone {
		return nil
	}
	f := &follower{FollowFlags: s.Follow, c: s.rollouts, kube: s.clients.Kube, recorder: s.Recorder, clock: s.clock,
		out: s.SayTo(s.IOStreams), errOut: s.ErrOut}
	return f.follow(ctx, name)
}

// NewCmdUpgradeResume is `kubectl litepool upgrade resume`.
func NewCmdUpgradeResume(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradeResumeOptions{changeOptions: changeOptions{Mutation: kit.NewMutation(), IOStreams: streams}}
	cmd := &cobra.Command{
		Use:   "resume (NAME | --pool POOL | --node NODE) [--retry-failed] [--max-unavailable N]",
		Short: "Continue a paused, stopped or undriven driver rollout",
		Long: templates.LongDesc(`
			Continue a driver rollout: unpause it (spec.paused=false), and with
			--retry-failed re-mark its failed nodes upgrade-required once (it raises
			spec.retryFailed; their installer runs afresh). --max-unavailable changes
			the rollout's budget (spec.maxUnavailable), for example when nodes
			cordoned by someone else take all of it. Nodes already done are never
			touched again; nodes in the middle of a step repeat that step.

			Then the command follows the rollout as "upgrade driver" does, and drives
			it itself when no controller acts on it.`),
		Example: templates.Examples(`
			# Continue a pool's rollout
			kubectl litepool upgrade resume --pool train-snt9b

			# Retry the failed node and continue
			kubectl litepool upgrade resume --pool train-snt9b --retry-failed

			# Continue with a larger budget
			kubectl litepool upgrade resume --pool train-snt9b --max-unavailable 2

			# What would resume do?
			kubectl litepool upgrade resume --pool train-snt9b --retry-failed --dry-run=client`),
	}
	o.addFlags(cmd, f)
	cmd.Flags().BoolVar(&o.RetryFailed, "retry-failed", false, "Re-mark failed nodes upgrade-required and retry them")
	cmd.Flags().StringVar(&o.MaxUnavailable, "max-unavailable", "", "Change the rollout's max-unavailable (a count or a percentage)")
	return kit.Bind(cmd, f, o)
}

// Validate checks --max-unavailable and -o.
func (o *UpgradeResumeOptions) Validate() error {
	if o.MaxUnavailable != "" {
		if _, err := policy.ParseMaxUnavailable(o.MaxUnavailable); err != nil {
			return err
		}
	}
	return o.Mutation.Validate()
}

// Run resumes.
func (o *UpgradeResumeOptions) Run(ctx context.Context) error {
	ro, err := o.Scope.newest(ctx, o.rollouts)
	if err != nil {
		return err
	}
	if ro == nil || upgrade.Final(ro) {
		o.Say(o.IOStreams, "nothing to resume in %s: no unfinished driver rollout\n", o.Scope.String())
		return nil
	}
	var failed []string
	for _, n := range ro.Status.Nodes {
		if n.State == string(policy.UpgradeFailed) {
			failed = append(failed, fmt.Sprintf("%s (%s)", n.Name, n.Message))
		}
	}
	if len(failed) > 0 && !o.RetryFailed {
		return policy.Violationf("U4", "driverrollout %s stopped on failed node(s) %s: fix them, then resume with --retry-failed", ro.Name, strings.Join(failed, "; "))
	}
	if o.MaxUnavailable != "" && ro.Spec.Pool == "" {
		return fmt.Errorf("--max-unavailable applies to a pool rollout; driverrollout %s upgrades named nodes", ro.Name)
	}
	err = o.patch(ctx, ro, func(ro *v1alpha1.DriverRollout) {
		ro.Spec.Paused = false
		if len(failed) > 0 {
			ro.Spec.RetryFailed = max(ro.Spec.RetryFailed, ro.Status.RetriedFailed) + 1
		}
		if o.MaxUnavailable != "" {
			v, _ := policy.ParseMaxUnavailable(o.MaxUnavailable)
			ro.Spec.MaxUnavailable = &v
		}
	})
	if err != nil {
		return err
	}
	for _, n := range ro.Status.Nodes {
		if n.State == string(policy.UpgradeFailed) {
			o.Say(o.IOStreams, "%snode/%s: failed → upgrade-required (retry)%s\n", wouldOf(o.DryRun), n.Name, o.Suffix())
		}
	}
	if o.DryRun != cmdutil.DryRunNone {
		return o.printPlan(ctx, ro)
	}
	o.Say(o.IOStreams, "driverrollout/%s resumed\n", ro.Name)
	return o.follow(ctx, ro.Name)
}

func wouldOf(d cmdutil.DryRunStrategy) string {
	if d != cmdutil.DryRunNone {
		return "would retry: "
	}
	return ""
}

// printPlan shows the waves a resumed rollout would run.
func (o *UpgradeResumeOptions) printPlan(ctx context.Context, ro *v1alpha1.DriverRollout) error {
	shown := ro.DeepCopy()
	for i := range shown.Status.Nodes {
		if shown.Status.Nodes[i].State == string(policy.UpgradeFailed) {
			shown.Status.Nodes[i].State = string(policy.UpgradeRequired)
		}
	}
	waves, waiting, maxU, err := upgrade.Predict(ctx, o.clients.Kube, shown)
	if err != nil {
		return err
	}
	o.Say(o.IOStreams, "would resume driverrollout %s (→ %s), max unavailable %d:\n", ro.Name, ro.Spec.Version, maxU)
	for i, w := range waves {
		var parts []string
		for _, n := range w {
			if j := slices.IndexFunc(ro.Status.Nodes, func(s v1alpha1.DriverRolloutNode) bool { return s.Name == n }); j >= 0 {
				if s := policy.UpgradeState(ro.Status.Nodes[j].State); policy.UpgradeStarted(s) {
					n += " (from " + string(s) + ")"
				}
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
type UpgradeAbortOptions struct{ changeOptions }

// NewCmdUpgradeAbort is `kubectl litepool upgrade abort`.
func NewCmdUpgradeAbort(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradeAbortOptions{changeOptions{Mutation: kit.NewMutation(), IOStreams: streams}}
	cmd := &cobra.Command{
		Use:   "abort (NAME | --pool POOL | --node NODE)",
		Short: "Stop a driver rollout: nodes not yet started leave it",
		Long: templates.LongDesc(`
			Stop a driver rollout (spec.abort=true; it cannot be undone). Nodes still
			waiting for their wave leave the rollout (state aborted; their upgrade
			annotations are removed). Nodes in the middle of their upgrade are never
			left half-done: they finish. Failed nodes stay failed and cordoned for an
			operator to look at. The command follows the rollout until it is aborted.`),
		Example: templates.Examples(`
			# Stop a pool's rollout after the nodes in flight
			kubectl litepool upgrade abort --pool train-snt9b

			# Request it and return
			kubectl litepool upgrade abort --pool train-snt9b --wait=false`),
	}
	o.addFlags(cmd, f)
	return kit.Bind(cmd, f, o)
}

// Run aborts.
func (o *UpgradeAbortOptions) Run(ctx context.Context) error {
	ro, err := o.Scope.newest(ctx, o.rollouts)
	if err != nil {
		return err
	}
	if ro == nil || upgrade.Final(ro) {
		o.Say(o.IOStreams, "no unfinished driver rollout in %s\n", o.Scope.String())
		return nil
	}
	if err := o.patch(ctx, ro, func(ro *v1alpha1.DriverRollout) { ro.Spec.Abort = true }); err != nil {
		return err
	}
	var leave, inflight, failed []string
	for _, n := range ro.Status.Nodes {
		switch s := policy.UpgradeState(n.State); {
		case s == policy.UpgradeRequired:
			leave = append(leave, n.Name)
		case s == policy.UpgradeFailed:
			failed = append(failed, n.Name)
		case policy.UpgradeStarted(s):
			inflight = append(inflight, n.Name+" ("+string(s)+")")
		}
	}
	o.Say(o.IOStreams, "driverrollout/%s aborted%s: %d node(s) leave the rollout: %s\n", ro.Name, o.Suffix(), len(leave), upgradeOrNone(leave))
	if len(inflight) > 0 {
		o.Say(o.IOStreams, "in progress, finishing: %s\n", strings.Join(inflight, ", "))
	}
	if len(failed) > 0 {
		o.Say(o.IOStreams, "failed, left cordoned for inspection: %s\n", strings.Join(failed, ", "))
	}
	return o.follow(ctx, ro.Name)
}
