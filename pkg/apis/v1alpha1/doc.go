// Package v1alpha1 holds the Pool custom resource (pools.runwhere.ai/v1alpha1).
// The Pool object holds a pool's policy; node labels hold its membership.
//
// +kubebuilder:object:generate=true
// +groupName=runwhere.ai
package v1alpha1
