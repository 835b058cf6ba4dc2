package stress

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
)

// StressStatusOptions is `stress status`: one run's results, read, changing nothing.
type StressStatusOptions struct {
	// Name is the run; Pool, when no run is named, picks the pool's newest run.
	Name, Pool string

	runs client.Client
	genericiooptions.IOStreams
}

// NewCmdStressStatus is `kubectl litepool stress status`.
func NewCmdStressStatus(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &StressStatusOptions{IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "status (RUN | --pool POOL)",
		Short: "Show a stress run's results per node and test, and per domain for a run by domain",
		Long: templates.LongDesc(`
			Show a stress run (a StressRun object): its phase, its results per node and
			test, and, for a run by domain (--domains), each domain's result: its
			members, passed, failed (naming the members that failed) or skipped (naming
			the member that was not idle). --pool shows the pool's newest run.`),
		Example: templates.Examples(`
			# The newest run of a pool
			kubectl litepool stress status --pool train-snt9b`),
		Args: cobra.MaximumNArgs(1),
	}
	cmd.Flags().StringVar(&o.Pool, "pool", "", "Show the newest run of this pool")
	_ = cmd.RegisterFlagCompletionFunc("pool", kit.CompletePoolNames(f))
	return kit.Bind(cmd, f, o)
}

// Complete takes the run's name and builds the StressRun client.
func (o *StressStatusOptions) Complete(f kit.Factory, _ *cobra.Command, args []string) (err error) {
	if len(args) == 1 {
		o.Name = args[0]
	}
	o.runs, err = newRunsClient(f)
	return err
}

// Validate wants a run or a pool, not both.
func (o *StressStatusOptions) Validate() error {
	if (o.Name == "") == (o.Pool == "") {
		return fmt.Errorf("name a stress run, or give --pool for the pool's newest run (kubectl get stressruns lists them)")
	}
	return nil
}

// Run prints the run.
func (o *StressStatusOptions) Run(ctx context.Context) error {
	run, err := o.find(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(o.Out, progressLine(run))
	if err := PrintResults(o.Out, run.Status.Results, run.Status.Domains); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "pool %s: %s\n", run.Spec.Pool, Summary(&run.Status))
	return nil
}

// find reads the named run, or the pool's newest (by creation, then name).
func (o *StressStatusOptions) find(ctx context.Context) (*v1alpha1.StressRun, error) {
	if o.Name != "" {
		var run v1alpha1.StressRun
		if err := o.runs.Get(ctx, client.ObjectKey{Name: o.Name}, &run); err != nil {
			return nil, fmt.Errorf("stress run %s: %w", o.Name, err)
		}
		return &run, nil
	}
	var list v1alpha1.StressRunList
	if err := o.runs.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing stress runs: %w", err)
	}
	var newest *v1alpha1.StressRun
	for i := range list.Items {
		r := &list.Items[i]
		if r.Spec.Pool == o.Pool && (newest == nil || newer(r, newest)) {
			newest = r
		}
	}
	if newest == nil {
		return nil, fmt.Errorf("pool %s has no stress run (kubectl litepool stress run --pool %s starts one)", o.Pool, o.Pool)
	}
	return newest, nil
}

func newer(a, b *v1alpha1.StressRun) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	return a.Name > b.Name
}
