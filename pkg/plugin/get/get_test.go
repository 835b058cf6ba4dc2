package get

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/runwhere-ai/litepool/pkg/plugin/internal/fixtures"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
)

func cluster(t *testing.T) *kittest.Factory { return kittest.NewFactory(t, fixtures.Cluster()...) }

func TestGet(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		out  string
	}{
		// train-a100: a100-2 is cordoned, so its 8 GPUs are in the total and not in free
		// (before, free was 16-10 = 6: the cordoned member's idle 6 counted as free).
		{"pools", []string{"pools"}, `POOL NAME    STATUS     GPU TOTAL   GPU USED   GPU FREE   NODE COUNT
infer-l40    Running    4           1          3          1
train-a100   Degraded   16          10         0          2
default      Running    0           0          0          1
`},
		{"pools wide", []string{"pools", "-o", "wide"}, `POOL NAME    STATUS     GPU TOTAL   GPU USED   GPU FREE   NODE COUNT   TYPE               ACCELERATOR   RESOURCE         HEALTHY   FAULTY   DRIVER VERSIONS
infer-l40    Running    4           1          3          1            <no pool object>   L40S          nvidia.com/gpu   1         0        535.104.05
train-a100   Degraded   16          10         0          2            Training           A100-80G      nvidia.com/gpu   1         1        535.104.05
default      Running    0           0          0          1            <no pool object>   <none>        <none>           1         0        <none>
`},
		{"one pool by name", []string{"pools", "-o", "name", "train-a100"}, "pool.runwhere.ai/train-a100\n"},
		{"pools jsonpath", []string{"pools", "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.acceleratorFree}{\"\\n\"}{end}"}, "infer-l40=3\ntrain-a100=0\ndefault=0\n"},
		{"nodes", []string{"nodes"}, `NAME     POOL         NODE POOL   STATUS     GPU TYPE   GPU TOTAL   GPU USED   GPU FREE
a100-1   train-a100   np1         Running    A100-80G   8           8          0
a100-2   train-a100   np1         Cordoned   A100-80G   8           2          6
cpu-1    default      <none>      Running    <none>     0           0          0
l40-1    infer-l40    <none>      Running    L40S       4           1          3
`},
		{"nodes of a pool, sorted by free", []string{"nodes", "--pool", "train-a100", "--sort-by", "gpu-free"}, `NAME     POOL         NODE POOL   STATUS     GPU TYPE   GPU TOTAL   GPU USED   GPU FREE
a100-2   train-a100   np1         Cordoned   A100-80G   8           2          6
a100-1   train-a100   np1         Running    A100-80G   8           8          0
`},
		{"nodes name", []string{"nodes", "-o", "name", "a100-1", "cpu-1"}, "node/a100-1\nnode/cpu-1\n"},
		{"nodepools", []string{"nodepools"}, `POOL         NODE POOL   STATUS     NODES   GPU TOTAL   GPU USED   GPU FREE
train-a100   np1         Degraded   2       16          10         6
`},
		{"labels", []string{"labels", "a100-1"}, `NODE     KEY                     VALUE
a100-1   runwhere.ai/gpu-type    A100-80G
a100-1   runwhere.ai/node-pool   np1
a100-1   runwhere.ai/pool        train-a100
`},
		{"quota", []string{"quota"}, `NAMESPACE   QUOTA    CPU    MEMORY   GPU
team-a      team-a   2/16   -        3/8
`},
		{"quota wide", []string{"quota", "-o", "wide"}, `NAMESPACE   QUOTA    CPU    MEMORY   GPU   NAME           GPU RESOURCE
team-a      team-a   2/16   -        3/8   team-a-quota   nvidia.com/gpu
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := kittest.Run(cluster(t), NewCmdGet, "", tc.args...)
			require.NoError(t, r.Err)
			assert.Equal(t, tc.out, r.Out)
			assert.Empty(t, r.ErrOut)
		})
	}
}

func TestGetNotFound(t *testing.T) {
	r := kittest.Run(cluster(t), NewCmdGet, "", "pools", "nope")
	assert.True(t, apierrors.IsNotFound(r.Err), "%v", r.Err)
	assert.EqualError(t, r.Err, `pools.runwhere.ai "nope" not found`)
	assert.Empty(t, r.Out)
	r = kittest.Run(cluster(t), NewCmdGet, "", "nodes", "nope")
	assert.EqualError(t, r.Err, `nodes "nope" not found`)
	assert.Empty(t, r.Out)
}
