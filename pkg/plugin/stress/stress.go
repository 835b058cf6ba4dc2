// Package stress is `kubectl litepool stress`: stress tests of a pool's idle nodes, run
// now (by this command or handed to the in-cluster controller) or on a schedule.
//
// -o: stress run's -o prints its results as data (json as it always did, and now yaml,
// jsonpath, go-template), not the Pool it annotates when it hands the run over: that was
// its meaning before -o name|json|yaml came to mutating commands, and scripts read it.
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/events"
	"github.com/runwhere-ai/litepool/pkg/interrupt"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/stress"
	"github.com/runwhere-ai/litepool/pkg/version"
	"k8s.io/utils/clock"
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
	cmd.AddCommand(NewCmdStressRun(f, streams), NewCmdStressSchedule(f, streams))
	return cmd
}

// StressRunOptions is `stress run`.
type StressRunOptions struct {
	kit.Mutation
	Pool     string
	Image    string
	Tests    []string
	Timeout  time.Duration
	KeepPods bool
	Command  []string
	Output   *kit.DataOutput
	// HandOver: InCluster hands the run to the in-cluster controller (recorded on the Pool).
	kit.HandOver

	namespace string
	clients   *kit.Clients
	clock     clock.PassiveClock
	genericiooptions.IOStreams
}

// NewCmdStressRun is `kubectl litepool stress run`.
func NewCmdStressRun(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &StressRunOptions{Mutation: kit.NewMutation(), Output: kit.NewDataOutput(), IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "run --pool POOL [--tests npu,hccs,roce,storage] [--image IMAGE] [-- COMMAND...]",
		Short: "Stress-test every idle node of a pool and mark failing nodes degraded",
		Long: templates.LongDesc(`
			Run a stress-test pod on each idle node of a pool: pinned to the node,
			holding all its accelerators, told the tests in STRESS_TESTS (and NODE_NAME,
			POOL). Busy nodes (running workload pods), cordoned and NotReady nodes are
			skipped and reported. A node whose pod succeeds is labelled
			runwhere.ai/health=healthy; one whose pod fails or does not finish within
			--timeout is labelled runwhere.ai/health=degraded, shown as Degraded by
			"get nodes" and "get pools", and gets a Warning event. The result is kept in
			the node's runwhere.ai/stress-result annotation. Pods of passing nodes are
			deleted; those of failing nodes are kept for their logs.

			The image (and the tests) default to the pool's spec.stressTest. The
			command exits non-zero when a node fails.

			When litepool's controller runs (in litepool-webhook), the run is recorded
			on the Pool (runwhere.ai/stress-run) and the command returns: the
			controller runs it, and --wait follows it. With no controller, or a pool
			without a Pool object, the command runs the tests itself and says why.
			--in-cluster=true|false chooses.`),
		Example: templates.Examples(`
			# NPU and HCCS tests on the idle nodes of a pool
			kubectl litepool stress run --pool train-snt9b --tests npu,hccs --image registry.example.com/npu-stress:1.0

			# Which nodes would be tested, changing nothing
			kubectl litepool stress run --pool train-snt9b --image registry.example.com/npu-stress:1.0 --dry-run=client`),
		RunE: kit.RunE(f, o),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Pool, "pool", "", "Pool whose idle nodes to test")
	fl.StringVar(&o.Image, "image", "", "Stress-test image (default: the pool's spec.stressTest.image)")
	fl.StringSliceVar(&o.Tests, "tests", nil, "Tests to run: "+strings.Join(stress.Tests, ", ")+" (default: the pool's spec.stressTest.tests, else all)")
	fl.DurationVar(&o.Timeout, "timeout", 30*time.Minute, "How long a node's test may run; a node still running then has failed")
	fl.BoolVar(&o.KeepPods, "keep-pods", false, "Keep the pods of passing nodes too")
	o.Output.AddFlags(cmd)
	o.HandOver.AddFlags(cmd, "Record the run on the Pool and return: the controller in litepool-webhook runs it (docs/stress.md). Default: true when the controller runs (holds its leader Lease)",
		"With a run handed to the cluster: follow it until it ends")
	cmdutil.AddDryRunFlag(cmd) // not Mutation.AddFlags: -o is the results' (see the package doc)
	_ = cmd.RegisterFlagCompletionFunc("pool", kit.CompletePoolNames(f))
	return cmd
}

// Complete fills defaults from the pool.
func (o *StressRunOptions) Complete(f kit.Factory, cmd *cobra.Command, args []string) (err error) {
	if dash := cmd.ArgsLenAtDash(); dash >= 0 {
		o.Command = args[dash:]
		args = args[:dash]
	}
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q: name the pool with --pool; put a command after --", strings.Join(args, " "))
	}
	if o.namespace, _, err = f.ToRawKubeConfigLoader().Namespace(); err != nil {
		return err
	}
	if o.clients, err = f.Clients(); err != nil {
		return err
	}
	if err = o.Mutation.Complete(cmd, o.clients); err != nil {
		return err
	}
	o.clock = f.Clock()
	if o.Pool == "" {
		return fmt.Errorf("--pool is required")
	}
	if p, err := o.clients.Pools.Get(cmd.Context(), o.Pool); err == nil && p.Spec.StressTest != nil {
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
		o.Tests = stress.Tests
	}
	if o.DryRun == cmdutil.DryRunNone {
		o.Choose(cmd.Context(), cmd, o.clients.Kube, o.clock.Now())
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
	if o.Timeout < 0 {
		return fmt.Errorf("--timeout %s: must not be negative", o.Timeout)
	}
	if o.Wait && (!o.InCluster || o.DryRun != cmdutil.DryRunNone) {
		why := o.WhyNot()
		if o.DryRun != cmdutil.DryRunNone {
			why = "a dry run"
		}
		return fmt.Errorf("--wait follows a stress run handed to the cluster, and this one is not (%s): the plugin runs the tests and waits anyway", why)
	}
	return stress.ValidateTests(o.Tests)
}

// Run tests and reports, or hands the run to the in-cluster controller.
func (o *StressRunOptions) Run(ctx context.Context) error {
	if o.InCluster && o.DryRun == cmdutil.DryRunNone {
		if handed, err := o.handOver(ctx); handed || err != nil {
			return err
		}
	}
	if o.NoController != "" && o.DryRun == cmdutil.DryRunNone {
		fmt.Fprintf(o.ErrOut, "stress run: run by this command (%s); stopping it stops the run\n", o.NoController)
	}
	runner := &stress.Runner{Kube: o.clients.Kube, Recorder: o.Recorder}
	results, err := runner.Run(ctx, stress.Options{Pool: o.Pool, Image: o.Image, Command: o.Command, Tests: o.Tests,
		Namespace: o.namespace, Timeout: o.Timeout, KeepPods: o.KeepPods, DryRun: o.DryRun, Progress: o.progress(),
		Accelerators: o.clients.Accelerators})
	if err != nil {
		return err
	}
	if o.Output.Data() {
		if err := o.Output.Print(o.Out, results); err != nil {
			return err
		}
	} else {
		w := printers.GetNewTabWriter(o.Out)
		fmt.Fprintln(w, "NODE\tRESULT\tDETAIL")
		for _, r := range results {
			fmt.Fprintf(w, "%s\t%s\t%s\n", r.Node, r.Result, kit.None(r.Detail))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	var failed, skipped []string
	passed := 0
	for _, r := range results {
		switch r.Result {
		case stress.Failed:
			failed = append(failed, r.Node)
		case stress.Skipped:
			skipped = append(skipped, r.Node)
		case stress.Passed:
			passed++
		}
	}
	if o.DryRun != cmdutil.DryRunNone {
		fmt.Fprintln(o.ErrOut, "(dry run: no pod created, no node labelled)")
		return nil
	}
	fmt.Fprintf(o.ErrOut, "pool %s: %d passed, %d failed, %d skipped\n", o.Pool, passed, len(failed), len(skipped))
	if len(failed) > 0 {
		return policy.Violationf("T2", "%d node(s) failed the stress test and are now %s=%s: %s", len(failed), policy.LabelHealth, policy.HealthDegraded, strings.Join(failed, ", "))
	}
	return nil
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
			runs "kubectl-litepool stress run" from the plugin image under its own
			ServiceAccount, bound to a ClusterRole that may read and label nodes, run
			test pods, record events and read Pools. The schedule is a standard
			five-field cron expression, checked as the CronJob controller reads it.
			The schedule, image and tests are also stored in the pool's spec.stressTest
			when the pool has a Pool object. Running it again updates the schedule.`),
		Example: templates.Examples(`
			# Every Sunday at 02:00
			kubectl litepool stress schedule --pool train-snt9b --cron "0 2 * * 0" --image registry.example.com/npu-stress:1.0

			# Show the objects it would create
			kubectl litepool stress schedule --pool train-snt9b --cron "@daily" --image registry.example.com/npu-stress:1.0 --dry-run=client`),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("stress schedule takes no arguments: name the pool with --pool")
			}
			var err error
			if o.namespace, _, err = f.ToRawKubeConfigLoader().Namespace(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			if o.clients, err = f.Clients(); err != nil {
				return err
			}
			if err := o.Mutation.Complete(cmd, o.clients); err != nil {
				return err
			}
			if err := o.Mutation.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Pool, "pool", "", "Pool to test")
	fl.StringVar(&o.Cron, "cron", "", `When to run, as a cron expression ("0 2 * * 0", "@daily")`)
	fl.StringVar(&o.Image, "image", "", "Stress-test image")
	fl.StringVar(&o.PluginImage, "plugin-image", "ghcr.io/runwhere-ai/kubectl-litepool:"+version.Version, "Image holding the kubectl-litepool binary, which the CronJob runs")
	fl.StringSliceVar(&o.Tests, "tests", stress.Tests, "Tests to run: "+strings.Join(stress.Tests, ", "))
	fl.DurationVar(&o.Timeout, "timeout", 30*time.Minute, "How long a node's test may run")
	o.Mutation.AddFlags(cmd, false)
	_ = cmd.RegisterFlagCompletionFunc("pool", kit.CompletePoolNames(f))
	return cmd
}

// Validate checks the flags; the cron expression is parsed as the CronJob controller does.
func (o *StressScheduleOptions) Validate() error {
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
	return stress.ValidateTests(o.Tests)
}

// stressClusterRole may do what `stress run` does.
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
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "create", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
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
						Command: []string{"kubectl-litepool", "stress", "run", "--pool", o.Pool, "--namespace", o.namespace,
							"--tests", strings.Join(o.Tests, ","), "--image", o.Image, "--timeout", o.Timeout.String()}}},
				}},
			}},
		}}
	if o.timeZone != "" {
		cj.Spec.TimeZone = &o.timeZone
	}
	return sa, role, binding, cj
}

// Run creates or updates the objects.
func (o *StressScheduleOptions) Run(ctx context.Context) error {
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

// storeOnPool keeps the schedule in the pool's spec.stressTest (pools without an
// object keep it only in the CronJob).
func (o *StressScheduleOptions) storeOnPool(ctx context.Context) error {
	pool, err := o.clients.Pools.Get(ctx, o.Pool)
	if apierrors.IsNotFound(err) {
		fmt.Fprintf(o.ErrOut, "pool %s has no Pool object: the schedule lives in the CronJob only\n", o.Pool)
		return nil
	}
	if err != nil {
		return err
	}
	st := map[string]any{"schedule": o.Cron, "image": o.Image, "tests": o.Tests}
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
	o.Say(o.IOStreams, "pool/%s spec.stressTest: schedule %q, image %s, tests %s\n", o.Pool, o.Cron, o.Image, strings.Join(o.Tests, ","))
	if o.Output() == "" {
		return nil
	}
	return o.Print(o.Out, written, "configured")
}

// scheduled is pool with the schedule in spec.stressTest, as the merge patch leaves it.
func (o *StressScheduleOptions) scheduled(pool *v1alpha1.Pool) *v1alpha1.Pool {
	p := pool.DeepCopy()
	p.Spec.StressTest = &v1alpha1.StressTestSpec{Schedule: o.Cron, Image: o.Image}
	for _, t := range o.Tests {
		p.Spec.StressTest.Tests = append(p.Spec.StressTest.Tests, v1alpha1.StressTest(t))
	}
	return p
}
