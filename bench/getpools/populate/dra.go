package main

import (
	"context"
	"flag"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// -dra adds DRA objects at the scale of the nodes and pods (docs/dra.md): two
// DeviceClasses, one ResourceSlice of 8 GPUs per node, and one ResourceClaim per pod,
// allocated (status written as the scheduler would) to a device on the pod's node.
var withDRA = flag.Bool("dra", false, "also create DeviceClasses, a ResourceSlice per node and an allocated ResourceClaim per pod")

// -only-dra adds them to a cluster already populated with the same -nodes and -pods (the
// bench measures get pools without them, then with them, on one cluster); -delete-dra
// takes them away again, one delete-collection a namespace.
var (
	onlyDRA   = flag.Bool("only-dra", false, "create only the DRA objects (nodes and pods exist)")
	deleteDRA = flag.Bool("delete-dra", false, "delete the DRA objects -dra created, and nothing else")
)

const draDriver = "gpu.bench.example.com"

func populateDRA(ctx context.Context, kube kubernetes.Interface) {
	r := kube.ResourceV1()
	for _, c := range []struct{ name, typ string }{{"gpu.bench.example.com", "gpu"}, {"mig.bench.example.com", "mig"}} {
		_, err := r.DeviceClasses().Create(ctx, &resourcev1.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: c.name},
			Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: fmt.Sprintf(`device.driver == %q && device.attributes[%q].type == %q`, draDriver, draDriver, c.typ),
			}}}},
		}, metav1.CreateOptions{})
		check(ignoreExists(err))
	}
	run("resourceslices", *numNodes, func(i int) error {
		name := fmt.Sprintf("node-%05d", i)
		slice := &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + draDriver},
			Spec: resourcev1.ResourceSliceSpec{Driver: draDriver, NodeName: ptr.To(name),
				Pool: resourcev1.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1}},
		}
		for d := 0; d < 8; d++ {
			slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{
				Name: fmt.Sprintf("gpu-%d", d),
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
					"type":          {StringValue: ptr.To("gpu")},
					"productName":   {StringValue: ptr.To("NVIDIA A100-SXM4-80GB")},
					"uuid":          {StringValue: ptr.To(fmt.Sprintf("GPU-%08x-%04x", i, d))},
					"driverVersion": {VersionValue: ptr.To("550.54.15")},
				},
			})
		}
		_, err := r.ResourceSlices().Create(ctx, slice, metav1.CreateOptions{})
		return ignoreExists(err)
	})
	run("resourceclaims", *numPods, func(i int) error {
		p := pod(i)
		claim := &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name + "-gpu", Namespace: p.Namespace},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.bench.example.com"},
			}}}},
		}
		created, err := r.ResourceClaims(p.Namespace).Create(ctx, claim, metav1.CreateOptions{})
		if err != nil {
			return ignoreExists(err)
		}
		created.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: draDriver,
				Pool: p.Spec.NodeName, Device: fmt.Sprintf("gpu-%d", i%8)}},
		}}
		_, err = r.ResourceClaims(p.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	})
}

// removeDRA deletes what populateDRA created: the claims a namespace at a time, every
// slice (the bench cluster has no other driver), and the two classes.
func removeDRA(ctx context.Context, kube kubernetes.Interface) {
	r := kube.ResourceV1()
	for n := 0; n < *namespaces; n++ {
		check(r.ResourceClaims(nsName(n)).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	}
	check(r.ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	for _, c := range []string{"gpu.bench.example.com", "mig.bench.example.com"} {
		if err := r.DeviceClasses().Delete(ctx, c, metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
			check(err)
		}
	}
}
