// Package stress is `kubectl litepool stress`: stress tests of a pool's idle nodes, as
// StressRun objects that litepool's controller runs (or this command, running the same
// reconciler, when no controller takes them), now or on a schedule.
//
// -o: stress run's -o prints its results as data (json as it always did, and now yaml,
// jsonpath, go-template), not the StressRun it creates: that was its meaning before
// -o name|json|yaml came to mutating commands, and scripts read it.
// stress schedule takes the -o of mutating commands and prints the objects it writes.
package stress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/templates"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/interrupt"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/stress"
	"github.com/runwhere-ai/litepool/pkg/version"
)

// NewCmdStress is `kubectl litepool stress`.
func NewCmdStress(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stress",
		Short: "Run accelerator stress tests on a pool's idle nodes, now or on a schedule",
		Long: templates.LongDesc(`
			Stress tests (npu, hccs, roce, storage) run as one pod per idle node of a
			pool. Nodes that fail are labelled runwhere.ai/health=degraded and show as
			Degraded; nodes that pass are labelled healthy.`),
		Example: templates.Examples(`
			# Test every idle node of a pool now
			kubectl litepool stress run --pool train-snt9b --image registry.example.com/npu-stress:1.0

			# Every Sunday at 02:00
			kubectl litepool stress schedule --pool train-snt9b --cron "0 2 * * 0" --image registry.example.com/npu-stress:1.0`),
	}
	cmd.AddCommand(NewCmdStressRun(f, streams), NewCmdStressSchedule(f, streams), NewCmdStressStatus(f, streams))
	return cmd
}

// StressRunOptions is `stress run`.
type StressRunOptions struct {
	kit.Mutation
	Pool     string
	Nodes    []string
	Image    string
	Tests    []string
	Timeout  time.Duration
	KeepPods bool
	// Domains runs by unit domain (spec.domains): rule T4 is checked before the run
	// is created, as the webhook checks it when it is.
	Domains bool
	Command []string
	Output  *kit.DataOutput
	// HandOver: --in-cluster=true waits for litepool's controller to take the run,
	// false runs it in this process at once; unset (the default), a run no controller
	// takes within --controller-timeout is run here, and so is one whose controller
	// stops while this command follows it.
	kit.HandOver
	// Wait follows the run to its end; Watch also prints a line whenever it moves.
	// -w is --watch, as in kubectl get and upgrade: it implies --wait, so `stress
	// run -w`, once short for --wait, still follows the run and prints what it did.
	Wait, Watch bool

	clients *kit.Clients
	runs    client.Client
	clock   clock.PassiveClock
	// pool is the Pool object, nil when the pool is only labelled nodes.
	pool *v1alpha1.Pool
	genericiooptions.IOStreams
}

// NewCmdStressRun is `kubectl litepool stress run`.
func NewCmdStressRun(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &StressRunOptions{Mutation: kit.NewMutation(), Output: kit.NewDataOutput(), IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "run --pool POOL [--nodes N1,N2] [--tests npu,hccs,roce,storage] [--image IMAGE] [-- COMMAND...]",
		Short: "Stress-test every idle node of a pool and mark failing nodes degraded",
		Long: templates.LongDesc(`
			Start a stress run: a StressRun object (kubectl get stressruns) that
			litepool's controller runs. On each idle node of the pool it runs one pod
			per test, one test after the other, in litepool's own namespace
			(litepool-system): pinned to the node, holding all its accelerators, told
			the test in STRESS_TESTS (and NODE_NAME, POOL). Busy nodes (running
			workload pods), cordoned and NotReady nodes are skipped and reported. A
			node whose tests all pass is labelled runwhere.ai/health=healthy; one that
			fails a test, or whose test does not finish within --timeout, is labelled
			runwhere.ai/health=degraded, shown as Degraded by "get nodes" and "get
			pools", and gets a Warning event. Pods of passed tests are deleted; those
			of failed tests are kept for their logs until the StressRun is deleted.

			--domains tests the pool by unit domain (its spec.topology): a domain is
			tested only when every member is idle (else it is skipped whole, naming the
			member and why), its members run each test together, and a member that
			fails marks that node degraded and the domain's result failed. A pool
			without a topology is refused (T4).

			The image (and the tests) default to the pool's spec.stressTest. One run
			per pool at a time: a run created while another is unfinished is refused
			here and waits in the cluster.

			The command creates the run and returns once the controller has taken it;
			--wait follows it to its end and exits non-zero when a node fails; --watch
			(-w) follows it too and prints a line whenever it moves.
			When no controller takes the run within --controller-timeout, this command
			runs the same reconciler itself, on the same object, until the run ends,
			and says so; so it does when the controller that took a run it follows
			stops (its leader Lease is not renewed). Stopping the command leaves the
			run where it is, for a controller to finish. --in-cluster=true never runs
			it here; --in-cluster=false runs it here at once.`),
		Example: templates.Examples(`
			# NPU and HCCS tests on the idle nodes of a pool
			kubectl litepool stress run --pool train-snt9b --tests npu,hccs --image registry.example.com/npu-stress:1.0

			# Test the pool's super nodes (its topology's domains) whole, each only when idle
			kubectl litepool stress run --pool train-snt9b --tests npu,hccs --domains --image registry.example.com/npu-stress:1.0

			# Follow it to its end, a line whenever it moves
			kubectl litepool stress run --pool train-snt9b --image registry.example.com/npu-stress:1.0 -w

			# Which nodes would be tested, changing nothing
			kubectl litepool stress run --pool train-snt9b --image registry.example.com/npu-stress:1.0 --dry-run=client`),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Pool, "pool", "", "Pool whose idle nodes to test")
	fl.StringSliceVar(&o.Nodes, "nodes", nil, "Test only these members of the pool")
	fl.StringVar(&o.Image, "image", "", "Stress-test image (default: the pool's spec.stressTest.image)")
	fl.StringSliceVar(&o.Tests, "tests", nil, "Tests to run: "+strings.Join(policy.StressTests, ", ")+" (default: the pool's spec.stressTest.tests, else all)")
	fl.DurationVar(&o.Timeout, "timeout", 30*time.Minute, "How long one test of a node may run; a test still running then has failed")
	fl.BoolVar(&o.KeepPods, "keep-pods", false, "Keep the pods of passed tests too")
	fl.BoolVar(&o.Domains, "domains", false, "Test by unit domain of the pool's topology: each domain whole, only when all its members are idle")
	o.HandOver.AddFlags(cmd, "true: only litepool's controller runs the run (wait for it); false: run it in this process at once. Default: the controller, else this process", 5*time.Second)
	// --controller-wait was this command's name for --controller-timeout; scripts keep it.
	fl.DurationVar(&o.ControllerTimeout, "controller-wait", 5*time.Second, "Same as --controller-timeout")
	_ = fl.MarkHidden("controller-wait")
	fl.BoolVar(&o.Wait, "wait", false, "Follow the run until it ends; exit non-zero when a node fails")
	fl.BoolVarP(&o.Watch, "watch", "w", false, "Follow the run until it ends (implies --wait), printing a line whenever it moves")
	o.Output.AddFlags(cmd)
	cmdutil.AddDryRunFlag(cmd) // not Mutation.AddFlags: -o is the results' (see the package doc)
	_ = cmd.RegisterFlagCompletionFunc("pool", kit.CompletePoolNames(f))
	return kit.Bind(cmd, f, o)
}

// newRunsClient builds the StressRun client; tests replace it.
var newRunsClient = kit.ObjectClient

// Complete fills defaults from the pool.
func (o *StressRunOptions) Complete(f kit.Factory, cmd *cobra.Command, args []string) (err error) {
	if dash := cmd.ArgsLenAtDash(); dash >= 0 {
		o.Command = args[dash:]
		args = args[:dash]
	}
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q: name the pool with --pool; put a command after --", strings.Join(args, " "))
	}
	if o.clients, err = o.CompleteClients(f, cmd); err != nil {
		return err
	}
	if o.runs, err = newRunsClient(f); err != nil {
		return err
	}
	o.HandOver.Complete(cmd, o.clients.Kube, f.Clock())
	if o.Watch && !cmd.Flags().Changed("wait") {
		o.Wait = true
	}
	o.clock = f.Clock()
	if o.Pool == "" {
		return fmt.Errorf("--pool is required")
	}
	p, err := o.clients.Pools.Get(cmd.Context(), o.Pool)
	if err == nil {
		o.pool = p
	}
	if err == nil && p.Spec.StressTest != nil {
		if o.Image == "" {
			o.Image = p.Spec.StressTest.Image
		}
		if len(o.Tests) == 0 {
			for _, t := range p.Spec.StressTest.Tests {
				o.Tests = append(o.Tests, string(t))
			}
		}
	} else if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if len(o.Tests) == 0 {
		o.Tests = policy.StressTests
	}
	return nil
}

// Validate checks the flags.
func (o *StressRunOptions) Validate() error {
	if o.Image == "" {
		return fmt.Errorf("no stress-test image: give --image, or set spec.stressTest.image on the pool")
	}
	if err := o.Output.Validate(); err != nil {
		return err
	}
	if o.Timeout <= 0 {
		return fmt.Errorf("--timeout %s: must be positive", o.Timeout)
	}
	if o.Watch && !o.Wait {
		return fmt.Errorf("--watch (-w) prints the moves of a run it follows: it does not go with --wait=false")
	}
	if o.Wait && o.DryRun != cmdutil.DryRunNone {
		return fmt.Errorf("%s follows a stress run, and a dry run starts none", o.followFlag())
	}
	if o.Domains && len(o.Nodes) > 0 {
		return fmt.Errorf("--nodes and --domains: a run by domain tests whole domains; give one of them")
	}
	return policy.CheckStressTests(o.Tests)
}

// Run creates the StressRun and sees it taken, followed, or runs it here.
func (o *StressRunOptions) Run(ctx context.Context) error {
	run := o.object()
	if o.DryRun != cmdutil.DryRunNone {
		return o.dryRun(ctx, run)
	}
	if o.Domains {
		if err := checkDomains(ctx, o.clients, o.pool, o.Pool); err != nil {
			return err
		}
	}
	if busy, err := o.unfinished(ctx); err != nil {
		return err
	} else if busy != nil {
		return fmt.Errorf("pool %s: stress run %s is %s in the cluster: wait until it ends (kubectl get stressrun %s), or abort it (kubectl patch stressrun %s --type merge -p '{\"spec\":{\"abort\":true}}')",
			o.Pool, busy.Name, strings.ToLower(string(phaseOf(busy))), busy.Name, busy.Name)
	}
	// Runs are named by the second: one started in the same second as an earlier one
	// of the pool (that has ended, or the check above would have stopped it) takes a
	// numbered name.
	base := run.Name
	err := o.runs.Create(ctx, run)
	for i := 2; apierrors.IsAlreadyExists(err) && i <= 9; i++ {
		run.Name = fmt.Sprintf("%s-%d", base, i)
		err = o.runs.Create(ctx, run)
	}
	if err != nil {
		return fmt.Errorf("creating stress run %s: %w", run.Name, err)
	}
	fmt.Fprintf(o.progress(), "stressrun/%s created\n", run.Name)
	if o.InClusterSet && !o.InCluster {
		fmt.Fprintf(o.ErrOut, "stress run %s: run in this process (--in-cluster=false); stopping this command leaves it for a controller to finish\n", run.Name)
		return o.follow(ctx, run.Name, o.standIn())
	}
	taken, err := o.WaitForController(ctx, func(ctx context.Context) bool {
		var got v1alpha1.StressRun
		return o.runs.Get(ctx, client.ObjectKey{Name: run.Name}, &got) == nil && got.Status.ObservedGeneration > 0
	})
	switch {
	case err != nil:
		return err
	case taken && !o.Wait:
		fmt.Fprintf(o.progress(), "stress run %s: taken by litepool's controller; follow it with kubectl get stressrun %s -w, or kubectl litepool stress run ... --wait\n", run.Name, run.Name)
		return nil
	case taken:
		return o.follow(ctx, run.Name, nil)
	case o.InClusterSet:
		return fmt.Errorf("--in-cluster: no litepool controller took stress run %s within %s; it stays Pending until one does (kubectl delete stressrun %s drops it)", run.Name, o.ControllerTimeout, run.Name)
	}
	fmt.Fprintf(o.ErrOut, "stress run %s: no litepool controller took it within %s: running it in this process; stopping this command leaves it for a controller to finish\n", run.Name, o.ControllerTimeout)
	return o.follow(ctx, run.Name, o.standIn())
}

// standIn is the controller's reconciler, run by this command.
func (o *StressRunOptions) standIn() *stress.Reconciler {
	return &stress.Reconciler{Client: o.runs, Live: o.runs, Pods: stress.PodsOf(o.clients.Kube), Kube: o.clients.Kube,
		Recorder: o.Recorder, Namespace: o.ControllerNamespace, Accelerators: o.clients.Accelerators, Clock: o.clock, StandIn: true}
}

// object is the StressRun the flags describe, named after the pool and the clock.
func (o *StressRunOptions) object() *v1alpha1.StressRun {
	run := &v1alpha1.StressRun{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "StressRun"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Pool + "-" + o.clock.Now().UTC().Format("20060102-150405")},
		Spec: v1alpha1.StressRunSpec{Pool: o.Pool, Nodes: o.Nodes, Image: o.Image, Command: o.Command,
			Timeout: &metav1.Duration{Duration: o.Timeout}, KeepPods: o.KeepPods, Domains: o.Domains},
	}
	for _, t := range o.Tests {
		run.Spec.Tests = append(run.Spec.Tests, v1alpha1.StressTest(t))
	}
	return run
}

// dryRun prints the plan: which nodes would be tested, and why others would not. A
// server dry run also has the API server check the StressRun.
func (o *StressRunOptions) dryRun(ctx context.Context, run *v1alpha1.StressRun) error {
	if o.DryRun == cmdutil.DryRunServer {
		if err := o.runs.Create(ctx, run, client.DryRunAll); err != nil {
			return fmt.Errorf("stress run %s: %w", run.Name, err)
		}
	}
	plan, domains, err := o.plan(ctx)
	if err != nil {
		return err
	}
	var results []v1alpha1.StressNodeResult
	for _, t := range plan {
		if t.Skip != "" {
			results = append(results, v1alpha1.StressNodeResult{Node: t.Node, Outcome: v1alpha1.StressOutcomeSkipped, Message: t.Skip})
			continue
		}
		for _, test := range run.Spec.Tests {
			results = append(results, v1alpha1.StressNodeResult{Node: t.Node, Test: test, Outcome: "would test"})
		}
	}
	for i := range domains {
		if domains[i].Outcome == v1alpha1.StressOutcomePending {
			domains[i].Outcome = "would test"
		}
	}
	if err := o.printResults(results, domains); err != nil {
		return err
	}
	fmt.Fprintln(o.ErrOut, "(dry run: no stress run created, no pod, no node labelled)")
	return nil
}

// plan is what the run would test: by node, or by domain (T4 checked first).
func (o *StressRunOptions) plan(ctx context.Context) ([]stress.Target, []v1alpha1.StressDomainResult, error) {
	if o.Domains {
		return stress.PlanDomains(ctx, o.clients.Kube, o.ControllerNamespace, o.pool, o.Pool)
	}
	targets, err := stress.Plan(ctx, o.clients.Kube, o.ControllerNamespace, o.Pool, o.Nodes)
	return targets, nil, err
}

// checkDomains is rule T4 on the pool's members as they are now, before anything is
// written: the webhook judges the same rule when the StressRun is created. An identity
// that may not list nodes (stress schedule's CronJob, whose ClusterRole may start a run
// and nothing more) leaves the judgement to the webhook.
func checkDomains(ctx context.Context, clients *kit.Clients, pool *v1alpha1.Pool, name string) error {
	list, err := clients.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: policy.LabelPool + "=" + name})
	if apierrors.IsForbidden(err) {
		return nil
	}
	if err != nil {
		return err
	}
	members := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		members[i] = &list.Items[i]
	}
	return policy.CheckStressDomains(pool, name, members)
}

// unfinished is a run of the pool that has not ended, if any.
func (o *StressRunOptions) unfinished(ctx context.Context) (*v1alpha1.StressRun, error) {
	var list v1alpha1.StressRunList
	if err := o.runs.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing stress runs: %w", err)
	}
	for i := range list.Items {
		if r := &list.Items[i]; r.Spec.Pool == o.Pool && !r.Status.Phase.Finished() {
			return r, nil
		}
	}
	return nil, nil
}

func phaseOf(r *v1alpha1.StressRun) v1alpha1.StressRunPhase {
	if r.Status.Phase == "" {
		return v1alpha1.StressRunPending
	}
	return r.Status.Phase
}

// pollInterval is how often the plugin reads a run it follows.
var pollInterval = time.Second

// follow reads the run until it ends, printing its progress when it changes under
// --watch; with rec, it drives the run itself, one Reconcile at a time. Following a
// controller, it takes the run over when the controller stops.
func (o *StressRunOptions) follow(ctx context.Context, name string, rec *stress.Reconciler) error {
	last := ""
	for {
		after := pollInterval
		if rec == nil {
			rec = o.takeOver(ctx, name)
		}
		if rec != nil {
			res, err := rec.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
			if err != nil && !apierrors.IsConflict(err) {
				return fmt.Errorf("stress run %s: %w", name, err)
			}
			if next := res.RequeueAfter; next > 0 && next < after {
				after = next
			}
		}
		var run v1alpha1.StressRun
		if err := o.runs.Get(ctx, client.ObjectKey{Name: name}, &run); err != nil {
			return fmt.Errorf("stress run %s: %w", name, err)
		}
		if line := progressLine(&run); o.Watch && line != last {
			fmt.Fprintln(o.progress(), line)
			last = line
		}
		if run.Status.Settled() {
			return o.report(&run)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped following stress run %s; it stays in the cluster (kubectl get stressrun %s): %w", name, name, ctx.Err())
		case <-time.After(after):
		}
	}
}

// takeOver is the stand-in reconciler when litepool's controller, which took the run,
// is known to have stopped and --in-cluster was not asked for; it tells the user once.
func (o *StressRunOptions) takeOver(ctx context.Context, name string) *stress.Reconciler {
	take, why := o.TakeOver(ctx)
	switch {
	case why == "":
		return nil
	case !take:
		fmt.Fprintf(o.ErrOut, "stress run %s: %s; it waits for one (--in-cluster)\n", name, why)
		return nil
	}
	fmt.Fprintf(o.ErrOut, "stress run %s: %s: running it in this process from here; stopping this command leaves it for a controller to finish\n", name, why)
	return o.standIn()
}

// followFlag names the flag that asked to follow the run, for errors.
func (o *StressRunOptions) followFlag() string {
	if o.Watch {
		return "--watch (-w)"
	}
	return "--wait"
}

// progressLine: the run's phase and its node counts.
func progressLine(run *v1alpha1.StressRun) string {
	st := run.Status
	line := fmt.Sprintf("stress run %s: %s", run.Name, strings.ToLower(string(phaseOf(run))))
	if st.Phase == v1alpha1.StressRunRunning {
		line += fmt.Sprintf(": %d of %d node(s) done", st.Passed+st.Failed, st.Total)
	}
	if c := meta.FindStatusCondition(st.Conditions, stress.ConditionStarted); c != nil && c.Status == metav1.ConditionFalse && !st.Phase.Finished() {
		line += " (" + c.Message + ")"
	}
	return line
}

// report ends a run: its results, the summary, and T2 when a node failed.
func (o *StressRunOptions) report(run *v1alpha1.StressRun) error {
	if err := o.printResults(run.Status.Results, run.Status.Domains); err != nil {
		return err
	}
	st := run.Status
	fmt.Fprintf(o.ErrOut, "pool %s: %s\n", o.Pool, Summary(&st))
	if failed := stress.FailedNodes(&st); len(failed) > 0 {
		domains := ""
		if d := stress.FailedDomains(&st); len(d) > 0 {
			domains = fmt.Sprintf("; %d domain(s) failed: %s", len(d), strings.Join(d, ", "))
		}
		return policy.Violationf("T2", "%d node(s) failed the stress test and are now %s=%s: %s%s", len(failed), policy.LabelHealth, policy.HealthDegraded, strings.Join(failed, ", "), domains)
	}
	if st.Phase != v1alpha1.StressRunSucceeded {
		msg := ""
		if c := meta.FindStatusCondition(st.Conditions, stress.ConditionComplete); c != nil {
			msg = ": " + c.Message
		}
		return fmt.Errorf("stress run %s %s%s", run.Name, strings.ToLower(string(st.Phase)), msg)
	}
	return nil
}

// printResults prints the results as a table (then the domains' of a run by domain),
// or the node results as data under -o, as it always has (the domains are in the
// StressRun's status.domains).
func (o *StressRunOptions) printResults(results []v1alpha1.StressNodeResult, domains []v1alpha1.StressDomainResult) error {
	if o.Output.Data() {
		return o.Output.Print(o.Out, results)
	}
	return PrintResults(o.Out, results, domains)
}

// PrintResults prints a run's results per node and test, then per domain when it ran
// by domain.
func PrintResults(out io.Writer, results []v1alpha1.StressNodeResult, domains []v1alpha1.StressDomainResult) error {
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "NODE\tTEST\tRESULT\tDETAIL")
	for _, r := range results {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.Node, kit.None(string(r.Test)), strings.ToLower(string(r.Outcome)), kit.None(r.Message))
	}
	if err := w.Flush(); err != nil || len(domains) == 0 {
		return err
	}
	fmt.Fprintln(out)
	w = printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "DOMAIN\tMEMBERS\tRESULT\tDETAIL")
	for _, d := range domains {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", d.Domain, strings.Join(d.Members, ","), strings.ToLower(string(d.Outcome)), kit.None(d.Message))
	}
	return w.Flush()
}

// Summary counts a run's nodes, and its domains when it ran by domain.
func Summary(st *v1alpha1.StressRunStatus) string {
	line := fmt.Sprintf("%d passed, %d failed, %d skipped", st.Passed, st.Failed, st.Skipped)
	if len(st.Domains) == 0 {
		return line
	}
	n := map[v1alpha1.StressOutcome]int{}
	for _, d := range st.Domains {
		n[d.Outcome]++
	}
	return line + fmt.Sprintf("; domains: %d passed, %d failed, %d skipped", n[v1alpha1.StressOutcomePassed], n[v1alpha1.StressOutcomeFailed], n[v1alpha1.StressOutcomeSkipped])
}

// progress is where the run's progress lines go: stdout, or stderr when stdout carries
// the results as data.
func (o *StressRunOptions) progress() io.Writer {
	if o.Output.Data() {
		return o.ErrOut
	}
	return o.Out
}

// StressScheduleOptions is `stress schedule`.
type StressScheduleOptions struct {
	kit.Mutation
	Pool        string
	Cron        string
	Image       string
	PluginImage string
	Tests       []string
	Timeout     time.Duration
	// Domains: each firing runs by domain (stress run --domains); T4 is checked now.
	Domains bool

	namespace string
	clients   *kit.Clients
	// schedule and timeZone are --cron split as a CronJob wants them (Validate).
	schedule, timeZone string
	genericiooptions.IOStreams
}

// NewCmdStressSchedule is `kubectl litepool stress schedule`.
func NewCmdStressSchedule(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &StressScheduleOptions{Mutation: kit.NewMutation(), IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "schedule --pool POOL --cron SCHEDULE [--image IMAGE] [--tests ...]",
		Short: "Run a pool's stress tests periodically, from a CronJob in the cluster",
		Long: templates.LongDesc(`
			Set up periodic stress tests of a pool: a CronJob (in the namespace of -n)
			runs "kubectl-litepool stress run --in-cluster=true" from the plugin image
			under its own ServiceAccount, bound to a ClusterRole that may create and
			read StressRuns and read Pools: litepool's controller runs the tests. The schedule is a standard
			five-field cron expression, checked as the CronJob controller reads it.
			The image and tests are also stored in the pool's spec.stressTest (stress
			run's defaults) when the pool has a Pool object. The schedule is the
			CronJob's alone: the deprecated spec.stressTest.schedule, which nothing
			read, is cleared. Running it again updates the schedule. --domains makes
			each run test by unit domain (stress run --domains); a pool without a
			topology is refused (T4) before anything is written.`),
		Example: templates.Examples(`
			# Every Sunday at 02:00
			kubectl litepool stress schedule --pool train-snt9b --cron "0 2 * * 0" --image registry.example.com/npu-stress:1.0

			# Show the objects it would create
			kubectl litepool stress schedule --pool train-snt9b --cron "@daily" --image registry.example.com/npu-stress:1.0 --dry-run=client`),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Pool, "pool", "", "Pool to test")
	fl.StringVar(&o.Cron, "cron", "", `When to run, as a cron expression ("0 2 * * 0", "@daily")`)
	fl.StringVar(&o.Image, "image", "", "Stress-test image")
	fl.StringVar(&o.PluginImage, "plugin-image", "ghcr.io/runwhere-ai/litepool-webhook:"+version.Version, "Image holding the kubectl-litepool binary, which the CronJob runs: litepool's own image (make image, deploy/webhook's) has it in /usr/local/bin")
	fl.StringSliceVar(&o.Tests, "tests", policy.StressTests, "Tests to run: "+strings.Join(policy.StressTests, ", "))
	fl.DurationVar(&o.Timeout, "timeout", 30*time.Minute, "How long a node's test may run")
	fl.BoolVar(&o.Domains, "domains", false, "Each run tests by unit domain of the pool's topology (stress run --domains)")
	o.Mutation.AddFlags(cmd, false)
	_ = cmd.RegisterFlagCompletionFunc("pool", kit.CompletePoolNames(f))
	return kit.Bind(cmd, f, o)
}

// Complete reads the namespace of -n and builds the clients.
func (o *StressScheduleOptions) Complete(f kit.Factory, cmd *cobra.Command, args []string) (err error) {
	if len(args) > 0 {
		return fmt.Errorf("stress schedule takes no arguments: name the pool with --pool")
	}
	if o.namespace, _, err = f.ToRawKubeConfigLoader().Namespace(); err != nil {
		return err
	}
	o.clients, err = o.CompleteClients(f, cmd)
	return err
}

// Validate checks the flags and -o; the cron expression is parsed as the CronJob
// controller does.
func (o *StressScheduleOptions) Validate() error {
	if err := o.Mutation.Validate(); err != nil {
		return err
	}
	if o.Pool == "" {
		return fmt.Errorf("--pool is required")
	}
	if err := policy.ValidatePoolName(o.Pool); err != nil {
		return err
	}
	var err error
	if o.schedule, o.timeZone, err = policy.ParseStressSchedule(o.Cron); err != nil {
		return err
	}
	if o.Image == "" {
		return fmt.Errorf("--image is required: the stress-test image")
	}
	if o.Timeout <= 0 {
		return fmt.Errorf("--timeout %s: must be positive", o.Timeout)
	}
	return policy.CheckStressTests(o.Tests)
}

// stressClusterRole may start a stress run, and no more: create and read StressRuns.
const stressClusterRole = "litepool-stress"

// StressScheduleObjects are the objects of a schedule.
func (o *StressScheduleOptions) objects() (*corev1.ServiceAccount, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *batchv1.CronJob) {
	name := "litepool-stress-" + o.Pool
	lbls := map[string]string{stress.LabelManagedBy: "litepool", stress.LabelComponent: stress.Component, stress.LabelInstance: o.Pool}
	sa := &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.namespace, Labels: lbls}}
	role := &rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: stressClusterRole, Labels: map[string]string{stress.LabelManagedBy: "litepool"}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"runwhere.ai"}, Resources: []string{"stressruns"}, Verbs: []string{"get", "list", "watch", "create"}},
			{APIGroups: []string{"runwhere.ai"}, Resources: []string{"pools"}, Verbs: []string{"get", "list"}},
		}}
	binding := &rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: stressClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: o.namespace}}}
	backoff := int32(0)
	history := int32(3)
	cj := &batchv1.CronJob{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.namespace, Labels: lbls},
		Spec: batchv1.CronJobSpec{
			Schedule: o.schedule, ConcurrencyPolicy: batchv1.ForbidConcurrent,
			SuccessfulJobsHistoryLimit: &history, FailedJobsHistoryLimit: &history,
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				BackoffLimit: &backoff,
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbls}, Spec: corev1.PodSpec{
					ServiceAccountName: name, RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "stress", Image: o.PluginImage,
						Command: o.command()}},
				}},
			}},
		}}
	if o.timeZone != "" {
		cj.Spec.TimeZone = &o.timeZone
	}
	return sa, role, binding, cj
}

// command is what each firing runs.
func (o *StressScheduleOptions) command() []string {
	cmd := []string{"kubectl-litepool", "stress", "run", "--pool", o.Pool, "--in-cluster=true",
		"--tests", strings.Join(o.Tests, ","), "--image", o.Image, "--timeout", o.Timeout.String()}
	if o.Domains {
		cmd = append(cmd, "--domains")
	}
	return cmd
}

// Run creates or updates the objects.
func (o *StressScheduleOptions) Run(ctx context.Context) error {
	if o.Domains {
		pool, err := o.clients.Pools.Get(ctx, o.Pool)
		if apierrors.IsNotFound(err) {
			pool, err = nil, nil
		}
		if err != nil {
			return err
		}
		if err := checkDomains(ctx, o.clients, pool, o.Pool); err != nil {
			return err
		}
	}
	sa, role, binding, cj := o.objects()
	if o.DryRun == cmdutil.DryRunClient && o.Output() == "" {
		// The default of a client dry run has always been the objects as YAML.
		p := &printers.YAMLPrinter{}
		for _, obj := range []runtime.Object{sa, role, binding, cj} {
			if err := p.PrintObj(obj, o.Out); err != nil {
				return err
			}
		}
		return nil
	}
	var created []func(context.Context) error // deletions that undo what this run created
	for _, s := range o.steps(sa, role, binding, cj, &created) {
		obj, err := s.write(ctx)
		if err != nil {
			return o.rollBack(ctx, fmt.Errorf("%s: %w", s.what, err), created)
		}
		if err := o.printConfigured(s.what, obj); err != nil {
			return err
		}
	}
	return o.storeOnPool(ctx)
}

// printConfigured says "kind/name configured" as this command always has (kubectl's
// name printer would say clusterrole.rbac.authorization.k8s.io/...), or prints the
// object under -o.
func (o *StressScheduleOptions) printConfigured(what string, obj runtime.Object) error {
	if o.Output() == "" {
		o.Say(o.IOStreams, "%s configured%s\n", what, o.Suffix())
		return nil
	}
	return o.Print(o.Out, obj, "configured")
}

// scheduleStep writes one object of a schedule and returns it as written.
type scheduleStep struct {
	what  string
	write func(context.Context) (runtime.Object, error)
}

// steps create the objects, or update the ones that exist; created collects the
// deletions that undo what was created. A client dry run writes nothing and returns
// the objects as they would be written.
func (o *StressScheduleOptions) steps(sa *corev1.ServiceAccount, role *rbacv1.ClusterRole, binding *rbacv1.ClusterRoleBinding,
	cj *batchv1.CronJob, created *[]func(context.Context) error) []scheduleStep {
	kube := o.clients.Kube
	create := metav1.CreateOptions{DryRun: o.ServerDryRun()}
	update := metav1.UpdateOptions{DryRun: o.ServerDryRun()}
	client := o.DryRun == cmdutil.DryRunClient
	return []scheduleStep{
		{"serviceaccount/" + sa.Name, func(ctx context.Context) (runtime.Object, error) {
			if client {
				return sa, nil
			}
			got, err := kube.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, create)
			if apierrors.IsAlreadyExists(err) {
				return sa, nil
			}
			if err == nil {
				*created = append(*created, func(ctx context.Context) error {
					return kube.CoreV1().ServiceAccounts(sa.Namespace).Delete(ctx, sa.Name, metav1.DeleteOptions{})
				})
			}
			return got, err
		}},
		{"clusterrole/" + role.Name, func(ctx context.Context) (runtime.Object, error) {
			if client {
				return role, nil
			}
			got, err := kube.RbacV1().ClusterRoles().Create(ctx, role, create)
			if err == nil {
				*created = append(*created, func(ctx context.Context) error {
					return kube.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})
				})
			}
			if !apierrors.IsAlreadyExists(err) {
				return got, err
			}
			cur, err := kube.RbacV1().ClusterRoles().Get(ctx, role.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			cur.Rules = role.Rules
			return kube.RbacV1().ClusterRoles().Update(ctx, cur, update)
		}},
		{"clusterrolebinding/" + binding.Name, func(ctx context.Context) (runtime.Object, error) {
			if client {
				return binding, nil
			}
			got, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, create)
			if apierrors.IsAlreadyExists(err) {
				return binding, nil
			}
			if err == nil {
				*created = append(*created, func(ctx context.Context) error {
					return kube.RbacV1().ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})
				})
			}
			return got, err
		}},
		{"cronjob/" + cj.Name, func(ctx context.Context) (runtime.Object, error) {
			if client {
				return cj, nil
			}
			got, err := kube.BatchV1().CronJobs(cj.Namespace).Create(ctx, cj, create)
			if !apierrors.IsAlreadyExists(err) {
				return got, err
			}
			cur, err := kube.BatchV1().CronJobs(cj.Namespace).Get(ctx, cj.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			cur.Spec = cj.Spec
			return kube.BatchV1().CronJobs(cj.Namespace).Update(ctx, cur, update)
		}},
	}
}

// rollBack deletes, newest first, the objects this run created before a step failed, so
// a refused schedule leaves nothing behind (objects that existed before stay).
func (o *StressScheduleOptions) rollBack(ctx context.Context, cause error, created []func(context.Context) error) error {
	if o.DryRun != cmdutil.DryRunNone || len(created) == 0 {
		return cause
	}
	ctx, cancel := interrupt.RollbackContext(ctx)
	defer cancel()
	var failed []error
	for i := len(created) - 1; i >= 0; i-- {
		if err := created[i](ctx); err != nil && !apierrors.IsNotFound(err) {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w; removing the objects created before it also failed: %v", cause, errors.Join(failed...))
	}
	return fmt.Errorf("%w; the %d object(s) created before it were removed", cause, len(created))
}

// storeOnPool keeps the image and tests in the pool's spec.stressTest, where stress run
// reads its defaults. The schedule is the CronJob's alone: spec.stressTest.schedule was
// written here and read by nothing, so an edit of it changed no schedule; it is
// deprecated, and cleared (null in the merge patch).
func (o *StressScheduleOptions) storeOnPool(ctx context.Context) error {
	pool, err := o.clients.Pools.Get(ctx, o.Pool)
	if apierrors.IsNotFound(err) {
		fmt.Fprintf(o.ErrOut, "pool %s has no Pool object: the schedule lives in the CronJob only\n", o.Pool)
		return nil
	}
	if err != nil {
		return err
	}
	st := map[string]any{"schedule": nil, "image": o.Image, "tests": o.Tests}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"stressTest": st}})
	if err != nil {
		return err
	}
	written := o.scheduled(pool) // a client dry run's answer: the pool as the patch would leave it
	if o.DryRun != cmdutil.DryRunClient {
		if written, err = o.clients.Pools.Patch(ctx, o.Pool, types.MergePatchType, patch, metav1.PatchOptions{DryRun: o.ServerDryRun()}); err != nil {
			return err
		}
	}
	o.Event(ctx, &events.Ref{Kind: "Pool", APIVersion: "runwhere.ai/v1alpha1", Name: pool.Name, UID: string(pool.UID)},
		false, "StressTestScheduled", "stress tests %s scheduled %q with image %s", strings.Join(o.Tests, ","), o.Cron, o.Image)
	o.Say(o.IOStreams, "pool/%s spec.stressTest: image %s, tests %s (the schedule is cronjob/litepool-stress-%s's)\n", o.Pool, o.Image, strings.Join(o.Tests, ","), o.Pool)
	if o.Output() == "" {
		return nil
	}
	return o.Print(o.Out, written, "configured")
}

// scheduled is pool with the image and tests in spec.stressTest, as the merge patch
// leaves it.
func (o *StressScheduleOptions) scheduled(pool *v1alpha1.Pool) *v1alpha1.Pool {
	p := pool.DeepCopy()
	p.Spec.StressTest = &v1alpha1.StressTestSpec{Image: o.Image}
	for _, t := range o.Tests {
		p.Spec.StressTest.Tests = append(p.Spec.StressTest.Tests, v1alpha1.StressTest(t))
	}
	return p
}
