package kittest

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// WithEviction makes the fake API server support eviction as a real one does (drains
// evict): an eviction deletes the pod, unless it is a dry run. evict, when not nil,
// answers first: an error is the API server's refusal (a PodDisruptionBudget, a lost
// connection) and the pod stays.
func (f *Factory) WithEviction(evict func(pod string) error) *Factory {
	f.Kube.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "pods/eviction", Kind: "Eviction", Group: "policy", Version: "v1"}}}}
	f.Kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		eviction := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		if eviction.DeleteOptions != nil && len(eviction.DeleteOptions.DryRun) > 0 {
			return true, nil, nil
		}
		if evict != nil {
			if err := evict(eviction.Name); err != nil {
				return true, nil, err
			}
		}
		return true, nil, f.Kube.Tracker().Delete(a.GetResource(), a.GetNamespace(), eviction.Name)
	})
	return f
}
