// Package upgrade is `kubectl litepool upgrade`: driver rollouts as DriverRollout
// objects. `upgrade driver` pre-flights, then creates the object and follows its status;
// status, resume and abort read and change it. With no controller acting on the
// object, the command drives it with pkg/upgrade's Reconciler, the controller's own.
package upgrade

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/templates"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/compat"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
)

// NewCmdUpgrade is `kubectl litepool upgrade`.
func NewCmdUpgrade(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "upgrade",
		Short: "Upgrade accelerator drivers node by node or pool-wide, and follow, resume or abort a rollout",
		Long: templates.LongDesc(`
			A driver rollout is a DriverRollout object (kubectl get driverrollouts).
			litepool's controller takes each of its nodes through a state machine
			(upgrade-required → cordon → wait-for-jobs → drain → install → validate →
			uncordon → done, or failed) and records each node's progress in the
			object's status. "upgrade status" shows it; "upgrade resume" and "upgrade
			abort" change the object's spec.`),
		Example: templates.Examples(`
			# Upgrade a pool two nodes at a time, starting with a canary
			kubectl litepool upgrade driver --pool train-snt9b --version 24.1.0.3 --max-unavailable 2 --canary snt9b-node-1

			# Where is the rollout?
			kubectl litepool upgrade status --pool train-snt9b`),
	}
	cmd.AddCommand(NewCmdUpgradeDriver(f, streams), NewCmdUpgradeStatus(f, streams),
		NewCmdUpgradeResume(f, streams), NewCmdUpgradeAbort(f, streams))
	return cmd
}

// UpgradeDriverOptions is `upgrade driver`.
type UpgradeDriverOptions struct {
	kit.Mutation
	Pool, Node, Version string
	MaxUnavailable      string
	// MaxUnavailableDomains, when set, rolls the pool domain by domain.
	MaxUnavailableDomains int32
	Canary                string
	InstallerImage        string
	InstallerCommand      []string
	// fromPool names what of the installer the Pool's spec.upgrade gave (image,
	// command), and poolName that Pool.
	fromPool        []string
	poolName        string
	WaitSelector    string
	WaitTimeout     time.Duration
	DrainTimeout    time.Duration
	InstallTimeout  time.Duration
	ValidateTimeout time.Duration
	ForceDrain      bool
	Force           bool
	Follow          FollowFlags
	Compat          kit.CompatSourceFlags

	clients  *kit.Clients
	rollouts client.Client
	clock    clock.PassiveClock
	// forcedPreflight: --force overrode a pre-flight that refused.
	forcedPreflight bool
	genericiooptions.IOStreams
}

// NewCmdUpgradeDriver is `kubectl litepool upgrade driver`.
func NewCmdUpgradeDriver(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradeDriverOptions{Mutation: kit.NewMutation(), IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "driver (--pool POOL | --node NODE) --version VERSION [-- INSTALLER COMMAND...]",
		Short: "Upgrade the accelerator driver of a node or, in waves, of a whole pool",
		Long: templates.LongDesc(`
			Upgrade the accelerator driver of one node or of every node of a pool.

			Each node is cordoned (a node that was cordoned before stays cordoned
			afterwards), its workload pods are given --wait-timeout to finish (those
			matching --wait-selector; then the drain evicts what is left), it is
			drained, the installer runs as a Job pinned to the node (image and command
			from the flags, else from the pool's spec.upgrade; the command is what
			follows "--"; the Job gets DRIVER_VERSION, NODE_NAME and the host's root at
			/host), and the node's driver-version label (huawei.com/driver.version,
			nvidia.com/cuda.driver-version.full or runwhere.ai/driver-version) must
			read the target within --validate-timeout. Then the node is uncordoned.

			A pool rollout first checks the target against the compatibility matrix
			with the pool's hardware and declared software, and refuses a chain that
			is incompatible or unknown unless --force. It then upgrades an optional
			--canary node alone, then the rest in waves: a wave starts no more nodes
			than --max-unavailable (a count, or a percentage of the pool's nodes
			rounded up) allows, counting nodes that are already cordoned or NotReady.
			The first failure stops the rollout; the failed node stays cordoned and
			is marked failed. Every step is stored in the DriverRollout's status (the
			node annotations runwhere.ai/upgrade-* mirror it for people and tools, and
			are never read as orders) and recorded as an Event on the node, so
			"upgrade resume" continues an interrupted rollout.

			The rollout is a DriverRollout object: the command creates it and follows
			its status (--wait, the default; -w prints each move). litepool's
			controller drives it, so the rollout goes on when the command exits, the
			controller restarts or its leader changes. When no controller acts on the
			object within --controller-timeout, the command drives it itself with the
			controller's reconciler and says so; --in-cluster leaves it to a
			controller in any case. Installer Jobs run in litepool's own namespace.

			A driver upgrade is a high-risk operation: it asks for confirmation unless
			--yes.`),
		Example: templates.Examples(`
			# Upgrade one node with the installer named by its pool's spec.upgrade
			kubectl litepool upgrade driver --node snt9b-node-1 --version 24.1.0.3

			# Roll a pool two nodes at a time after a canary, with an explicit installer
			kubectl litepool upgrade driver --pool train-snt9b --version 24.1.0.3 --max-unavailable 2 \
			  --canary snt9b-node-1 --installer-image registry.example.com/ascend-driver-installer:24.1.0.3 \
			  -- /install.sh --quiet

			# A quarter of the pool at a time, no prompt
			kubectl litepool upgrade driver --pool train-a100 --version 550.54.15 --max-unavailable 25% --yes

			# Start the rollout and return; the controller drives it
			kubectl litepool upgrade driver --pool train-snt9b --version 24.1.0.3 --wait=false --yes

			# Follow it, a line per move
			kubectl litepool upgrade driver --pool train-snt9b --version 24.1.0.3 -w --yes

			# Show the pre-flight verdict and the waves without changing anything
			kubectl litepool upgrade driver --pool train-snt9b --version 24.1.0.3 --max-unavailable 2 --dry-run=client`),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Pool, "pool", "", "Upgrade every node of this pool")
	fl.StringVar(&o.Node, "node", "", "Upgrade this node")
	fl.StringVar(&o.Version, "version", "", "Target driver version, as the node's driver-version label will read it")
	fl.StringVar(&o.MaxUnavailable, "max-unavailable", "1", "Most nodes of the pool unavailable at once: a count or a percentage (rounded up, at least 1)")
	fl.Int32Var(&o.MaxUnavailableDomains, "max-unavailable-domains", 0, "Roll the pool by domain (its spec.topology): each domain's members cordoned, drained and upgraded together, at most this many domains at once (replaces --max-unavailable; the pool's minNodes stays available)")
	fl.StringVar(&o.Canary, "canary", "", "Upgrade this node alone first; the rest follow only if it succeeds")
	fl.StringVar(&o.InstallerImage, "installer-image", "", "Installer image (default: the pool's spec.upgrade.installerImage)")
	fl.String("installer-namespace", "", "")
	_ = fl.MarkHidden("installer-namespace")
	fl.StringVar(&o.WaitSelector, "wait-selector", "", "Label selector of the workload pods to wait for before draining (default: every workload pod)")
	fl.DurationVar(&o.WaitTimeout, "wait-timeout", 10*time.Minute, "How long to wait for workload pods to finish before the drain evicts them (0: do not wait)")
	fl.DurationVar(&o.DrainTimeout, "drain-timeout", 5*time.Minute, "How long a drain may take (0: no limit)")
	fl.DurationVar(&o.InstallTimeout, "install-timeout", 30*time.Minute, "How long the installer Job may run")
	fl.DurationVar(&o.ValidateTimeout, "validate-timeout", 10*time.Minute, "How long to wait for the node's driver-version label to read the target")
	fl.BoolVar(&o.ForceDrain, "force-drain", false, "Drain pods that no controller manages, as kubectl drain --force")
	fl.BoolVar(&o.Force, "force", false, "Upgrade even when the compatibility pre-flight says the target is incompatible or unknown")
	o.Follow.addFlags(cmd)
	o.Compat.AddFlags(cmd)
	o.Mutation.AddFlags(cmd, true)
	_ = cmd.RegisterFlagCompletionFunc("pool", kit.CompletePoolNames(f))
	return kit.Bind(cmd, f, o)
}

// Complete reads the flags and the command after "--", and builds the clients.
func (o *UpgradeDriverOptions) Complete(f kit.Factory, cmd *cobra.Command, args []string) (err error) {
	if dash := cmd.ArgsLenAtDash(); dash >= 0 {
		o.InstallerCommand = args[dash:]
		args = args[:dash]
	}
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q: name the target with --pool or --node; put the installer command after --", strings.Join(args, " "))
	}
	if o.clients, err = o.CompleteClients(f, cmd); err != nil {
		return err
	}
	if cmd.Flags().Changed("installer-namespace") {
		return fmt.Errorf("--installer-namespace is no longer accepted: installer Jobs run in litepool's own namespace (--controller-namespace, default litepool-system), never in another")
	}
	o.clock = f.Clock()
	o.Follow.HandOver.Complete(cmd, o.clients.Kube, o.clock)
	o.rollouts, err = rolloutClientFor(f)
	return err
}

// Validate checks the flags and -o.
func (o *UpgradeDriverOptions) Validate() error {
	if err := o.Mutation.Validate(); err != nil {
		return err
	}
	if (o.Pool == "") == (o.Node == "") {
		return fmt.Errorf("give exactly one of --pool POOL or --node NODE")
	}
	if err := policy.ValidateDriverVersion(o.Version); err != nil {
		return err
	}
	if o.Follow.Watch && !o.Follow.Wait {
		return fmt.Errorf("--watch prints the moves of a rollout it follows: it does not go with --wait=false")
	}
	if _, err := policy.ParseMaxUnavailable(o.MaxUnavailable); err != nil {
		return err
	}
	if o.MaxUnavailableDomains < 0 {
		return fmt.Errorf("--max-unavailable-domains %d: must be at least 1", o.MaxUnavailableDomains)
	}
	if o.MaxUnavailableDomains > 0 && o.Pool == "" {
		return fmt.Errorf("--max-unavailable-domains applies to a pool rollout (--pool) of a pool with a topology")
	}
	if o.MaxUnavailableDomains > 0 && o.Canary != "" {
		return fmt.Errorf("--canary is a node and --max-unavailable-domains takes whole domains: upgrade the canary first with --node, then the pool by domain")
	}
	if o.Canary != "" && o.Pool == "" {
		return fmt.Errorf("--canary applies to a pool rollout (--pool)")
	}
	if o.WaitSelector != "" {
		if _, err := labels.Parse(o.WaitSelector); err != nil {
			return fmt.Errorf("invalid --wait-selector %q: %v", o.WaitSelector, err)
		}
	}
	for name, d := range map[string]time.Duration{"--wait-timeout": o.WaitTimeout, "--drain-timeout": o.DrainTimeout,
		"--install-timeout": o.InstallTimeout, "--validate-timeout": o.ValidateTimeout} {
		if d < 0 {
			return fmt.Errorf("%s %s: must not be negative", name, d)
		}
	}
	return o.Compat.Validate()
}

// Run pre-flights, confirms, marks the nodes and rolls.
func (o *UpgradeDriverOptions) Run(ctx context.Context) error {
	c := o.clients
	var pool *v1alpha1.Pool
	var targets []corev1.Node
	if o.Pool != "" {
		p, err := c.Pools.Get(ctx, o.Pool)
		if err == nil {
			pool = p
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		list, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.Set{policy.LabelPool: o.Pool}.String()})
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return fmt.Errorf("pool %q has no nodes (no node carries %s=%s)", o.Pool, policy.LabelPool, o.Pool)
		}
		targets = list.Items
	} else {
		n, err := c.Kube.CoreV1().Nodes().Get(ctx, o.Node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		targets = []corev1.Node{*n}
		if p := n.Labels[policy.LabelPool]; p != "" {
			if pl, err := c.Pools.Get(ctx, p); err == nil {
				pool = pl
			}
		}
	}
	if o.MaxUnavailableDomains > 0 {
		members := make([]*corev1.Node, len(targets))
		for i := range targets {
			members[i] = &targets[i]
		}
		if err := policy.CheckMaxUnavailableDomains(pool, o.Pool, members, o.MaxUnavailableDomains); err != nil {
			return fmt.Errorf("--max-unavailable-domains: %w", err)
		}
	}
	if err := o.installerFromPool(pool); err != nil {
		return err
	}
	if err := o.preflight(ctx, pool, targets); err != nil {
		return err
	}
	var need []string
	var already []string
	for i := range targets {
		if policy.DriverVersion(&targets[i]) == o.Version {
			already = append(already, targets[i].Name)
		} else {
			need = append(need, targets[i].Name)
		}
	}
	if o.Canary != "" && !slices.Contains(need, o.Canary) {
		return fmt.Errorf("--canary %q is not a node of pool %q that needs the upgrade (nodes to upgrade: %s)", o.Canary, o.Pool, upgradeOrNone(need))
	}
	if len(already) > 0 {
		o.Say(o.IOStreams, "already at %s: %s\n", o.Version, strings.Join(already, ", "))
	}
	if len(need) == 0 {
		o.Say(o.IOStreams, "nothing to upgrade: every node is at %s\n", o.Version)
		return nil
	}
	ro := o.rollout(need)
	if err := checkNotInAnother(ctx, o.rollouts, need); err != nil {
		return err
	}
	if o.DryRun != cmdutil.DryRunNone {
		return o.printPlan(ctx, ro, need)
	}
	if err := o.Confirm(o.IOStreams, o.risk(len(need)), ""); err != nil {
		return err
	}
	if err := o.rollouts.Create(ctx, ro); err != nil {
		return noCRD(err)
	}
	if o.Output() != "" {
		if err := o.Print(o.Out, ro, "created"); err != nil {
			return err
		}
	}
	o.Say(o.IOStreams, "driverrollout/%s created: %d node(s) to driver %s\n", ro.Name, len(need), o.Version)
	fl := &follower{FollowFlags: o.Follow, c: o.rollouts, kube: c.Kube, recorder: o.Recorder, clock: o.clock,
		out: o.SayTo(o.IOStreams), errOut: o.ErrOut}
	return fl.follow(ctx, ro.Name)
}

// rollout is the DriverRollout the flags describe. Its name says what and when, so
// `kubectl get driverrollouts` reads in order.
func (o *UpgradeDriverOptions) rollout(need []string) *v1alpha1.DriverRollout {
	scope := o.Pool
	spec := v1alpha1.DriverRolloutSpec{Pool: o.Pool, Version: o.Version, Canary: o.Canary, WaitSelector: o.WaitSelector,
		Installer:   v1alpha1.DriverInstaller{Image: o.InstallerImage, Command: o.InstallerCommand},
		WaitTimeout: &metav1.Duration{Duration: o.WaitTimeout}, DrainTimeout: &metav1.Duration{Duration: o.DrainTimeout},
		InstallTimeout: &metav1.Duration{Duration: o.InstallTimeout}, ValidateTimeout: &metav1.Duration{Duration: o.ValidateTimeout},
		ForceDrain: o.ForceDrain}
	switch {
	case o.Pool != "" && o.MaxUnavailableDomains > 0:
		spec.MaxUnavailableDomains = &o.MaxUnavailableDomains
	case o.Pool != "":
		v, _ := policy.ParseMaxUnavailable(o.MaxUnavailable)
		spec.MaxUnavailable = &v
	default:
		scope = o.Node
		spec.Nodes = need
	}
	name := fmt.Sprintf("%s-%s-%s", scope, o.Version, o.clock.Now().UTC().Format("20060102-150405"))
	name = strings.Trim(nonName.ReplaceAllString(strings.ToLower(name), "-"), "-.")
	if len(name) > 253 {
		name = name[len(name)-253:]
	}
	ro := &v1alpha1.DriverRollout{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	if o.forcedPreflight {
		// The webhook judges C1 again on the rollout; the annotation carries --force.
		ro.Annotations = map[string]string{policy.AnnotationForce: forcedBy}
	}
	return ro
}

// forcedBy is the runwhere.ai/force value of a rollout --force created: "<who>: <why>".
const forcedBy = "kubectl litepool upgrade driver --force: the operator overrode the compatibility pre-flight (C1)"

var nonName = regexp.MustCompile(`[^a-z0-9.-]+`)

// installerFromPool fills the installer from the pool's spec.upgrade where the flags
// leave it out, and remembers which came from there: whoever may edit the Pool wrote
// them, and the confirmation says so.
func (o *UpgradeDriverOptions) installerFromPool(pool *v1alpha1.Pool) error {
	if pool != nil && pool.Spec.Upgrade != nil {
		if o.InstallerImage == "" && pool.Spec.Upgrade.InstallerImage != "" {
			o.InstallerImage = pool.Spec.Upgrade.InstallerImage
			o.fromPool = append(o.fromPool, "image")
		}
		if len(o.InstallerCommand) == 0 && len(pool.Spec.Upgrade.InstallerCommand) > 0 {
			o.InstallerCommand = pool.Spec.Upgrade.InstallerCommand
			o.fromPool = append(o.fromPool, "command")
		}
		o.poolName = pool.Name
	}
	if o.InstallerImage == "" {
		return fmt.Errorf("no installer image: give --installer-image, or set spec.upgrade.installerImage on the pool")
	}
	return nil
}

// installer is what the confirmation and the plan say runs: the image and the command.
func (o *UpgradeDriverOptions) installer() string {
	cmd := "its image's entrypoint"
	if len(o.InstallerCommand) > 0 {
		cmd = strconv.Quote(strings.Join(o.InstallerCommand, " "))
	}
	return fmt.Sprintf("installer %s running %s", o.InstallerImage, cmd)
}

// installerSource says which of the installer's image and command come from the
// Pool's spec.upgrade, for the confirmation ("" when the flags gave both).
func (o *UpgradeDriverOptions) installerSource() string {
	if len(o.fromPool) == 0 {
		return ""
	}
	verb := "comes"
	if len(o.fromPool) > 1 {
		verb = "come"
	}
	return fmt.Sprintf("the installer %s %s from pool %s's spec.upgrade, written by whoever may edit that Pool: it runs privileged with the host's root on every node upgraded; give --installer-image and -- COMMAND to choose them yourself",
		strings.Join(o.fromPool, " and "), verb, o.poolName)
}

// preflight checks the target against the matrix, with the pool's hardware and
// declared software (rule C1); --force overrides, loudly.
func (o *UpgradeDriverOptions) preflight(ctx context.Context, pool *v1alpha1.Pool, nodes []corev1.Node) error {
	m, err := o.Compat.Load(ctx, o.clients.Kube)
	if err != nil {
		return err
	}
	models := make([]string, len(nodes))
	for i := range nodes {
		models[i] = policy.GPUType(&nodes[i])
	}
	var checks []kit.CompatCheck
	failed := false
	for _, res := range compat.DriverPreflight(m, pool, models, o.Version) {
		checks = append(checks, kit.CompatCheck{Subject: "pre-flight: driver " + o.Version, Result: res})
		failed = failed || res.Verdict != compat.Compatible
	}
	if err := kit.PrintCompatChecks(o.SayTo(o.IOStreams), checks, false, o.Compat.Describe()); err != nil {
		return err
	}
	if !failed {
		return nil
	}
	for _, ch := range checks {
		if err := ch.Result.Err(); err != nil {
			if o.Force {
				fmt.Fprintf(o.ErrOut, "warning: --force: upgrading despite the pre-flight: %v\n", err)
				o.forcedPreflight = true
				return nil
			}
			return fmt.Errorf("pre-flight refused the upgrade (pass --force to override): %w", err)
		}
	}
	return nil
}

func (o *UpgradeDriverOptions) risk(n int) kit.Risk {
	precautions := []string{"make sure running jobs checkpoint or can restart, and that the installer image fits the nodes' OS"}
	if src := o.installerSource(); src != "" {
		precautions = append(precautions, src)
	}
	scope, pace := "node "+o.Node, ""
	if o.Pool != "" {
		scope = fmt.Sprintf("%d node(s) of pool %s", n, o.Pool)
		pace = fmt.Sprintf(", at most %s unavailable at a time", o.MaxUnavailable)
		if o.MaxUnavailableDomains > 0 {
			pace = fmt.Sprintf(", domain by domain (all members of a domain together), at most %d domain(s) at a time", o.MaxUnavailableDomains)
		}
		if o.Canary != "" {
			pace += ", canary " + o.Canary + " first"
		}
	}
	return kit.Risk{
		Level:     "high",
		Operation: "driver upgrade to " + o.Version,
		Impact: []string{fmt.Sprintf("%s will be cordoned, drained and have the driver reinstalled by %s%s; workload pods still running after %s are evicted",
			scope, o.installer(), pace, o.WaitTimeout)},
		Precaution: precautions,
	}
}

func (o *UpgradeDriverOptions) printPlan(ctx context.Context, ro *v1alpha1.DriverRollout, need []string) error {
	if o.DryRun == cmdutil.DryRunServer {
		if err := o.rollouts.Create(ctx, ro.DeepCopy(), client.DryRunAll); err != nil {
			return noCRD(err)
		}
	}
	shown := ro.DeepCopy()
	for _, n := range need {
		shown.Status.Nodes = append(shown.Status.Nodes, v1alpha1.DriverRolloutNode{Name: n, State: string(policy.UpgradeRequired)})
	}
	var pool *v1alpha1.Pool
	if o.Pool != "" {
		if p, err := o.clients.Pools.Get(ctx, o.Pool); err == nil {
			pool = p
		} else if !apierrors.IsNotFound(err) {
			return err
		}
	}
	waves, waiting, maxU, err := upgrade.Predict(ctx, o.clients.Kube, shown, pool)
	if err != nil {
		return err
	}
	limit := fmt.Sprintf("max unavailable %d", maxU)
	if o.MaxUnavailableDomains > 0 {
		limit = fmt.Sprintf("by domain, max unavailable domains %d", maxU)
	}
	o.Say(o.IOStreams, "would upgrade %d node(s) to %s with %s (%s):\n", len(need), o.Version, o.installer(), limit)
	for i, w := range waves {
		o.Say(o.IOStreams, "  wave %d: %s\n", i+1, strings.Join(w, ", "))
	}
	if len(waiting) > 0 {
		o.Say(o.IOStreams, "  not started (NotReady): %s\n", strings.Join(waiting, ", "))
	}
	o.Say(o.IOStreams, "(dry run: nothing changed)\n")
	if o.Output() != "" {
		return o.Print(o.Out, ro, "created")
	}
	return nil
}

func upgradeOrNone(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}
