package policy

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Prefix starts every label and annotation key litepool manages.
const Prefix = "runwhere.ai/"

// Label keys litepool manages. The registry below is the one list of them.
const (
	LabelPool          = Prefix + "pool"
	LabelNodePool      = Prefix + "node-pool"
	LabelGPUType       = Prefix + "gpu-type"
	LabelWorkloadType  = Prefix + "workload-type"
	LabelHealth        = Prefix + "health"
	LabelDriverVersion = Prefix + "driver-version"
)

// gpuctl's keys (gpuctl/constants.py). gpuctl writes them on the pods, Jobs, Deployments,
// StatefulSets, Services, ResourceQuotas and namespaces it makes; litepool reads job-type
// (the workload type) and gpuType (judged by P5 like gpu-type), and accepts the others.
const (
	// LabelJobType is gpuctl's kind of job: training, inference, notebook, compute.
	LabelJobType = Prefix + "job-type"
	// LabelPriority is gpuctl's job priority: high, medium, low.
	LabelPriority = Prefix + "priority"
	// LabelNamespace is the namespace a gpuctl object belongs to; on a namespace gpuctl
	// made it is "true" (gpuctl lists its namespaces with runwhere.ai/namespace=true).
	LabelNamespace = Prefix + "namespace"
	// LabelPort is the service port of a gpuctl compute job.
	LabelPort = Prefix + "port"
	// LabelGPUTypeCamel is gpuctl's nodeSelector key for the accelerator model.
	LabelGPUTypeCamel = Prefix + "gpuType"
	// LabelQuota names the gpuctl quota a ResourceQuota was made from.
	LabelQuota = Prefix + "quota"
	// AnnotationDescription is a gpuctl job's description.
	AnnotationDescription = Prefix + "description"
)

// Annotation keys litepool manages.
const (
	// AnnotationUpgradeState is a node's place in the driver-upgrade state machine.
	AnnotationUpgradeState = Prefix + "upgrade-state"
	// AnnotationUpgradeTarget is the driver version a node is being upgraded to.
	AnnotationUpgradeTarget = Prefix + "upgrade-target"
	// AnnotationUpgradeMessage explains the last upgrade step (why a node failed).
	AnnotationUpgradeMessage = Prefix + "upgrade-message"
	// AnnotationWasCordoned remembers that a node was cordoned before litepool touched it,
	// so that litepool never uncordons a node someone else cordoned.
	AnnotationWasCordoned = Prefix + "was-cordoned"
	// AnnotationDraining marks a node a litepool operation is draining.
	AnnotationDraining = Prefix + "draining"
	// AnnotationForce is the explicit, audited override of rules N3 and R2; its value
	// says who forced and why.
	AnnotationForce = Prefix + "force"
	// AnnotationConfirmDelete on a Pool confirms its deletion while pods still run (R2).
	AnnotationConfirmDelete = Prefix + "confirm-delete"
	// AnnotationUpgradeRun names the rollout a node belongs to.
	AnnotationUpgradeRun = Prefix + "upgrade-run"
	// AnnotationStressResult is a node's last stress-test result.
	AnnotationStressResult = Prefix + "stress-result"
)

// Keys on litepool's own objects in its namespace, never on nodes or pods.
const (
	// LabelDeparturesOf marks a ConfigMap that reserves node departures (N3) of a pool.
	LabelDeparturesOf = Prefix + "departures-of"
	// AnnotationPoolName is the full pool name a departures ConfigMap serves (its name
	// and label may be shortened).
	AnnotationPoolName = Prefix + "pool-name"
	// AnnotationHyperNodeDomain and AnnotationHyperNodeLevel are on the Volcano
	// HyperNodes a pool owns: the domain (its values down the levels, joined by "/") and
	// its level's key, for `get domains` (read only from HyperNodes the Pool owns).
	AnnotationHyperNodeDomain = Prefix + "hypernode-domain"
	AnnotationHyperNodeLevel  = Prefix + "hypernode-level"
)

// Values of LabelHealth.
const (
	HealthHealthy  = "healthy"
	HealthDegraded = "degraded"
)

// KeyInfo describes one registered key.
type KeyInfo struct {
	Key        string
	Annotation bool
	// Internal keys live on litepool's own objects in its namespace; N1 refuses them on
	// the nodes and pods users label.
	Internal    bool
	Description string
	// Validate checks a value; nil accepts any valid label value.
	Validate func(value string) error
}

// Registry is every runwhere.ai/ key litepool knows, label or annotation, litepool's own
// and gpuctl's. A key under the prefix that is not here is a typo until it is added here;
// TestEveryKeyInTheSourceIsRegistered fails on code that uses one.
var Registry = map[string]KeyInfo{
	LabelPool:                {Key: LabelPool, Description: "the pool the node belongs to, or a pod asks for", Validate: ValidatePoolName},
	LabelNodePool:            {Key: LabelNodePool, Description: "the node pool inside the pool", Validate: validateDNSLabel},
	LabelGPUType:             {Key: LabelGPUType, Description: "accelerator model (A100-80G, Snt9B, ...)"},
	LabelWorkloadType:        {Key: LabelWorkloadType, Description: "kind of work a pod does", Validate: ValidateWorkloadType},
	LabelHealth:              {Key: LabelHealth, Description: "result of the last stress test", Validate: oneOf(HealthHealthy, HealthDegraded)},
	LabelDriverVersion:       {Key: LabelDriverVersion, Description: "accelerator driver version"},
	AnnotationUpgradeState:   {Key: AnnotationUpgradeState, Annotation: true, Description: "driver-upgrade state"},
	AnnotationUpgradeTarget:  {Key: AnnotationUpgradeTarget, Annotation: true, Description: "driver-upgrade target version"},
	AnnotationUpgradeMessage: {Key: AnnotationUpgradeMessage, Annotation: true, Description: "driver-upgrade message"},
	AnnotationUpgradeRun:     {Key: AnnotationUpgradeRun, Annotation: true, Description: "driver-upgrade rollout"},
	AnnotationWasCordoned:    {Key: AnnotationWasCordoned, Annotation: true, Description: "node was cordoned before litepool touched it"},
	AnnotationDraining:       {Key: AnnotationDraining, Annotation: true, Description: "node is being drained by litepool"},
	AnnotationForce:          {Key: AnnotationForce, Annotation: true, Description: "audited override of N3/R2: who and why"},
	AnnotationConfirmDelete:  {Key: AnnotationConfirmDelete, Annotation: true, Description: "confirms deleting a pool with running pods"},
	AnnotationStressResult:   {Key: AnnotationStressResult, Annotation: true, Description: "last stress-test result"},
	AnnotationScaleDown:      {Key: AnnotationScaleDown, Annotation: true, Description: "a scale-down of this pool has started on the node"},
	TaintQuarantine: {Key: TaintQuarantine, Annotation: true, Internal: true,
		Description: "the taint (not a label) the health loop puts on a member it holds out; its value is the reason"},
	LabelDeparturesOf:  {Key: LabelDeparturesOf, Internal: true, Description: "on litepool's departure ConfigMaps: the pool whose departures they reserve"},
	AnnotationPoolName: {Key: AnnotationPoolName, Annotation: true, Internal: true, Description: "on litepool's departure ConfigMaps: the full pool name"},
	AnnotationHyperNodeDomain: {Key: AnnotationHyperNodeDomain, Annotation: true, Internal: true,
		Description: "on a pool's Volcano HyperNodes: the domain it stands for"},
	AnnotationHyperNodeLevel: {Key: AnnotationHyperNodeLevel, Annotation: true, Internal: true,
		Description: "on a pool's Volcano HyperNodes: the topology level (node label key) of its domain"},
	CordonScaleDown.Annotation(): {Key: CordonScaleDown.Annotation(), Annotation: true,
		Description: "node was cordoned before litepool's scale-down took it (that operation's memory)"},
	CordonUpgrade.Annotation(): {Key: CordonUpgrade.Annotation(), Annotation: true,
		Description: "node was cordoned before litepool's upgrade took it (that operation's memory)"},

	LabelJobType:          {Key: LabelJobType, Description: "gpuctl: kind of job (training, inference, notebook, compute)", Validate: ValidateJobType},
	LabelPriority:         {Key: LabelPriority, Description: "gpuctl: job priority", Validate: oneOf("high", "medium", "low")},
	LabelNamespace:        {Key: LabelNamespace, Description: `gpuctl: the object's namespace; "true" on gpuctl's namespaces`},
	LabelPort:             {Key: LabelPort, Description: "gpuctl: service port of a compute job", Validate: validatePort},
	LabelGPUTypeCamel:     {Key: LabelGPUTypeCamel, Description: "gpuctl: accelerator model a pod asks for (judged by P5 like gpu-type)"},
	LabelQuota:            {Key: LabelQuota, Description: "gpuctl: the quota a ResourceQuota was made from"},
	AnnotationDescription: {Key: AnnotationDescription, Annotation: true, Description: "gpuctl: job description"},
}

// LabelKeys returns the registered label (not annotation) keys, sorted.
func LabelKeys() []string {
	var keys []string
	for k, info := range Registry {
		if !info.Annotation && !info.Internal {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// lookalikeKey returns the registered label key that key seems to mean when key is not
// itself under the prefix: "pool", "gpu-type", "runwhere.ai.pool", "runwhere.ai-pool",
// "runwhere/pool", "RUNWHERE.AI/pool". Empty when key looks like none of them.
func lookalikeKey(key string) string {
	lower := strings.ToLower(key)
	name := lower
	if i := strings.LastIndexAny(lower, "/."); i >= 0 && strings.Contains(lower[:i+1], "runwhere") {
		name = lower[i+1:]
	}
	for _, sep := range []string{"runwhere.ai-", "runwhere.ai_", "runwhere-ai-", "runwhere_ai_"} {
		name = strings.TrimPrefix(name, sep)
	}
	if name == lower && strings.Contains(lower, "/") {
		// Some other domain's key (nvidia.com/gpu.product): not ours.
		return ""
	}
	candidate := Prefix + name
	if info, ok := Registry[candidate]; ok && !info.Annotation && !info.Internal && candidate != key {
		return candidate
	}
	return ""
}

// ValidateLabelKey checks a label key a user or client sets on a litepool object (rule
// N1). Keys of other domains pass. Keys under runwhere.ai/ must be registered, and an
// unprefixed look-alike of a registered key is refused with the right key in the error.
func ValidateLabelKey(key string) error {
	if strings.HasPrefix(key, Prefix) {
		if info, ok := Registry[key]; ok && !info.Annotation && !info.Internal {
			return nil
		}
		if info, ok := Registry[key]; ok && info.Internal {
			return fieldViolationf("N1", labelField(key), "%q is kept by litepool on its own objects (%s), not set on nodes or pods", key, info.Description)
		}
		if info, ok := Registry[key]; ok && info.Annotation {
			return fieldViolationf("N1", labelField(key), "%q is an annotation key, not a label key", key)
		}
		return fieldViolationf("N1", labelField(key), "unknown label key %q: keys under %q must be one of %s",
			key, Prefix, strings.Join(LabelKeys(), ", "))
	}
	if right := lookalikeKey(key); right != "" {
		return fieldViolationf("N1", labelField(key), "label key %q looks like litepool's %q: use %q", key, right, right)
	}
	return nil
}

// ValidateLabel checks a key and its value (rule N1).
func ValidateLabel(key, value string) error {
	if err := ValidateLabelKey(key); err != nil {
		return err
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return fieldViolationf("N1", labelField(key), "invalid value %q for label %q: %s", value, key, strings.Join(errs, "; "))
	}
	info, ok := Registry[key]
	if !ok || info.Validate == nil || value == "" {
		return nil
	}
	if err := info.Validate(value); err != nil {
		return fieldViolationf("N1", labelField(key), "invalid value %q for label %q: %s", value, key, messageOf(err))
	}
	return nil
}

// UserLabelKey resolves a key a user typed on the command line. It accepts the full key
// (runwhere.ai/pool) and refuses anything else with an error that shows the full key:
// the plugin never adds the prefix silently and never doubles it.
func UserLabelKey(key string) (string, error) {
	if !strings.HasPrefix(key, Prefix) {
		if right := lookalikeKey(key); right != "" {
			return "", Violationf("N1", "label key %q has no %q prefix: did you mean %q?", key, Prefix, right)
		}
		return "", Violationf("N1", "label key %q is not a litepool key: litepool manages only keys under %q (%s)",
			key, Prefix, strings.Join(LabelKeys(), ", "))
	}
	if err := ValidateLabelKey(key); err != nil {
		return "", err
	}
	return key, nil
}

func oneOf(values ...string) func(string) error {
	return func(v string) error {
		for _, ok := range values {
			if v == ok {
				return nil
			}
		}
		return fmt.Errorf("must be one of %s", strings.Join(values, ", "))
	}
}

func validatePort(v string) error {
	if n, err := strconv.Atoi(v); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("must be a port number, 1-65535")
	}
	return nil
}

func validateDNSLabel(v string) error {
	if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// labelField is the field path of label key, as a Violation names it.
func labelField(key string) string { return "metadata.labels[" + key + "]" }
