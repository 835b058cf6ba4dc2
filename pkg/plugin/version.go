package plugin

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"
	"sigs.k8s.io/yaml"

	"github.com/runwhere-ai/litepool/pkg/version"
)

// NewCmdVersion prints the plugin's version.
func NewCmdVersion(streams genericiooptions.IOStreams) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the litepool version",
		Long:  "Print the version, commit, Go version and platform of this kubectl-litepool build.",
		Example: templates.Examples(`
			kubectl litepool version
			kubectl litepool version -o json`),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			info := version.Get()
			switch output {
			case "":
				_, err := fmt.Fprintf(streams.Out, "litepool %s (commit %s, %s, %s)\n", info.Version, info.Commit, info.GoVersion, info.Platform)
				return err
			case "json":
				b, _ := json.MarshalIndent(info, "", "  ")
				_, err := fmt.Fprintln(streams.Out, string(b))
				return err
			case "yaml":
				b, _ := yaml.Marshal(info)
				_, err := streams.Out.Write(b)
				return err
			}
			return fmt.Errorf("--output must be json or yaml, not %q", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json or yaml")
	return cmd
}
