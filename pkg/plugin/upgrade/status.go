package upgrade

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/kubectl/pkg/util/templates"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/upgrade"
)

// UpgradeStatusOptions is `upgrade status`.
type UpgradeStatusOptions struct {
	Scope    upgradeScope
	Output   *kit.DataOutput
	Watch    bool
	clients  *kit.Clients
	rollouts client.Client
	clock    clock.PassiveClock
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
	o.clock = f.Clock()
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
	// Strategy is Node (maxUnavailable) or Domain (maxUnavailableDomains).
	Strategy string `json:"strategy"`
	// WallSeconds is from the rollout's start to its end (or now while under way).
	WallSeconds int64 `json:"wallSeconds,omitempty"`
	// DomainUnavailableSeconds: the sum over domains of the time with a member out.
	DomainUnavailableSeconds int64                          `json:"domainUnavailableSeconds,omitempty"`
	Domains                  []v1alpha1.DriverRolloutDomain `json:"domains,omitempty"`
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
			InProgress: c.InProgress, Pending: c.Pending, Failed: c.Failed, Aborted: c.Aborted, Strategy: strategyOf(ro),
			WallSeconds: wallSeconds(ro, o.now()), DomainUnavailableSeconds: ro.Status.DomainUnavailableSeconds, Domains: ro.Status.Domains})
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

func (o *UpgradeStatusOptions) now() time.Time {
	if o.clock == nil {
		return time.Now()
	}
	return o.clock.Now()
}

// strategyOf names how a rollout paces itself.
func strategyOf(ro *v1alpha1.DriverRollout) string {
	if ro.Spec.MaxUnavailableDomains != nil {
		return "Domain"
	}
	return "Node"
}

// wallSeconds is the rollout's wall time: start to end, or to now while under way.
func wallSeconds(ro *v1alpha1.DriverRollout, now time.Time) int64 {
	st := ro.Status
	if st.StartTime == nil {
		return 0
	}
	if st.CompletionTime != nil {
		now = st.CompletionTime.Time
	}
	return int64(now.Sub(st.StartTime.Time) / time.Second)
}

// printDomains is the per-domain table of the rollouts that have domains.
func printDomains(out io.Writer, rollouts []UpgradeRolloutStatus) error {
	w := printers.GetNewTabWriter(out)
	header := false
	for _, r := range rollouts {
		for _, d := range r.Domains {
			if !header {
				fmt.Fprintln(w, "DOMAIN\tROLLOUT\tSTATE\tDONE\tUNAVAILABLE")
				header = true
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d/%d\t%s\n", d.Name, r.Name, d.State, d.Done, d.Nodes, time.Duration(d.UnavailableSeconds)*time.Second)
		}
	}
	return w.Flush()
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
	if err := printDomains(o.Out, st.Rollouts); err != nil {
		return err
	}
	last := map[string]string{}
	for i := range list {
		line := progressLine(&list[i])
		fmt.Fprintln(o.Out, line)
		last[list[i].Name] = line
		if r := st.Rollouts[i]; r.WallSeconds > 0 {
			fmt.Fprintf(o.Out, "%s: wall time %s, domain-unavailable %.1f min\n", r.Name, time.Duration(r.WallSeconds)*time.Second, float64(r.DomainUnavailableSeconds)/60)
		}
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
