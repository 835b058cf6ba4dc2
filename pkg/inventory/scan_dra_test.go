package inventory

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// randomClaim is a claim as the scheduler leaves it: requests (exact, or first available
// with subrequests), sometimes allocated, sometimes made for an extended resource, with
// metadata the scanner must skip.
func randomClaim(r *rand.Rand, i int) resourcev1.ResourceClaim {
	c := resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i), Namespace: "ml",
		Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"note": "y"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-scheduler", Operation: metav1.ManagedFieldsOperationUpdate}}}}
	class := []string{"gpu", "mig", "other"}[r.Intn(3)]
	c.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
		DeviceClassName: class, Count: 2, Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "true"}}}}}}
	if r.Intn(3) == 0 {
		c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourcev1.DeviceRequest{Name: "any",
			FirstAvailable: []resourcev1.DeviceSubRequest{{Name: "big", DeviceClassName: "gpu"}}})
	}
	if r.Intn(3) == 0 {
		c.Annotations[resourcev1.ExtendedResourceClaimAnnotation] = "true"
	}
	if r.Intn(5) == 0 {
		return c // pending
	}
	c.Status.Allocation = &resourcev1.AllocationResult{AllocationTimestamp: &metav1.Time{}}
	for j := range 1 + r.Intn(3) {
		request := []string{"gpu", "any/big"}[r.Intn(len(c.Spec.Devices.Requests))]
		device := fmt.Sprintf("gpu-%d", (i+j)%8)
		if r.Intn(3) == 0 {
			device += "-mig-0" // a partition, where the GPU is partitioned
		}
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourcev1.DeviceRequestAllocationResult{
			Request: request, Driver: gpuDriver, Pool: fmt.Sprintf("n%d", r.Intn(50)), Device: device,
			AdminAccess: ptr.To(false)})
	}
	c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "u"}}
	return c
}

// randomSlice publishes a node's GPUs: whole, partitioned over counters, tainted, in one
// of two generations, named by the slice or device by device.
func randomSlice(r *rand.Rand, i int) resourcev1.ResourceSlice {
	node := fmt.Sprintf("n%d", i%50)
	var devices []resourcev1.Device
	for g := range 8 {
		name := fmt.Sprintf("gpu-%d", g)
		switch r.Intn(4) {
		case 0:
			set := name + "-counters"
			devices = append(devices, consumes(gpuDevice(name, "gpu", "A100"), set, 40),
				consumes(gpuDevice(name+"-mig-0", "mig", "A100"), set, 20))
		case 1:
			d := gpuDevice(name, "gpu", "H100")
			d.Taints = []resourcev1.DeviceTaint{{Key: "xid", Effect: resourcev1.DeviceTaintEffectNoSchedule}}
			devices = append(devices, d)
		default:
			d := gpuDevice(name, "gpu", "A100")
			d.Attributes["uuid"] = resourcev1.DeviceAttribute{StringValue: ptr.To(fmt.Sprintf("GPU-%d-%d", i, g))}
			devices = append(devices, d)
		}
	}
	s := resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Labels: map[string]string{"x": "y"}},
		Spec: resourcev1.ResourceSliceSpec{Driver: gpuDriver, NodeName: ptr.To(node),
			Pool:    resourcev1.ResourcePool{Name: node, Generation: int64(1 + r.Intn(2)), ResourceSliceCount: 1},
			Devices: devices},
	}
	if r.Intn(4) == 0 { // devices of several nodes in one slice
		s.Spec.NodeName, s.Spec.PerDeviceNodeSelection = nil, ptr.To(true)
		for j := range s.Spec.Devices {
			s.Spec.Devices[j].NodeName = ptr.To(fmt.Sprintf("n%d", r.Intn(50)))
		}
	}
	return s
}

func TestDRAScannersAgreeWithFullDecoding(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	claims := &resourcev1.ResourceClaimList{ListMeta: metav1.ListMeta{Continue: "next"}}
	for i := range 400 {
		claims.Items = append(claims.Items, randomClaim(r, i))
	}
	slices := &resourcev1.ResourceSliceList{}
	for i := range 100 {
		slices.Items = append(slices.Items, randomSlice(r, i))
	}
	count := func(addClaims, addSlices func(c *DRACounter)) DRANodes {
		c := NewDRACounter()
		for _, dc := range classes() {
			c.AddClass(dc)
		}
		addClaims(c)
		addSlices(c)
		return c.Finish()
	}
	want := count(func(c *DRACounter) {
		for i := range claims.Items {
			c.AddClaim(&claims.Items[i])
		}
	}, func(c *DRACounter) {
		for i := range slices.Items {
			c.AddSlice(&slices.Items[i])
		}
	})
	for _, d := range []decoder{scanDecoder, unmarshalDecoder} {
		got := count(func(c *DRACounter) {
			var claim resourcev1.ResourceClaim
			cont, err := listItems(encode(t, claims), func(b []byte) error {
				if err := d.claim(b, &claim, c.names); err != nil {
					return err
				}
				c.AddClaim(&claim)
				return nil
			})
			require.NoError(t, err)
			assert.Equal(t, "next", cont)
		}, func(c *DRACounter) {
			var slice resourcev1.ResourceSlice
			_, err := listItems(encode(t, slices), func(b []byte) error {
				if err := d.slice(b, &slice, c.names); err != nil {
					return err
				}
				c.AddSlice(&slice)
				return nil
			})
			require.NoError(t, err)
		})
		assert.Equal(t, want, got, "decoder %s", d.name)
	}
	// The sample exercises what it should: allocated, partitioned, unhealthy devices, and
	// extended resources served.
	var sum DRADevices
	served := int64(0)
	for _, n := range want {
		sum.add(DRASum(n.Devices))
		for _, v := range n.Served {
			served += v
		}
	}
	assert.Positive(t, sum.Allocated)
	assert.Positive(t, sum.PartitionsAllocated)
	assert.Positive(t, sum.Unhealthy)
	assert.Positive(t, sum.Free)
	assert.Positive(t, served)
}

func TestDRAScannerRejectsACutList(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	body := encode(t, &resourcev1.ResourceSliceList{Items: []resourcev1.ResourceSlice{randomSlice(r, 0), randomSlice(r, 1)}})
	for cut := 0; cut < len(body)-4; cut += 7 {
		_, err := listItems(body[:cut], func(b []byte) error {
			return scanSlice(b, &resourcev1.ResourceSlice{}, newNameTable())
		})
		assert.Error(t, err, "cut at %d of %d", cut, len(body))
	}
}

func BenchmarkScanDRA(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	slices := &resourcev1.ResourceSliceList{}
	for i := range 200 {
		slices.Items = append(slices.Items, randomSlice(r, i))
	}
	claims := &resourcev1.ResourceClaimList{}
	for i := range 1000 {
		claims.Items = append(claims.Items, randomClaim(r, i))
	}
	sliceBody, claimBody := encode(b, slices), encode(b, claims)
	for _, d := range []decoder{scanDecoder, unmarshalDecoder} {
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				c := NewDRACounter()
				for _, dc := range classes() {
					c.AddClass(dc)
				}
				var claim resourcev1.ResourceClaim
				_, _ = listItems(claimBody, func(item []byte) error {
					_ = d.claim(item, &claim, c.names)
					c.AddClaim(&claim)
					return nil
				})
				var slice resourcev1.ResourceSlice
				_, _ = listItems(sliceBody, func(item []byte) error {
					_ = d.slice(item, &slice, c.names)
					c.AddSlice(&slice)
					return nil
				})
				c.Finish()
			}
		})
	}
}
