package inventory

import (
	"google.golang.org/protobuf/encoding/protowire"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

// The DRA scanners read ResourceClaims and ResourceSlices from protobuf list responses
// as scan.go reads pods and nodes: a claim keeps only what DRACounter.AddClaim reads
// (the extended-resource annotation, its requests' names and classes, its allocation's
// results); a slice keeps its driver, pool, node and devices, and skips its metadata.
// Each device is decoded in full by the generated Unmarshal, since a DeviceClass's CEL
// may read any of its attributes; but one slice at a time, never a page.
//
// Decoding whole pages was most of what `get pools` allocated on a cluster with DRA
// objects (issue 30: 164 MB for 2,000 slices and 16,000 claims, three quarters of it
// protobuf decode), and its peak grew with the page.
//
// Field numbers are those of k8s.io/api/resource/v1/generated.proto.

// scanClaim fills claim (reset first) with what the DRA counter reads of a
// ResourceClaim; names interns drivers, pools, devices and requests.
func scanClaim(b []byte, claim *resourcev1.ResourceClaim, names *nameTable) error {
	requests, allocation := claim.Spec.Devices.Requests[:0], claim.Status.Allocation
	*claim = resourcev1.ResourceClaim{}
	claim.Spec.Devices.Requests = requests
	if allocation == nil {
		allocation = &resourcev1.AllocationResult{}
	}
	results := allocation.Devices.Results[:0]
	err := fields(b, func(num protowire.Number, _ protowire.Type, v []byte) error {
		switch num {
		case 1:
			return scanClaimMeta(v, claim)
		case 2: // spec.devices (1).requests (1)
			return nested(v, 1, func(v []byte) error {
				return nested(v, 1, func(v []byte) error {
					r, err := scanRequest(v, names)
					claim.Spec.Devices.Requests = append(claim.Spec.Devices.Requests, r)
					return err
				})
			})
		case 3: // status.allocation (1).devices (1).results (1)
			return nested(v, 1, func(v []byte) error {
				claim.Status.Allocation = allocation
				return nested(v, 1, func(v []byte) error {
					return nested(v, 1, func(v []byte) error {
						r, err := scanResult(v, names)
						results = append(results, r)
						return err
					})
				})
			})
		}
		return nil
	})
	allocation.Devices.Results = results
	return err
}

// nested calls fn with the payload of every field num of message b.
func nested(b []byte, num protowire.Number, fn func([]byte) error) error {
	return fields(b, func(n protowire.Number, typ protowire.Type, v []byte) error {
		if n != num || typ != protowire.BytesType {
			return nil
		}
		return fn(v)
	})
}

// scanClaimMeta keeps the one annotation the counter reads.
func scanClaimMeta(b []byte, claim *resourcev1.ResourceClaim) error {
	return nested(b, 12, func(v []byte) error {
		key, value, err := mapEntry(v)
		if err == nil && string(key) == resourcev1.ExtendedResourceClaimAnnotation {
			claim.Annotations = map[string]string{resourcev1.ExtendedResourceClaimAnnotation: string(value)}
		}
		return err
	})
}

// scanRequest reads a DeviceRequest's name (1) and exactly (2).deviceClassName (1).
func scanRequest(b []byte, names *nameTable) (resourcev1.DeviceRequest, error) {
	var r resourcev1.DeviceRequest
	err := fields(b, func(num protowire.Number, _ protowire.Type, v []byte) error {
		switch num {
		case 1:
			r.Name = names.intern(v)
		case 2:
			r.Exactly = &resourcev1.ExactDeviceRequest{}
			return nested(v, 1, func(v []byte) error {
				r.Exactly.DeviceClassName = names.intern(v)
				return nil
			})
		}
		return nil
	})
	return r, err
}

// scanResult reads a DeviceRequestAllocationResult's request, driver, pool and device.
func scanResult(b []byte, names *nameTable) (resourcev1.DeviceRequestAllocationResult, error) {
	var r resourcev1.DeviceRequestAllocationResult
	err := fields(b, func(num protowire.Number, _ protowire.Type, v []byte) error {
		switch num {
		case 1:
			r.Request = names.intern(v)
		case 2:
			r.Driver = names.intern(v)
		case 3:
			r.Pool = names.intern(v)
		case 4:
			r.Device = names.intern(v)
		}
		return nil
	})
	return r, err
}

// scanSlice fills slice (reset first, its devices slice reused) with its spec's driver,
// pool, node name and devices.
func scanSlice(b []byte, slice *resourcev1.ResourceSlice, names *nameTable) error {
	devices := slice.Spec.Devices[:0]
	*slice = resourcev1.ResourceSlice{}
	slice.Spec.Devices = devices
	return nested(b, 2, func(v []byte) error {
		return fields(v, func(num protowire.Number, _ protowire.Type, v []byte) error {
			switch num {
			case 1:
				slice.Spec.Driver = names.intern(v)
			case 2:
				return scanPool(v, &slice.Spec.Pool, names)
			case 3:
				slice.Spec.NodeName = ptr.To(names.intern(v))
			case 6:
				var d resourcev1.Device
				err := d.Unmarshal(v)
				slice.Spec.Devices = append(slice.Spec.Devices, d)
				return err
			}
			return nil
		})
	})
}

// scanPool reads a ResourcePool's name (1) and generation (2, a varint: fields keeps
// only whether a varint is zero, so it is read here).
func scanPool(b []byte, pool *resourcev1.ResourcePool, names *nameTable) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			var v []byte
			v, n = protowire.ConsumeBytes(b)
			pool.Name = names.intern(v)
		case num == 2 && typ == protowire.VarintType:
			var x uint64
			x, n = protowire.ConsumeVarint(b)
			pool.Generation = int64(x)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
	}
	return nil
}
