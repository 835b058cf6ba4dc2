package policy

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// WorkloadTypes lists every workload type, in display order.
var WorkloadTypes = []v1alpha1.WorkloadType{
	v1alpha1.WorkloadTraining, v1alpha1.WorkloadInference,
	v1alpha1.WorkloadDevelopment, v1alpha1.WorkloadCompute,
}

// PoolTypes lists every pool type, in display order.
var PoolTypes = []v1alpha1.PoolType{
	v1alpha1.PoolTypeTraining, v1alpha1.PoolTypeInference,
	v1alpha1.PoolTypeDevelopment, v1alpha1.PoolTypeCompute,
}

// ValidateWorkloadType checks a runwhere.ai/workload-type value.
func ValidateWorkloadType(v string) error {
	if slices.Contains(WorkloadTypes, v1alpha1.WorkloadType(v)) {
		return nil
	}
	return fmt.Errorf("unknown workload type %q: must be one of %s", v, joinTypes(WorkloadTypes))
}

// ValidatePoolType checks a pool type (R1).
func ValidatePoolType(t v1alpha1.PoolType) error {
	if t == "" || slices.Contains(PoolTypes, t) {
		return nil
	}
	return fmt.Errorf("[R1] unknown pool type %q: must be one of %s", t, joinTypes(PoolTypes))
}

// AcceptedWorkloads is the set of workload types a pool takes: allowedWorkloads when
// set, otherwise its type's default. A Training pool ("dedicated for development and
// training") takes training and development work.
func AcceptedWorkloads(spec v1alpha1.PoolSpec) []v1alpha1.WorkloadType {
	if len(spec.AllowedWorkloads) > 0 {
		return spec.AllowedWorkloads
	}
	switch spec.Type {
	case v1alpha1.PoolTypeInference:
		return []v1alpha1.WorkloadType{v1alpha1.WorkloadInference}
	case v1alpha1.PoolTypeDevelopment:
		return []v1alpha1.WorkloadType{v1alpha1.WorkloadDevelopment}
	case v1alpha1.PoolTypeCompute:
		return []v1alpha1.WorkloadType{v1alpha1.WorkloadCompute}
	default: // Training, and the empty type which defaults to Training
		return []v1alpha1.WorkloadType{v1alpha1.WorkloadTraining, v1alpha1.WorkloadDevelopment}
	}
}

// WorkloadTypeOf is the kind of work a pod does: its runwhere.ai/workload-type label,
// or else inferred from its owner (Job-like owners train; Deployment, ReplicaSet and
// StatefulSet serve). Empty when neither says.
func WorkloadTypeOf(pod *corev1.Pod) v1alpha1.WorkloadType {
	if v, ok := pod.Labels[LabelWorkloadType]; ok {
		return v1alpha1.WorkloadType(v)
	}
	for _, ref := range pod.OwnerReferences {
		switch ref.Kind {
		case "Job", "CronJob", "PyTorchJob", "TFJob", "MPIJob", "VolcanoJob", "RayJob", "JobSet":
			return v1alpha1.WorkloadTraining
		case "ReplicaSet", "Deployment", "StatefulSet":
			return v1alpha1.WorkloadInference
		}
	}
	return ""
}

func joinTypes[T ~string](ts []T) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}
