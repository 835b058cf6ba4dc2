package stress

import (
	"testing"

	"github.com/stretchr/testify/assert"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
)

// --wait follows only a run handed to the cluster, and says why this one is not.
func TestStressRunWaitNeedsAHandedOverRun(t *testing.T) {
	base := StressRunOptions{Pool: "p", Image: "stress:1", Tests: []string{"npu"}, HandOver: kit.HandOver{Wait: true}, Output: kit.NewDataOutput()}
	cases := []struct {
		name string
		edit func(o *StressRunOptions)
		want string
	}{
		{"handed over", func(o *StressRunOptions) { o.InCluster = true }, ""},
		{"--in-cluster=false", func(o *StressRunOptions) {}, "(--in-cluster=false)"},
		{"no controller", func(o *StressRunOptions) { o.NoController = "no litepool controller holds Lease x/y" },
			"(no litepool controller holds Lease x/y)"},
		{"dry run", func(o *StressRunOptions) { o.InCluster, o.DryRun = true, cmdutil.DryRunClient }, "(a dry run)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := base
			c.edit(&o)
			err := o.Validate()
			if c.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, "--wait follows a stress run handed to the cluster, and this one is not "+c.want)
		})
	}
}
