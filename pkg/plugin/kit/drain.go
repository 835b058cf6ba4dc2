package kit

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/runwhere-ai/litepool/pkg/nodeops"
)

// AddDrainFlags adds kubectl drain's flags, with kubectl's defaults.
func AddDrainFlags(cmd *cobra.Command, d *nodeops.DrainOptions) {
	cmd.Flags().BoolVar(&d.Force, "force", false, "Continue even if there are pods that do not declare a controller (they are deleted and not recreated)")
	cmd.Flags().BoolVar(&d.IgnoreDaemonSets, "ignore-daemonsets", false, "Ignore DaemonSet-managed pods")
	cmd.Flags().BoolVar(&d.DeleteEmptyDirData, "delete-emptydir-data", false, "Continue even if there are pods using emptyDir (local data that will be deleted when the node is drained)")
	cmd.Flags().IntVar(&d.GracePeriodSeconds, "grace-period", -1, "Period of time in seconds given to each pod to terminate gracefully. If negative, the default value specified in the pod will be used")
	cmd.Flags().DurationVar(&d.Timeout, "timeout", 0, "The length of time to wait before giving up, zero means infinite")
	cmd.Flags().StringVar(&d.PodSelector, "pod-selector", "", "Label selector to filter pods on the node")
	cmd.Flags().BoolVar(&d.DisableEviction, "disable-eviction", false, "Force drain to use delete, even if eviction is supported. This will bypass checking PodDisruptionBudgets, use with caution")
	AddControllerNamespaceFlag(cmd.Flags(), &d.Namespace)
}

// AddControllerNamespaceFlag adds --controller-namespace: litepool's own namespace, where
// its controller holds the leader Lease and runs node work (installer, stress,
// remediation pods). A drain leaves that work alone, and the default install puts it in
// nodeops.DefaultNamespace; an install into another namespace (docs/install.md) is told
// with this flag.
func AddControllerNamespaceFlag(fl *pflag.FlagSet, ns *string) {
	fl.StringVar(ns, "controller-namespace", nodeops.DefaultNamespace, "litepool's own namespace: its controller's leader Lease is there, and its node work (installer, stress and remediation pods), which a drain leaves alone and which a command that does the work itself creates")
}
