package kit

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
