package inventory

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"
)

// The DRA scanners keep only what the counter reads today. As for pods and nodes
// (scan_fields_test.go), this test is the tripwire for tomorrow: every field of
// ResourceClaims and ResourceSlices is filled at random, and the counter fed the full
// objects must count what it counts fed the scanners' slim ones. Should the counter start
// reading a field the scanners drop (a slice's allNodes, a claim's reservedFor), the
// figures differ and this test fails.

// draFiller fills whole claims and slices, steering the names and values the counter
// joins on (drivers, pools, devices, classes, requests, taint effects, counter sets)
// towards a few shared ones, so that claims allocate devices slices publish.
func draFiller(seed int64) *randfill.Filler {
	pick := func(c randfill.Continue, options ...string) string { return options[c.Intn(len(options))] }
	pool := func(c randfill.Continue) string { return fmt.Sprintf("n%d", c.Intn(6)) }
	device := func(c randfill.Continue) string { return pick(c, "gpu-0", "gpu-1", "gpu-2", "gpu-0-mig", "gpu-1-mig") }
	return randfill.NewWithSeed(seed).NilChance(0.2).NumElements(1, 3).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(int64(c.Intn(50)), resource.DecimalSI)
		},
		func(t *metav1.Time, c randfill.Continue) { *t = metav1.Unix(int64(c.Intn(2_000_000_000)), 0) },
		func(r *runtime.RawExtension, c randfill.Continue) { // opaque driver parameters
			*r = runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"n":%d}`, c.Intn(9)))}
		},
		func(m *map[string]string, c randfill.Continue) {
			*m = map[string]string{c.String(8): c.String(8)}
			if c.Intn(2) == 0 {
				(*m)[resourcev1.ExtendedResourceClaimAnnotation] = pick(c, "true", "false")
			}
		},
		func(r *resourcev1.DeviceRequest, c randfill.Continue) {
			c.FillNoCustom(r)
			r.Name = pick(c, "gpu", "any")
		},
		func(r *resourcev1.ExactDeviceRequest, c randfill.Continue) {
			c.FillNoCustom(r)
			r.DeviceClassName = pick(c, "gpu", "mig", "other")
		},
		func(r *resourcev1.DeviceRequestAllocationResult, c randfill.Continue) {
			c.FillNoCustom(r)
			r.Request = pick(c, "gpu", "any", "any/big")
			r.Driver, r.Pool, r.Device = pick(c, gpuDriver, gpuDriver, "other.example.com"), pool(c), device(c)
		},
		func(s *resourcev1.ResourceSliceSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			s.Driver = pick(c, gpuDriver, gpuDriver, "other.example.com")
			if s.NodeName != nil {
				s.NodeName = ptr.To(s.Pool.Name)
			}
		},
		func(p *resourcev1.ResourcePool, c randfill.Continue) {
			p.Name, p.Generation, p.ResourceSliceCount = pool(c), int64(1+c.Intn(2)), 1
		},
		func(d *resourcev1.Device, c randfill.Continue) {
			c.FillNoCustom(d)
			d.Name = device(c)
			if d.NodeName != nil {
				d.NodeName = ptr.To(pool(c))
			}
			d.Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type":        {StringValue: ptr.To(pick(c, "gpu", "mig"))},
				"productName": {StringValue: ptr.To(pick(c, "A100", "H100"))},
			}
		},
		func(cc *resourcev1.DeviceCounterConsumption, c randfill.Continue) {
			c.FillNoCustom(cc)
			cc.CounterSet = pick(c, "set-0", "set-1")
		},
		func(t *resourcev1.DeviceTaint, c randfill.Continue) {
			c.FillNoCustom(t)
			t.Effect = resourcev1.DeviceTaintEffect(pick(c, "NoSchedule", "NoExecute", "None"))
		},
	)
}

func TestDRAScannersKeepEveryFieldTheCounterReads(t *testing.T) {
	var sum DRADevices
	for seed := int64(1); seed <= 20; seed++ {
		f := draFiller(seed)
		claims := &resourcev1.ResourceClaimList{}
		for range 40 {
			var c resourcev1.ResourceClaim
			f.Fill(&c)
			claims.Items = append(claims.Items, c)
		}
		slices := &resourcev1.ResourceSliceList{}
		for range 12 {
			var s resourcev1.ResourceSlice
			f.Fill(&s)
			slices.Items = append(slices.Items, s)
		}
		counter := func() *DRACounter {
			c := NewDRACounter()
			for _, dc := range classes() {
				c.AddClass(dc)
			}
			return c
		}
		full, scanned := counter(), counter()
		for i := range claims.Items {
			full.AddClaim(&claims.Items[i])
		}
		for i := range slices.Items {
			full.AddSlice(&slices.Items[i])
		}
		var claim resourcev1.ResourceClaim
		_, err := listItems(encode(t, claims), func(b []byte) error {
			if err := scanClaim(b, &claim, scanned.names); err != nil {
				return err
			}
			scanned.AddClaim(&claim)
			return nil
		})
		require.NoError(t, err, "seed %d", seed)
		var slice resourcev1.ResourceSlice
		_, err = listItems(encode(t, slices), func(b []byte) error {
			if err := scanSlice(b, &slice, scanned.names); err != nil {
				return err
			}
			scanned.AddSlice(&slice)
			return nil
		})
		require.NoError(t, err, "seed %d", seed)
		want := full.Finish()
		assert.Equal(t, want, scanned.Finish(), "seed %d: the counter reads a field the DRA scanners do not fill (pkg/inventory/scan_dra.go)", seed)
		for _, n := range want {
			sum.add(DRASum(n.Devices))
		}
	}
	// The sample takes the branches that matter.
	assert.Positive(t, sum.Allocated)
	assert.Positive(t, sum.Unhealthy)
	assert.Positive(t, sum.Free)
	assert.Positive(t, sum.Partitionable)
}
