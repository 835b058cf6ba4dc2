package kit

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
)

// HandOver is --in-cluster, --wait and --controller-namespace of the commands that hand
// long work to litepool's controller (upgrade driver, stress run): by default the work
// is handed over when the controller runs, and done by the command when it does not.
type HandOver struct {
	InCluster           bool
	Wait                bool
	ControllerNamespace string
	// NoController says why the command does the work itself when --in-cluster was not
	// given (no controller runs); Asked: --in-cluster=true was given.
	NoController string
	Asked        bool
}

// AddFlags adds the flags, with the command's own words for --in-cluster and --wait.
func (h *HandOver) AddFlags(cmd *cobra.Command, inCluster, wait string) {
	fl := cmd.Flags()
	fl.BoolVar(&h.InCluster, "in-cluster", false, inCluster)
	fl.BoolVar(&h.Wait, "wait", false, wait)
	fl.StringVar(&h.ControllerNamespace, "controller-namespace", "litepool-system", "litepool's namespace, where Deployment litepool-controller keeps the leader Lease litepool-controller that tells whether the controller runs")
}

// Choose fills InCluster when --in-cluster was not given: whether the controller runs
// at now (ControllerRunning).
func (h *HandOver) Choose(ctx context.Context, cmd *cobra.Command, kube kubernetes.Interface, now time.Time) {
	if cmd.Flags().Changed("in-cluster") {
		h.Asked = h.InCluster
		return
	}
	h.InCluster, h.NoController = ControllerRunning(ctx, kube, h.ControllerNamespace, now)
}

// WhyNot says why the work is not handed over: --in-cluster=false, or no controller.
func (h *HandOver) WhyNot() string {
	if h.NoController != "" {
		return h.NoController
	}
	return "--in-cluster=false"
}
