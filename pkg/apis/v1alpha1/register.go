package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of the Pool resource.
var GroupVersion = schema.GroupVersion{Group: "runwhere.ai", Version: "v1alpha1"}

// PoolResource is the REST resource of Pool objects, for dynamic clients.
var PoolResource = GroupVersion.WithResource("pools")

// SchemeBuilder registers the litepool types with a runtime.Scheme.
var SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Pool{}, &PoolList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
})

// AddToScheme adds the litepool types to a scheme.
var AddToScheme = SchemeBuilder.AddToScheme
