package plugin

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/runwhere-ai/litepool/pkg/cmd/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// checkQuota parses a gpuctl quota file and checks it against the cluster: no namespace
// gets a second gpuctl quota (gpuctl allows one per namespace), none is named twice.
func (o *CreateOptions) checkQuota(ctx context.Context, d poolDoc, seen map[string]string) ([]*corev1.ResourceQuota, error) {
	rqs, err := policy.ParseGpuctlQuota(d.quota, corev1.ResourceName(o.GPUResource))
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, rq := range rqs {
		if other, dup := seen[rq.Namespace]; dup {
			errs = append(errs, fmt.Errorf("namespace %q also has a quota in %s: a namespace has one gpuctl quota", rq.Namespace, other))
			continue
		}
		seen[rq.Namespace] = d.source
		existing, err := o.clients.Kube.CoreV1().ResourceQuotas(rq.Namespace).List(ctx, metav1.ListOptions{LabelSelector: policy.LabelQuota})
		if err != nil {
			return nil, err
		}
		for _, e := range existing.Items {
			errs = append(errs, fmt.Errorf("namespace %q already has gpuctl quota %q (resourcequota/%s): a namespace has one; delete it first (kubectl delete resourcequota -n %s %s)",
				rq.Namespace, e.Labels[policy.LabelQuota], e.Name, rq.Namespace, e.Name))
		}
	}
	return rqs, errors.Join(errs...)
}

// applyQuota creates the namespaces a quota file names that do not exist yet (labelled as
// gpuctl labels its namespaces) and the ResourceQuotas, recording how to undo each.
func (o *CreateOptions) applyQuota(ctx context.Context, rqs []*corev1.ResourceQuota, undo *[]func(context.Context) error) error {
	for _, rq := range rqs {
		if err := o.ensureNamespace(ctx, rq.Namespace, undo); err != nil {
			return err
		}
		if o.DryRun != cmdutil.DryRunClient {
			if _, err := o.clients.Kube.CoreV1().ResourceQuotas(rq.Namespace).Create(ctx, rq, metav1.CreateOptions{DryRun: kit.ServerDryRun(o.DryRun)}); err != nil {
				return err
			}
		}
		ns, name := rq.Namespace, rq.Name
		*undo = append(*undo, func(ctx context.Context) error {
			return kit.IgnoreNotFound(o.clients.Kube.CoreV1().ResourceQuotas(ns).Delete(ctx, name, metav1.DeleteOptions{DryRun: kit.ServerDryRun(o.DryRun)}))
		})
		fmt.Fprintf(o.Out, "resourcequota/%s created (namespace %s)%s\n", rq.Name, rq.Namespace, o.Suffix())
	}
	return nil
}

func (o *CreateOptions) ensureNamespace(ctx context.Context, name string, undo *[]func(context.Context) error) error {
	_, err := o.clients.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{policy.LabelNamespace: policy.GpuctlNamespaceMarker}}}
	if o.DryRun != cmdutil.DryRunClient {
		if _, err := o.clients.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{DryRun: kit.ServerDryRun(o.DryRun)}); err != nil {
			return err
		}
	}
	*undo = append(*undo, func(ctx context.Context) error {
		return kit.IgnoreNotFound(o.clients.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{DryRun: kit.ServerDryRun(o.DryRun)}))
	})
	fmt.Fprintf(o.Out, "namespace/%s created%s\n", name, o.Suffix())
	return nil
}
