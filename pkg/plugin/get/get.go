// Package get is `kubectl litepool get`: pools, nodes, node pools, litepool labels and
// quotas, each a table built as a metav1.Table, or -o json|yaml|name|jsonpath.
package get

import (
	"fmt"
	"slices"

	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"
)

// NewCmdGet is `kubectl litepool get NOUN`.
func NewCmdGet(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get",
		Short: "Display pools, nodes, node pools, topology domains or litepool labels",
		Long:  "Display one or many litepool resources as a table, or as json, yaml, name or jsonpath with -o.",
		Example: templates.Examples(`
			kubectl litepool get pools
			kubectl litepool get pools -o wide`),
	}
	cmd.AddCommand(
		NewCmdGetPools(f, streams),
		NewCmdGetNodes(f, streams),
		NewCmdGetNodePools(f, streams),
		NewCmdGetLabels(f, streams),
		NewCmdGetQuota(f, streams),
		NewCmdGetDomains(f, streams),
	)
	return cmd
}

// checkSortKey checks --sort-by against the keys a noun sorts by.
func checkSortKey(key string, keys []string) error {
	if !slices.Contains(keys, key) {
		return fmt.Errorf("invalid --sort-by %q: must be one of %v", key, keys)
	}
	return nil
}
