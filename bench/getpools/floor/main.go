// Command floor is the yardstick of bench/getpools: the least any tool pays to sum a
// cluster's accelerators. It pages through every node and every pod (500 a page,
// protobuf, no filtering) with client-go and sums allocatable and requested
// accelerators, printing the totals. Nothing else: no per-pool grouping, no status, no
// printing library. With -dra it also pages through every ResourceSlice and every
// ResourceClaim and counts node-local devices and allocated ones, so that get pools with
// DRA objects is measured against a floor that reads the same objects.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/pager"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig")
	dra := flag.Bool("dra", false, "also read every ResourceSlice and ResourceClaim and count their devices")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(err)
	}
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf
	cfg.QPS, cfg.Burst = 50, 100
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()

	var nodes, allocatable int64
	err = pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return client.CoreV1().Nodes().List(ctx, o)
	}).EachListItem(ctx, metav1.ListOptions{Limit: 500}, func(obj runtime.Object) error {
		nodes++
		for name, q := range obj.(*corev1.Node).Status.Allocatable {
			if isAccelerator(name) {
				allocatable += q.Value()
			}
		}
		return nil
	})
	if err != nil {
		fail(err)
	}
	var pods, requested int64
	err = pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return client.CoreV1().Pods("").List(ctx, o)
	}).EachListItem(ctx, metav1.ListOptions{Limit: 500}, func(obj runtime.Object) error {
		pods++
		for _, c := range obj.(*corev1.Pod).Spec.Containers {
			for name, q := range c.Resources.Requests {
				if isAccelerator(name) {
					requested += q.Value()
				}
			}
		}
		return nil
	})
	if err != nil {
		fail(err)
	}
	fmt.Printf("nodes %d pods %d accelerators allocatable %d requested %d", nodes, pods, allocatable, requested)
	if *dra {
		devices, allocated := countDRA(ctx, client)
		fmt.Printf(" DRA devices %d allocated %d", devices, allocated)
	}
	fmt.Println()
}

// countDRA counts the node-local devices of every ResourceSlice and the devices
// allocated to every ResourceClaim.
func countDRA(ctx context.Context, client kubernetes.Interface) (devices, allocated int64) {
	err := pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return client.ResourceV1().ResourceSlices().List(ctx, o)
	}).EachListItem(ctx, metav1.ListOptions{Limit: 500}, func(obj runtime.Object) error {
		if s := obj.(*resourcev1.ResourceSlice); s.Spec.NodeName != nil {
			devices += int64(len(s.Spec.Devices))
		}
		return nil
	})
	if err != nil {
		fail(err)
	}
	err = pager.New(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return client.ResourceV1().ResourceClaims("").List(ctx, o)
	}).EachListItem(ctx, metav1.ListOptions{Limit: 500}, func(obj runtime.Object) error {
		if a := obj.(*resourcev1.ResourceClaim).Status.Allocation; a != nil {
			allocated += int64(len(a.Devices.Results))
		}
		return nil
	})
	if err != nil {
		fail(err)
	}
	return devices, allocated
}

func isAccelerator(name corev1.ResourceName) bool {
	s := string(name)
	return s == "nvidia.com/gpu" || strings.HasPrefix(s, "nvidia.com/mig-") || strings.HasPrefix(s, "huawei.com/Ascend") || s == "amd.com/gpu"
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "floor:", err)
	os.Exit(1)
}
