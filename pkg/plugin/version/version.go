// Package version is `kubectl litepool version`.
package version

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/version"
)

// NewCmdVersion prints the plugin's version.
func NewCmdVersion(streams genericiooptions.IOStreams) *cobra.Command {
	output := kit.NewDataOutput()
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the litepool version",
		Long:  "Print the version, commit, Go version and platform of this kubectl-litepool build.",
		Example: templates.Examples(`
			kubectl litepool version
			kubectl litepool version -o json
			kubectl litepool version -o jsonpath='{.version}'`),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := output.Validate(); err != nil {
				return err
			}
			info := version.Get()
			if output.Data() {
				return output.Print(streams.Out, info)
			}
			_, err := fmt.Fprintf(streams.Out, "litepool %s (commit %s, %s, %s)\n", info.Version, info.Commit, info.GoVersion, info.Platform)
			return err
		},
	}
	output.AddFlags(cmd)
	return cmd
}
