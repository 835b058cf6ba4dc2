package get

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runwhere-ai/litepool/pkg/plugin/internal/fixtures"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
)

func TestMIGNodeTable(t *testing.T) {
	nodes := nodesOf(fixtures.MIGSample())
	assert.Equal(t, `NAME    POOL         NODE POOL   STATUS    GPU TYPE   GPU TOTAL   GPU USED   GPU FREE
mig-a   train-a100   <none>      Running   A100-80G   4           4          0
mig-b   train-a100   <none>      Running   A100-80G   0           0          0
`, printTable(t, false, NodeTable(nodes)))
	assert.Equal(t, `NAME    POOL         NODE POOL   STATUS    GPU TYPE   GPU TOTAL   GPU USED   GPU FREE   RESOURCE         DRIVER VERSION   WORKLOAD PODS   MIG USED/TOTAL
mig-a   train-a100   <none>      Running   A100-80G   4           4          0          nvidia.com/gpu   535.104.05       3               mig-1g.10gb=3/14,mig-3g.40gb=1/2
mig-b   train-a100   <none>      Running   A100-80G   0           0          0          nvidia.com/gpu   <none>           1               mig-1g.10gb=7/7
`, printTable(t, true, NodeTable(nodes)))
}

func TestMIGPoolTable(t *testing.T) {
	pools := kit.MergePools(nil, fixtures.MIGSample())
	assert.Equal(t, `POOL NAME    STATUS    GPU TOTAL   GPU USED   GPU FREE   NODE COUNT
train-a100   Running   4           4          0          2
default      Empty     0           0          0          0
`, printPools(t, "", false, pools))
	assert.Equal(t, `POOL NAME    STATUS    GPU TOTAL   GPU USED   GPU FREE   NODE COUNT   TYPE               ACCELERATOR   RESOURCE         HEALTHY   FAULTY   DRIVER VERSIONS   MIG USED/TOTAL
train-a100   Running   4           4          0          2            <no pool object>   A100-80G      nvidia.com/gpu   2         0        535.104.05        mig-1g.10gb=10/21,mig-3g.40gb=1/2
default      Empty     0           0          0          0            <no pool object>   <none>        <none>           0         0        <none>            <none>
`, printPools(t, "wide", false, pools))
}
