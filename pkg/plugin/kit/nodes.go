package kit

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/runwhere-ai/litepool/pkg/nodeops"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// PoolSelector is the node label selector of a pool ("default": the nodes with no pool
// label; "": every node).
func PoolSelector(pool string) string {
	switch pool {
	case "":
		return ""
	case policy.DefaultPool:
		return "!" + policy.LabelPool
	}
	return policy.LabelPool + "=" + pool
}

// ListBySelector lists with a label selector.
func ListBySelector(sel string) metav1.ListOptions { return metav1.ListOptions{LabelSelector: sel} }

// UpdateNode is nodeops.ModifyNode with the command's clients.
//
// Old name, kept only for label and nodepool until their rewrite lands: call
// nodeops.ModifyNode with the clients' Kube.
func UpdateNode(ctx context.Context, c *Clients, name string, dryRun cmdutil.DryRunStrategy, change func(*corev1.Node) error) (*corev1.Node, bool, error) {
	return nodeops.ModifyNode(ctx, c.Kube, name, dryRun, change)
}
