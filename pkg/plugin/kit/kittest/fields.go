package kittest

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// honourPodFieldSelectors makes the fake answer pod lists with their field selector
// (spec.nodeName, status.phase), as the API server does; the bare fake ignores field
// selectors, so a drain of one node would list, and evict, the pods of every node.
func (f *Factory) honourPodFieldSelectors() {
	f.Kube.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sel := a.(k8stesting.ListAction).GetListRestrictions()
		if sel.Fields == nil || sel.Fields.Empty() {
			return false, nil, nil
		}
		obj, err := f.Kube.Tracker().List(a.GetResource(), corev1.SchemeGroupVersion.WithKind("Pod"), a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		list := obj.(*corev1.PodList)
		kept := list.Items[:0]
		for _, p := range list.Items {
			if (sel.Labels == nil || sel.Labels.Matches(labels.Set(p.Labels))) && sel.Fields.Matches(fields.Set{
				"spec.nodeName": p.Spec.NodeName, "status.phase": string(p.Status.Phase),
				"metadata.name": p.Name, "metadata.namespace": p.Namespace}) {
				kept = append(kept, p)
			}
		}
		list.Items = kept
		return true, list, nil
	})
}
