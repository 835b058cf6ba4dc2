// Package version is `kubectl litepool version`.
package version

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/version"
)

// VersionOptions is `version`.
type VersionOptions struct {
	Output *kit.DataOutput
	genericiooptions.IOStreams
}

// NewCmdVersion prints the plugin's version. It never reaches the cluster, so it is
// bound without a Factory.
func NewCmdVersion(streams genericiooptions.IOStreams) *cobra.Command {
	o := &VersionOptions{Output: kit.NewDataOutput(), IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the litepool version",
		Long:  "Print the version, commit, Go version and platform of this kubectl-litepool build.",
		Example: templates.Examples(`
			kubectl litepool version
			kubectl litepool version -o json
			kubectl litepool version -o jsonpath='{.version}'`),
		Args: cobra.NoArgs,
	}
	o.Output.AddFlags(cmd)
	return kit.Bind(cmd, nil, o)
}

// Complete has nothing to read: version takes no arguments and no clients.
func (o *VersionOptions) Complete(kit.Factory, *cobra.Command, []string) error { return nil }

// Validate checks -o.
func (o *VersionOptions) Validate() error { return o.Output.Validate() }

// Run prints the version.
func (o *VersionOptions) Run(context.Context) error {
	info := version.Get()
	if o.Output.Data() {
		return o.Output.Print(o.Out, info)
	}
	_, err := fmt.Fprintf(o.Out, "litepool %s (commit %s, %s, %s)\n", info.Version, info.Commit, info.GoVersion, info.Platform)
	return err
}
