// Package completion is `kubectl litepool completion`: shell completion scripts.
package completion

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"
)

// completionShells are the shells cobra writes scripts for, in the order help lists them.
var completionShells = []string{"bash", "zsh", "fish", "powershell"}

// executableName is the name the shell sees when the plugin runs on its own. The root
// command is named "kubectl litepool" for help and usage text; a completion script
// registered for "kubectl" would replace kubectl's own completion.
const executableName = "kubectl-litepool"

// CompletionOptions is `kubectl litepool completion SHELL`.
type CompletionOptions struct {
	Shell          string
	NoDescriptions bool

	root *cobra.Command
	genericiooptions.IOStreams
}

// NewCmdCompletion is `kubectl litepool completion bash|zsh|fish|powershell`.
func NewCmdCompletion(f kit.Factory, streams genericiooptions.IOStreams) *cobra.Command {
	o := &CompletionOptions{IOStreams: streams}
	cmd := &cobra.Command{
		Use:                   "completion " + strings.Join(completionShells, "|"),
		DisableFlagsInUseLine: true,
		Short:                 "Print the shell completion script for kubectl-litepool",
		Long: templates.LongDesc(`
			Print the shell completion script of kubectl-litepool for bash, zsh, fish
			or powershell. It completes commands, flags, pool names and node names (read
			from the cluster of the current context) when the plugin is run as
			kubectl-litepool.

			When the plugin is run as "kubectl litepool", kubectl's own completion does
			the work: kubectl 1.26 and newer asks an executable named
			kubectl_complete-litepool on PATH for the plugin's completions. Every release
			archive ships that script next to kubectl-litepool; put both on PATH (krew
			installs only the plugin: see its caveats or docs/install.md) and load
			kubectl's completion as usual.`),
		Example: templates.Examples(`
			# Print the bash completion script
			kubectl litepool completion bash

			# Load it into the current bash session
			source <(kubectl litepool completion bash)

			# Load it in every zsh session
			kubectl litepool completion zsh > "${fpath[1]}/_kubectl-litepool"

			# fish
			kubectl litepool completion fish > ~/.config/fish/completions/kubectl-litepool.fish

			# PowerShell
			kubectl litepool completion powershell | Out-String | Invoke-Expression`),
		ValidArgs: completionShells,
	}
	cmd.Flags().BoolVar(&o.NoDescriptions, "no-descriptions", false, "Complete without the one-line description of each candidate")
	return kit.Bind(cmd, f, o)
}

// Complete takes the shell and the root command.
func (o *CompletionOptions) Complete(_ kit.Factory, cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("completion takes one shell, one of %s; got %d arguments", strings.Join(completionShells, ", "), len(args))
	}
	o.Shell, o.root = args[0], cmd.Root()
	return nil
}

// Validate checks the shell.
func (o *CompletionOptions) Validate() error {
	for _, s := range completionShells {
		if o.Shell == s {
			return nil
		}
	}
	return fmt.Errorf("unsupported shell %q: use one of %s", o.Shell, strings.Join(completionShells, ", "))
}

// Run writes the script with cobra's generators, for the executable kubectl-litepool.
func (o *CompletionOptions) Run(context.Context) error {
	use := o.root.Use
	o.root.Use = executableName
	defer func() { o.root.Use = use }()
	return generateCompletion(o.root, o.Shell, !o.NoDescriptions, o.Out)
}

func generateCompletion(root *cobra.Command, shell string, descriptions bool, out io.Writer) error {
	switch shell {
	case "bash":
		return root.GenBashCompletionV2(out, descriptions)
	case "zsh":
		if descriptions {
			return root.GenZshCompletion(out)
		}
		return root.GenZshCompletionNoDesc(out)
	case "fish":
		return root.GenFishCompletion(out, descriptions)
	case "powershell":
		if descriptions {
			return root.GenPowerShellCompletionWithDesc(out)
		}
		return root.GenPowerShellCompletion(out)
	}
	return fmt.Errorf("unsupported shell %q", shell)
}
