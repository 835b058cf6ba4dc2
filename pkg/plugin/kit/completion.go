package kit

import (
	"context"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
)

// completionTimeout bounds a completion's call to the cluster: a shell waiting on TAB
// is worse than no candidates.
const completionTimeout = 5 * time.Second

// CompletePoolNames completes pool names from the cluster (Pool objects, label-only
// pools and "default"). Errors complete nothing rather than print.
func CompletePoolNames(f Factory) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		c, err := f.Clients()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		pools, err := LoadPools(ctx, c, "", io.Discard)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		for _, p := range pools {
			names = append(names, p.Name)
		}
		return filterCompletions(names, args, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// CompleteNodeNames completes node names from the cluster. It lists metadata only, so
// that completing on a cluster of thousands of nodes moves names, not node status. When
// the command has a --pool flag that is set, only that pool's nodes are offered
// ("default": the nodes with no pool label). Names already on the command line are left
// out. Wire it as a command's ValidArgsFunction or with RegisterFlagCompletionFunc.
func CompleteNodeNames(f Factory) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		selector := ""
		if fl := cmd.Flags().Lookup("pool"); fl != nil && fl.Changed {
			selector = PoolSelector(fl.Value.String())
		}
		names, err := nodeNames(f, selector)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return filterCompletions(names, args, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

func nodeNames(f Factory, selector string) ([]string, error) {
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	client, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	list, err := client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}).
		List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list.Items))
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	return names, nil
}

// filterCompletions keeps the names that start with toComplete and are not already
// among args, sorted, as kubectl's own completions do.
func filterCompletions(names, args []string, toComplete string) []string {
	given := map[string]bool{}
	for _, a := range args {
		given[a] = true
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, toComplete) && !given[n] {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
