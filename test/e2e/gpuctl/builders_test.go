package gpuctl

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The objects below are shaped as gpuctl's builders make them (gpuctl/builder/*_builder.py
// at its newest commit), field for field where litepool can see a difference: the labels
// runwhere.ai/job-type, priority, pool and namespace on the object and its pod template,
// the runwhere.ai/description annotation, a container "main" whose requests equal its
// limits (cpu, memory and nvidia.com/gpu when it asks for GPUs), gpuctl's PriorityClass,
// and placement: for a named pool the nodeSelector runwhere.ai/pool (plus
// runwhere.ai/gpuType when the job names a GPU type); for the default pool the label
// runwhere.ai/pool=default and a required node affinity runwhere.ai/pool DoesNotExist.

// gpuctlJob is what a gpuctl job file says that matters here.
type gpuctlJob struct {
	Name, Kind, Pool, GPUType string
	GPUs                      int
	Port                      int // compute jobs: the runwhere.ai/port label
}

const (
	defaultPool      = "default"
	gpuctlPriority   = "medium"
	gpuctlPriorityPC = "gpuctl-medium"
)

// gpuctlLabels are the labels gpuctl puts on an object and its pods.
func (j gpuctlJob) labels(namespace string) map[string]string {
	pool := j.Pool
	if pool == "" {
		pool = defaultPool
	}
	l := map[string]string{
		"runwhere.ai/job-type":  j.Kind,
		"runwhere.ai/priority":  gpuctlPriority,
		"runwhere.ai/pool":      pool,
		"runwhere.ai/namespace": namespace,
	}
	if j.Port > 0 {
		l["runwhere.ai/port"] = strconv.Itoa(j.Port)
	}
	return l
}

func (j gpuctlJob) meta(namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: j.Name, Labels: j.labels(namespace),
		Annotations: map[string]string{"runwhere.ai/description": "gpuctl " + j.Kind + " job " + j.Name}}
}

// template is gpuctl's build_pod_template_spec.
func (j gpuctlJob) template(namespace string, podLabels map[string]string, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	if j.GPUs > 0 {
		res["nvidia.com/gpu"] = *resource.NewQuantity(int64(j.GPUs), resource.DecimalSI)
	}
	c := corev1.Container{Name: "main", Image: "registry.example/gpuctl/" + j.Kind + ":latest", ImagePullPolicy: corev1.PullIfNotPresent,
		Resources: corev1.ResourceRequirements{Requests: res.DeepCopy(), Limits: res.DeepCopy()}}
	if j.Kind == "notebook" {
		c.Ports = []corev1.ContainerPort{{ContainerPort: 8888}}
	}
	spec := corev1.PodSpec{Containers: []corev1.Container{c}, RestartPolicy: restart, PriorityClassName: gpuctlPriorityPC}
	if j.Pool != "" && j.Pool != defaultPool {
		spec.NodeSelector = map[string]string{"runwhere.ai/pool": j.Pool}
		if j.GPUType != "" {
			spec.NodeSelector["runwhere.ai/gpuType"] = j.GPUType
		}
	} else {
		if j.GPUType != "" {
			spec.NodeSelector = map[string]string{"runwhere.ai/gpuType": j.GPUType}
		}
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "runwhere.ai/pool", Operator: corev1.NodeSelectorOpDoesNotExist}},
			}}},
		}}
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: map[string]string{"runwhere.ai/description": "gpuctl " + j.Kind + " job " + j.Name}},
		Spec:       spec,
	}
}

// trainingJob is gpuctl's TrainingBuilder.build_job.
func (j gpuctlJob) trainingJob(namespace string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: j.meta(namespace), Spec: batchv1.JobSpec{
		Template:                j.template(namespace, j.labels(namespace), corev1.RestartPolicyNever),
		BackoffLimit:            ptr.To[int32](3),
		TTLSecondsAfterFinished: ptr.To[int32](86400),
	}}
}

// deployment is gpuctl's InferenceBuilder / ComputeBuilder.build_deployment.
func (j gpuctlJob) deployment(namespace string) *appsv1.Deployment {
	podLabels := j.labels(namespace)
	podLabels["app"] = j.Name
	return &appsv1.Deployment{ObjectMeta: j.meta(namespace), Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": j.Name}},
		Template: j.template(namespace, podLabels, corev1.RestartPolicyAlways),
	}}
}

// statefulSet is gpuctl's NotebookBuilder.build_statefulset.
func (j gpuctlJob) statefulSet(namespace string) *appsv1.StatefulSet {
	podLabels := j.labels(namespace)
	podLabels["app"] = j.Name
	return &appsv1.StatefulSet{ObjectMeta: j.meta(namespace), Spec: appsv1.StatefulSetSpec{
		Replicas:    ptr.To[int32](1),
		Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": j.Name}},
		ServiceName: "svc-" + j.Name,
		Template:    j.template(namespace, podLabels, corev1.RestartPolicyAlways),
	}}
}

// gpuctlPriorityClass is the PriorityClass gpuctl creates for priority medium.
func gpuctlPriorityClass() *schedulingv1.PriorityClass {
	return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: gpuctlPriorityPC}, Value: 500000,
		PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority), Description: "Medium priority for regular microservices"}
}
