package get

import (
	"context"
	"fmt"
	"sort"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// GetPoolsOptions is `get pools`.
type GetPoolsOptions struct {
	Print  *kit.PrintOptions
	SortBy string
	Names  []string

	clients *kit.Clients
	genericiooptions.IOStreams
}

var poolSortKeys = []string{"name", "gpu-total", "gpu-used", "gpu-free", "nodes"}

// NewCmdGetPools is `kubectl litepool get pools [NAME...]`.
func NewCmdGetPools(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &GetPoolsOptions{Print: kit.NewPrintOptions(), IOStreams: streams}
	cmd := &cobra.Command{
		Use:     "pools [NAME...]",
		Aliases: []string{"pool", "lpool"},
		Short:   "List pools with their accelerator use",
		Long: templates.LongDesc(`
			List pools with their status and accelerator figures: total is the
			allocatable accelerators of Ready member nodes, used is what running and
			pending pods bound to them request, free is the difference. Nodes with no
			pool label make up the "default" pool. Pools that exist only as node labels
			(as gpuctl makes them) are listed too.`),
		Example: templates.Examples(`
			# List every pool, the default pool last
			kubectl litepool get pools

			# More columns: type, accelerator, healthy/faulty nodes, driver versions
			kubectl litepool get pools -o wide

			# One pool as YAML, with its computed status
			kubectl litepool get pool train-a100 -o yaml

			# The pools with the most free accelerators first
			kubectl litepool get pools --sort-by=gpu-free`),
		ValidArgsFunction: kit.CompletePoolNames(f),
	}
	kit.Bind(cmd, f, o)
	o.Print.AddFlags(cmd)
	cmd.Flags().StringVar(&o.SortBy, "sort-by", "name", fmt.Sprintf("Sort by one of: %v (figures largest first)", poolSortKeys))
	return cmd
}

// Complete reads the pool names and builds the clients.
func (o *GetPoolsOptions) Complete(f kit.Factory, _ *cobra.Command, args []string) (err error) {
	o.Names = args
	o.clients, err = f.Clients()
	return err
}

// Validate checks the flags.
func (o *GetPoolsOptions) Validate() error {
	if err := o.Print.Validate(); err != nil {
		return err
	}
	return checkSortKey(o.SortBy, poolSortKeys)
}

// Run lists and prints.
func (o *GetPoolsOptions) Run(ctx context.Context) error {
	pools, err := kit.LoadPools(ctx, o.clients, "", o.ErrOut)
	if err != nil {
		return err
	}
	pools, err = selectPools(pools, o.Names)
	if err != nil {
		return err
	}
	sortPools(pools, o.SortBy)
	return kit.Print(o.Print, o.Out, pools, len(o.Names) == 1, PoolTable)
}

func selectPools(pools []v1alpha1.Pool, names []string) ([]v1alpha1.Pool, error) {
	if len(names) == 0 {
		return pools, nil
	}
	byName := map[string]v1alpha1.Pool{}
	for _, p := range pools {
		byName[p.Name] = p
	}
	var out []v1alpha1.Pool
	for _, n := range names {
		p, ok := byName[n]
		if !ok {
			return nil, apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("pools").GroupResource(), n)
		}
		out = append(out, p)
	}
	return out, nil
}

// sortPools orders by name ("default" last) or by a figure, largest first.
func sortPools(pools []v1alpha1.Pool, key string) {
	figure := func(p *v1alpha1.Pool) int64 {
		switch key {
		case "gpu-total":
			return p.Status.AcceleratorTotal
		case "gpu-used":
			return p.Status.AcceleratorUsed
		case "gpu-free":
			return p.Status.AcceleratorFree
		case "nodes":
			return int64(p.Status.NodeCount)
		}
		return 0
	}
	sort.SliceStable(pools, func(i, j int) bool {
		a, b := &pools[i], &pools[j]
		if fa, fb := figure(a), figure(b); fa != fb {
			return fa > fb
		}
		if (a.Name == policy.DefaultPool) != (b.Name == policy.DefaultPool) {
			return b.Name == policy.DefaultPool
		}
		return a.Name < b.Name
	})
}
