package describe

import (
	"context"
	"io"

	corev1 "k8s.io/api/core/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// describeHealth adds the node's place in its pool's health loop (docs/health.md):
// state, reason, since, the re-check run and remediation Job, and its last transitions.
// A node the loop holds nothing about gets no section.
func (o *DescribeNodeOptions) describeHealth(ctx context.Context, node *corev1.Node) error {
	name := node.Labels[policy.LabelPool]
	if name == "" {
		return nil
	}
	pool, err := o.clients.Pools.Get(ctx, name)
	if err != nil {
		return nil //nolint:nilerr // a label-only pool, or no CRD: there is no health loop to show
	}
	for i := range pool.Status.NodeHealth {
		if e := &pool.Status.NodeHealth[i]; e.Node == node.Name {
			return HealthSection(o.Out, e)
		}
	}
	return nil
}

// HealthSection writes one node's health entry.
func HealthSection(out io.Writer, e *v1alpha1.NodeHealthStatus) error {
	return tabbed(out, func(w prefixWriter) {
		w.Write(level0, "Health:\n")
		w.Write(level1, "State:\t%s\n", e.State)
		w.Write(level1, "Reason:\t%s\n", e.Reason)
		w.Write(level1, "Message:\t%s\n", e.Message)
		w.Write(level1, "Since:\t%s\n", e.Since.UTC().Format("2006-01-02T15:04:05Z"))
		if e.StressRun != "" {
			w.Write(level1, "Re-check:\tstressrun/%s\n", e.StressRun)
		}
		if e.Job != "" {
			w.Write(level1, "Remediation Job:\t%s\n", e.Job)
		}
		if e.By != "" {
			w.Write(level1, "By:\t%s\n", e.By)
		}
		if len(e.History) > 0 {
			w.Write(level1, "History:\n")
			for _, h := range e.History {
				w.Write(level1+1, "%s\t%s\t%s\n", h.Time.UTC().Format("2006-01-02T15:04:05Z"), h.State, h.Reason)
			}
		}
	})
}
