// Package plugin is the root of `kubectl litepool`. Each verb is a package below it
// (pkg/plugin/<verb>), in kubectl's Options / Complete / Validate / Run shape; what they
// share is pkg/plugin/kit.
package plugin

import (
	"github.com/runwhere-ai/litepool/pkg/plugin/check"
	"github.com/runwhere-ai/litepool/pkg/plugin/completion"
	"github.com/runwhere-ai/litepool/pkg/plugin/cordon"
	"github.com/runwhere-ai/litepool/pkg/plugin/create"
	"github.com/runwhere-ai/litepool/pkg/plugin/delete"
	"github.com/runwhere-ai/litepool/pkg/plugin/describe"
	"github.com/runwhere-ai/litepool/pkg/plugin/drain"
	"github.com/runwhere-ai/litepool/pkg/plugin/edit"
	"github.com/runwhere-ai/litepool/pkg/plugin/get"
	"github.com/runwhere-ai/litepool/pkg/plugin/hccl"
	"github.com/runwhere-ai/litepool/pkg/plugin/health"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/plugin/label"
	"github.com/runwhere-ai/litepool/pkg/plugin/nodepool"
	"github.com/runwhere-ai/litepool/pkg/plugin/restore"
	"github.com/runwhere-ai/litepool/pkg/plugin/scale"
	"github.com/runwhere-ai/litepool/pkg/plugin/stress"
	"github.com/runwhere-ai/litepool/pkg/plugin/upgrade"
	"github.com/runwhere-ai/litepool/pkg/plugin/version"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/templates"
)

// NewCmdLitepool builds the root command. kubectl's global flags (--kubeconfig,
// --context, -n, --server, ...) are registered once here and honoured by every command.
func NewCmdLitepool(streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		// Named "litepool" and displayed as "kubectl litepool": usage lines, help and
		// "Use ... --help" hints then read "kubectl litepool get pools ...", not
		// "kubectl get pools ...", which would be kubectl's own command.
		Use:         "litepool",
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl litepool"},
		Short:       "Resource pools for Kubernetes clusters of GPU and NPU machines",
		Long: templates.LongDesc(`
			litepool carves GPU and NPU nodes into pools for training, inference,
			development and compute; keeps the pools isolated; grows and shrinks them
			safely; rolls driver upgrades through them; and checks that driver,
			firmware, CANN, torch_npu and images fit together.`),
		Example: templates.Examples(`
			# The pools of the current context's cluster, with their accelerator use
			kubectl litepool get pools

			# Every command and its flags
			kubectl litepool --help

			# Plugin flags go after "litepool"; kubectl's global flags work as usual
			kubectl litepool get pools --context prod -o wide`),
		SilenceUsage:  true,
		SilenceErrors: true,
		CompletionOptions: cobra.CompletionOptions{
			DisableDefaultCmd: true,
		},
	}
	flags := cmd.PersistentFlags()
	configFlags := genericclioptions.NewConfigFlags(true).WithDeprecatedPasswordFlag().WithWarningPrinter(streams)
	configFlags.AddFlags(flags)
	matchVersion := cmdutil.NewMatchVersionFlags(configFlags)
	matchVersion.AddFlags(flags)
	accelerators := kit.AddAcceleratorsFlag(flags)
	f := kit.NewFactory(cmdutil.NewFactory(matchVersion), accelerators)

	cmd.AddCommand(
		get.NewCmdGet(f, streams),
		describe.NewCmdDescribe(f, streams),
		version.NewCmdVersion(streams),
		completion.NewCmdCompletion(f, streams),
		scale.NewCmdScale(f, streams),
		delete.NewCmdDelete(f, streams),
		create.NewCmdCreate(f, streams),
	)
	cmd.AddCommand(
		cordon.NewCmdCordon(f, streams),
		cordon.NewCmdUncordon(f, streams),
		drain.NewCmdDrain(f, streams),
		label.NewCmdLabel(f, streams),
		nodepool.NewCmdNodePool(f, streams),
		hccl.NewCmdHCCL(f, streams),
		edit.NewCmdEdit(f, streams),
		check.NewCmdCheck(f, streams),
		upgrade.NewCmdUpgrade(f, streams),
		stress.NewCmdStress(f, streams),
		health.NewCmdHealth(f, streams),
		restore.NewCmdRestore(f, streams),
	)
	return cmd
}
