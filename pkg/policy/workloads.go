package policy

import (
	"fmt"
	"maps"
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
	return Violationf("R1", "unknown pool type %q: must be one of %s", t, joinTypes(PoolTypes))
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

// gpuctl's job types (label runwhere.ai/job-type) and the workload type each one is.
// gpuctl labels every pod it makes with one of them; a notebook is development work.
var gpuctlJobTypes = map[string]v1alpha1.WorkloadType{
	"training":  v1alpha1.WorkloadTraining,
	"inference": v1alpha1.WorkloadInference,
	"notebook":  v1alpha1.WorkloadDevelopment,
	"compute":   v1alpha1.WorkloadCompute,
}

// GpuctlJobTypes lists the runwhere.ai/job-type values gpuctl writes, sorted.
func GpuctlJobTypes() []string { return slices.Sorted(maps.Keys(gpuctlJobTypes)) }

// ValidateJobType checks a runwhere.ai/job-type value.
func ValidateJobType(v string) error {
	if _, ok := gpuctlJobTypes[v]; ok {
		return nil
	}
	return fmt.Errorf("unknown job type %q: must be one of %s", v, strings.Join(GpuctlJobTypes(), ", "))
}

// Where a pod's workload type came from.
const (
	WorkloadFromLabel   = "label " + LabelWorkloadType
	WorkloadFromJobType = "label " + LabelJobType
)

// WorkloadTypeOf is the kind of work a pod does: its runwhere.ai/workload-type label,
// else gpuctl's runwhere.ai/job-type label, else (last resort) inferred from its owner.
// Job-like owners train; a Deployment or ReplicaSet serves. A StatefulSet says nothing:
// gpuctl runs notebooks as StatefulSets, others run databases or model servers, so an
// unlabelled StatefulSet pod has no inferred type (P3 admits it with a warning). Empty
// when nothing says; an unknown job-type value is returned as it is (P3 refuses it).
func WorkloadTypeOf(pod *corev1.Pod) v1alpha1.WorkloadType {
	wt, _ := WorkloadTypeAndOrigin(pod)
	return wt
}

// WorkloadTypeAndOrigin is WorkloadTypeOf and where it was read: WorkloadFromLabel,
// WorkloadFromJobType, "inferred from its owner <Kind>", or "" when nothing says.
func WorkloadTypeAndOrigin(pod *corev1.Pod) (v1alpha1.WorkloadType, string) {
	if v, ok := pod.Labels[LabelWorkloadType]; ok {
		return v1alpha1.WorkloadType(v), WorkloadFromLabel
	}
	if v, ok := pod.Labels[LabelJobType]; ok {
		if wt, known := gpuctlJobTypes[v]; known {
			return wt, WorkloadFromJobType
		}
		return v1alpha1.WorkloadType(v), WorkloadFromJobType
	}
	for _, ref := range pod.OwnerReferences {
		if wt := ownerWorkloadType(ref.Kind); wt != "" {
			return wt, "inferred from its owner " + ref.Kind
		}
	}
	return "", ""
}

func ownerWorkloadType(kind string) v1alpha1.WorkloadType {
	switch kind {
	case "Job", "CronJob", "PyTorchJob", "TFJob", "MPIJob", "VolcanoJob", "RayJob", "JobSet":
		return v1alpha1.WorkloadTraining
	case "ReplicaSet", "Deployment":
		return v1alpha1.WorkloadInference
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
