package get

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/inventory"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
)

func TestDRAColumns(t *testing.T) {
	pools := []v1alpha1.Pool{
		{ObjectMeta: metav1.ObjectMeta{Name: "train-dra"}, Status: v1alpha1.PoolStatus{DRA: &v1alpha1.DRAStatus{
			Total: 6, Allocated: 4, Free: 1, Unhealthy: 1,
			Devices: []v1alpha1.DRADeviceStatus{
				{Driver: "gpu.example.com", DeviceClass: "gpu", Model: "H100", Total: 5, Allocated: 3, Free: 1, Unhealthy: 1},
				{Driver: "nic.example.com", Total: 1, Allocated: 1},
			},
		}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "train-a100"}},
	}
	table := PoolTable(pools)
	n := len(table.ColumnDefinitions)
	require.GreaterOrEqual(t, n, len(draColumns))
	assert.Equal(t, "DRA Total", table.ColumnDefinitions[n-5].Name)
	assert.Equal(t, []any{int64(6), int64(4), int64(1), int64(1), "gpu/H100=3/5,nic.example.com=1/1"}, table.Rows[0].Cells[len(table.Rows[0].Cells)-5:])
	assert.Equal(t, []any{int64(0), int64(0), int64(0), int64(0), "<none>"}, table.Rows[1].Cells[len(table.Rows[1].Cells)-5:])

	without := PoolTable(pools[1:])
	assert.NotContains(t, without.ColumnDefinitions, draColumns[0], "no DRA columns when no pool has DRA devices")

	nodes := NodeTable([]inventory.Node{{Name: "n1", DRA: []inventory.DRADevices{{Driver: "d", Class: "c", Total: 2, Free: 2}}}, {Name: "n2"}})
	assert.Equal(t, "c=0/2", nodes.Rows[0].Cells[len(nodes.Rows[0].Cells)-1])
	assert.Equal(t, "<none>", nodes.Rows[1].Cells[len(nodes.Rows[1].Cells)-1])
}

// A user who may not list DRA objects is told the DRA figures are left out, once, on
// stderr; the table is the same. A cluster that does not serve DRA gets no warning.
func TestDRAFiguresLeftOutAreWarned(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		warn string
	}{
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: "deviceclasses"}, "", errors.New("RBAC: no rule")),
			`Warning: DRA devices are not counted: not allowed to list DRA objects (listing deviceclasses: deviceclasses.resource.k8s.io is forbidden: RBAC: no rule); grant list on resource.k8s.io deviceclasses, resourceclaims and resourceslices to see them` + "\n"},
		{"not served", apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "deviceclasses"}, ""), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, args := range [][]string{{"pools"}, {"nodes"}} {
				f := cluster(t)
				want := kittest.Run(f, NewCmdGet, "", args...)
				require.NoError(t, want.Err)
				require.Empty(t, want.ErrOut)
				f.Kube.PrependReactor("list", "deviceclasses", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
				r := kittest.Run(f, NewCmdGet, "", args...)
				require.NoError(t, r.Err)
				assert.Equal(t, tc.warn, r.ErrOut, args)
				assert.Equal(t, want.Out, r.Out, args)
			}
		})
	}
}
