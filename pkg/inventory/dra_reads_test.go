package inventory

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestReadsOf(t *testing.T) {
	c := NewDRACounter()
	for _, tc := range []struct {
		expr  string
		reads deviceReads
		ok    bool
	}{
		{`device.driver == "gpu.x" && device.attributes["gpu.x"].type == "gpu"`, deviceReads{attributes: []domainRef{{"gpu.x", "type"}}}, true},
		{`device.attributes["gpu.x"]["model"] == "A100"`, deviceReads{attributes: []domainRef{{"gpu.x", "model"}}}, true},
		{`has(device.attributes["gpu.x"].model) && device.attributes["gpu.x"].driverVersion.isGreaterThan(semver("1.0.0"))`,
			deviceReads{attributes: []domainRef{{"gpu.x", "model"}, {"gpu.x", "driverVersion"}}}, true},
		{`"model" in device.attributes["gpu.x"]`, deviceReads{attributes: []domainRef{{domain: "gpu.x"}}}, true},
		{`device.attributes["gpu.x"].exists(k, k.startsWith("m"))`, deviceReads{attributes: []domainRef{{domain: "gpu.x"}}}, true},
		{`device.capacity["gpu.x"].memory.compareTo(quantity("10Gi")) >= 0`, deviceReads{capacity: []domainRef{{"gpu.x", "memory"}}}, true},
		{`device.allowMultipleAllocations == true`, deviceReads{}, true},
		// What cannot be keyed: every device is evaluated.
		{`device.attributes[device.driver].type == "gpu"`, deviceReads{}, false},
		{`size(device.attributes) > 0`, deviceReads{}, false},
		// A computed key into one domain's map reads that whole map: keyed by all of it.
		{`device.attributes["gpu.x"][device.driver] == "x"`, deviceReads{attributes: []domainRef{{domain: "gpu.x"}}}, true},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			got, ok := readsOf(c.parse, []string{tc.expr})
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.reads, got)
		})
	}
}

// Counting with the verdicts kept per key selects exactly the classes that evaluating
// every device selects: devices that differ in what a selector reads (unqualified and
// qualified names, absent attributes, capacity, other drivers) and in what it does not
// (uuid).
func TestKeyedVerdictsMatchEveryDeviceEvaluated(t *testing.T) {
	classes := []string{
		`device.driver == "gpu.x" && device.attributes["gpu.x"].type == "gpu"`,
		`device.attributes["gpu.x"].model == "A100"`,
		`"mig" in device.attributes["gpu.x"]`,
		`device.capacity["gpu.x"].memory.compareTo(quantity("40Gi")) >= 0`,
		`device.attributes["other.y"].model == "A100"`,
		`device.attributes[device.driver].type == "gpu"`,
	}
	var devices []resourcev1.Device
	for i := 0; i < 64; i++ {
		attrs := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"uuid": {StringValue: ptr.To(fmt.Sprintf("GPU-%d", i))}}
		if i%2 == 0 {
			attrs["type"] = resourcev1.DeviceAttribute{StringValue: ptr.To("gpu")}
		}
		switch i % 3 {
		case 0:
			attrs["gpu.x/model"] = resourcev1.DeviceAttribute{StringValue: ptr.To("A100")}
		case 1:
			attrs["model"] = resourcev1.DeviceAttribute{StringValue: ptr.To("A100")}
		}
		if i%5 == 0 {
			attrs["mig"] = resourcev1.DeviceAttribute{BoolValue: ptr.To(true)}
		}
		if i%7 == 0 {
			attrs["other.y/model"] = resourcev1.DeviceAttribute{StringValue: ptr.To("A100")}
		}
		capacity := map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse(fmt.Sprintf("%dGi", 10*(i%6)))}}
		devices = append(devices, resourcev1.Device{Name: fmt.Sprintf("d%d", i), Attributes: attrs, Capacity: capacity})
	}
	count := func(keyed bool) ([][]uint16, int) {
		c := NewDRACounter()
		for i, expr := range classes {
			c.AddClass(&resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i)},
				Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}}}})
		}
		c.workOutReads()
		if !keyed {
			for i := range c.classes {
				c.classes[i].reads = nil
			}
		}
		var out [][]uint16
		for i := range devices {
			driver := "gpu.x"
			if i%11 == 0 {
				driver = "other.y"
			}
			out = append(out, c.classesOf(driver, &devices[i]))
		}
		keys := 0
		for _, dc := range c.classes {
			keys += len(dc.verdicts)
		}
		return out, keys
	}
	want, _ := count(false)
	got, keys := count(true)
	require.Equal(t, want, got)
	assert.Less(t, keys, 5*len(devices)/2, "five keyed classes over 64 devices: far fewer evaluations than devices")
	var selected int
	for _, cls := range want {
		selected += len(cls)
	}
	assert.Positive(t, selected, "the classes select devices, so the comparison can fail")
}

// BenchmarkCountSlices counts the slices of 1,000 nodes of 8 GPUs each (every GPU its own
// uuid, as the DRA drivers publish them) under the two classes bench/getpools makes,
// with the verdicts keyed by what the selectors read and, beside it, with every device
// evaluated.
func BenchmarkCountSlices(b *testing.B) {
	const driver = "gpu.bench.example.com"
	var slices []*resourcev1.ResourceSlice
	for n := 0; n < 1000; n++ {
		s := &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(fmt.Sprintf("node-%05d", n)),
			Pool: resourcev1.ResourcePool{Name: fmt.Sprintf("node-%05d", n), Generation: 1, ResourceSliceCount: 1}}}
		for d := 0; d < 8; d++ {
			s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", d), Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type": {StringValue: ptr.To("gpu")}, "productName": {StringValue: ptr.To("NVIDIA A100-SXM4-80GB")},
				"uuid": {StringValue: ptr.To(fmt.Sprintf("GPU-%08x-%04x", n, d))}, "driverVersion": {VersionValue: ptr.To("550.54.15")}}})
		}
		slices = append(slices, s)
	}
	for _, keyed := range []bool{true, false} {
		b.Run(fmt.Sprintf("keyed=%v", keyed), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				c := NewDRACounter()
				for _, typ := range []string{"gpu", "mig"} {
					c.AddClass(&resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: typ + ".bench.example.com"},
						Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
							Expression: fmt.Sprintf(`device.driver == %q && device.attributes[%q].type == %q`, driver, driver, typ)}}}}})
				}
				c.workOutReads()
				if !keyed {
					for j := range c.classes {
						c.classes[j].reads = nil
					}
				}
				for _, s := range slices {
					c.AddSlice(s)
				}
				c.Finish()
			}
		})
	}
}
