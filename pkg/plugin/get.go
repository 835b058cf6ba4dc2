package plugin

import (
	"github.com/runwhere-ai/litepool/pkg/cmd/kit"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"
)

// getters are the nouns of `get`; each noun file registers itself.
var getters []func(kit.Factory, genericiooptions.IOStreams) *cobra.Command

// NewCmdGet is `kubectl litepool get NOUN`.
func NewCmdGet(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get",
		Short: "Display pools, nodes, node pools or litepool labels",
		Long:  "Display one or many litepool resources as a table, or as json, yaml, name or jsonpath with -o.",
		Example: templates.Examples(`
			kubectl litepool get pools
			kubectl litepool get pools -o wide`),
	}
	for _, g := range getters {
		cmd.AddCommand(g(f, streams))
	}
	return cmd
}
