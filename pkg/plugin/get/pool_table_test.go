package get

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
)

func samplePools() []v1alpha1.Pool {
	b := inventory.NewBuilder()
	inv := b.Build("train-a100")
	objects := []v1alpha1.Pool{{ObjectMeta: metav1.ObjectMeta{Name: "train-a100"},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, Accelerator: v1alpha1.AcceleratorSpec{Type: "A100-80G"}}}}
	pools := kit.MergePools(objects, inv)
	pools[0].Status.AcceleratorTotal, pools[0].Status.AcceleratorUsed, pools[0].Status.AcceleratorFree = 24, 12, 12
	pools[0].Status.NodeCount, pools[0].Status.Phase = 3, "Running"
	pools[0].Status.DriverVersions = []string{"535.104.05"}
	return pools
}

func printPools(t *testing.T, output string, noHeaders bool, pools []v1alpha1.Pool) string {
	t.Helper()
	o := kit.NewPrintOptions()
	*o.Flags.OutputFormat = output
	o.NoHeaders = noHeaders
	require.NoError(t, o.Validate())
	var buf bytes.Buffer
	require.NoError(t, kit.Print(o, &buf, pools, false, PoolTable))
	return buf.String()
}

func TestPoolTable(t *testing.T) {
	pools := samplePools()
	assert.Equal(t, `POOL NAME    STATUS    GPU TOTAL   GPU USED   GPU FREE   NODE COUNT
train-a100   Running   24          12         12         3
default      Empty     0           0          0          0
`, printPools(t, "", false, pools))
	assert.Equal(t, `train-a100   Running   24    12    12    3
default      Empty     0     0     0     0
`, printPools(t, "", true, pools))
	assert.Equal(t, `POOL NAME    STATUS    GPU TOTAL   GPU USED   GPU FREE   NODE COUNT   TYPE               ACCELERATOR   RESOURCE   HEALTHY   FAULTY   DRIVER VERSIONS
train-a100   Running   24          12         12         3            Training           A100-80G      <none>     0         0        535.104.05
default      Empty     0           0          0          0            <no pool object>   <none>        <none>     0         0        <none>
`, printPools(t, "wide", false, pools))
	assert.Equal(t, "pool.runwhere.ai/train-a100\npool.runwhere.ai/default\n", printPools(t, "name", false, pools))
	assert.Equal(t, "train-a100=24 default=0 ", printPools(t, `jsonpath={range .items[*]}{.metadata.name}={.status.acceleratorTotal} {end}`, false, pools))
}

func TestSortPools(t *testing.T) {
	pools := []v1alpha1.Pool{{}, {}, {}}
	pools[0].Name, pools[0].Status.AcceleratorFree = "default", 8
	pools[1].Name, pools[1].Status.AcceleratorFree = "zeta", 2
	pools[2].Name, pools[2].Status.AcceleratorFree = "alpha", 2
	sortPools(pools, "name")
	assert.Equal(t, []string{"alpha", "zeta", "default"}, []string{pools[0].Name, pools[1].Name, pools[2].Name})
	sortPools(pools, "gpu-free")
	assert.Equal(t, []string{"default", "alpha", "zeta"}, []string{pools[0].Name, pools[1].Name, pools[2].Name})
}

func TestPrintRejectsUnknownOutput(t *testing.T) {
	o := kit.NewPrintOptions()
	*o.Flags.OutputFormat = "xml"
	assert.ErrorContains(t, o.Validate(), `unable to match a printer suitable for the output format "xml"`)
}
