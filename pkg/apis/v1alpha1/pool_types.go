package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PoolType says what a pool is for; it decides which workload types it accepts.
// +kubebuilder:validation:Enum=Training;Inference;Development;Compute
type PoolType string

const (
	PoolTypeTraining    PoolType = "Training"
	PoolTypeInference   PoolType = "Inference"
	PoolTypeDevelopment PoolType = "Development"
	PoolTypeCompute     PoolType = "Compute"
)

// WorkloadType is the kind of work a pod declares (label runwhere.ai/workload-type).
// +kubebuilder:validation:Enum=training;inference;development;compute
type WorkloadType string

const (
	WorkloadTraining    WorkloadType = "training"
	WorkloadInference   WorkloadType = "inference"
	WorkloadDevelopment WorkloadType = "development"
	WorkloadCompute     WorkloadType = "compute"
)

// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=lpool,categories=litepool
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Accelerator",type=string,JSONPath=`.spec.accelerator.type`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodeCount`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.acceleratorTotal`
// +kubebuilder:printcolumn:name="Used",type=integer,JSONPath=`.status.acceleratorUsed`
// +kubebuilder:printcolumn:name="Free",type=integer,JSONPath=`.status.acceleratorFree`
// +kubebuilder:printcolumn:name="Faulty",type=integer,JSONPath=`.status.faultyNodes`,priority=1
// +kubebuilder:printcolumn:name="Quarantined",type=integer,JSONPath=`.status.quarantinedNodes`,priority=1
// +kubebuilder:printcolumn:name="Drivers",type=string,JSONPath=`.status.driverVersions`,priority=1
// +kubebuilder:printcolumn:name="Min Nodes",type=integer,JSONPath=`.spec.minNodes`
// +kubebuilder:printcolumn:name="Exclusive",type=boolean,JSONPath=`.spec.exclusive`
// +kubebuilder:printcolumn:name="Description",type=string,JSONPath=`.spec.description`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() >= 4 && self.metadata.name.size() <= 24 && self.metadata.name.matches('^[a-z]([a-z0-9-]*[a-z0-9])?$')",message="pool name must be 4-24 characters: lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen"
// +kubebuilder:validation:XValidation:rule="self.metadata.name != 'default'",message="pool name \"default\" is reserved for nodes that belong to no pool"

// Pool is a set of same-spec accelerator nodes with one policy: what work it takes,
// who may use it, how far it may shrink and which software it runs.
type Pool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PoolSpec   `json:"spec,omitempty"`
	Status PoolStatus `json:"status,omitempty"`
}

// PoolSpec is the policy of a pool.
type PoolSpec struct {
	// Description is free text shown in listings.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Description string `json:"description,omitempty"`
	// Tags are free key/value pairs, for the operator's own bookkeeping.
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// Type decides the workload types the pool accepts by default.
	// +kubebuilder:default=Training
	// +optional
	Type PoolType `json:"type,omitempty"`
	// AllowedWorkloads overrides the workload types the pool type accepts.
	// +listType=set
	// +optional
	AllowedWorkloads []WorkloadType `json:"allowedWorkloads,omitempty"`
	// Accelerator is the one accelerator model all nodes of the pool carry.
	// +optional
	Accelerator AcceleratorSpec `json:"accelerator,omitempty,omitzero"`
	// NodePools are named groups of same-spec nodes inside the pool.
	// +listType=map
	// +listMapKey=name
	// +optional
	NodePools []NodePool `json:"nodePools,omitempty"`
	// MinNodes is the floor scale-down never goes below.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	// +optional
	MinNodes int32 `json:"minNodes,omitempty"`
	// Exclusive taints member nodes runwhere.ai/pool=<name>:NoSchedule; only pods of the
	// pool get the matching toleration.
	// +optional
	Exclusive bool `json:"exclusive,omitempty"`
	// Namespaces may use the pool; empty (with no NamespaceSelector) means every namespace.
	// +listType=set
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`
	// NamespaceSelector selects further namespaces allowed to use the pool.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// Software is the declared version chain the pool's nodes and images run.
	// +optional
	Software SoftwareSpec `json:"software,omitempty,omitzero"`
	// HCCL holds Ascend collective-communication settings injected into NPU pods.
	// +optional
	HCCL HCCLSpec `json:"hccl,omitempty,omitzero"`
	// StressTest configures periodic stress tests of the pool's nodes.
	// +optional
	StressTest *StressTestSpec `json:"stressTest,omitempty"`
	// Upgrade holds the installer used by driver upgrades of this pool.
	// +optional
	Upgrade *UpgradeSpec `json:"upgrade,omitempty"`
	// Health is the node health loop of the pool (docs/health.md); absent: litepool
	// watches no signal and quarantines nothing in this pool.
	// +optional
	Health *HealthPolicy `json:"health,omitempty"`
	// Queue makes the pool a scheduler's queue whose quota follows the pool's
	// schedulable capacity (docs/queueing.md); absent: litepool writes no queue object.
	// +optional
	Queue *QueueSpec `json:"queue,omitempty"`
	// Topology describes the pool's rack-scale domains (super nodes, NVL72 racks,
	// topology blocks) by node labels (docs/topology.md); absent: the pool is a flat set
	// of nodes.
	// +optional
	Topology *TopologySpec `json:"topology,omitempty"`
}

// TopologyPreset names the node labels a real system writes for its domains
// (policy.TopologyPresets holds each preset's levels and unit, and who writes them).
// +kubebuilder:validation:Enum=Ascend;NVIDIA;GKE;EKS;Topograph
type TopologyPreset string

const (
	TopologyAscend    TopologyPreset = "Ascend"
	TopologyNVIDIA    TopologyPreset = "NVIDIA"
	TopologyGKE       TopologyPreset = "GKE"
	TopologyEKS       TopologyPreset = "EKS"
	TopologyTopograph TopologyPreset = "Topograph"
)

// TopologySpec is a pool's topology: node label keys, coarsest first, as Kueue's
// Topology has them (kubernetes.io/hostname is the implied last level). A domain is the
// members that share a level's value; the unit is the level a job needs whole.
// +kubebuilder:validation:XValidation:rule="has(self.preset) != (has(self.levels) && self.levels.size() > 0)",message="set exactly one of spec.topology.preset (Ascend, NVIDIA, GKE, EKS, Topograph) or spec.topology.levels (node label keys, coarsest first)"
// +kubebuilder:validation:XValidation:rule="!has(self.unit) || !has(self.levels) || self.unit in self.levels",message="spec.topology.unit must be one of spec.topology.levels"
type TopologySpec struct {
	// Preset names the label set a real system writes; exclusive with Levels.
	// +optional
	Preset TopologyPreset `json:"preset,omitempty"`
	// Levels are node label keys, coarsest first; kubernetes.io/hostname is implied
	// last and may only be written last. At most 15 (Kueue's 16 with the hostname).
	// +kubebuilder:validation:MaxItems=15
	// +kubebuilder:validation:items:MaxLength=317
	// +listType=atomic
	// +optional
	Levels []string `json:"levels,omitempty"`
	// Unit is the level a job needs whole (the super node): scale-down, the floor
	// and maintenance count whole domains of it. Default: the preset's unit, or the
	// finest level above the hostname.
	// +optional
	Unit string `json:"unit,omitempty"`
	// MinNodesPerDomain is the floor of members a domain of the unit level keeps
	// while it stays in the pool: scale-down takes a whole domain or leaves at least
	// this many (seed: "at least 1 node must remain"). Default 1.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinNodesPerDomain int32 `json:"minNodesPerDomain,omitempty"`
}

// TopologyStatus is a bounded summary of the pool's domains of its unit level: counts,
// the largest free block and the fullest and freest domains (at most
// policy.TopologyStatusDomains each), so that thousands of domains keep the object small.
type TopologyStatus struct {
	// Unit is the label key of the unit level the figures count.
	Unit string `json:"unit"`
	// Domains counts the unit's domains; Whole, Degraded and Out count them by state.
	Domains int32 `json:"domains"`
	// +optional
	Whole int32 `json:"whole,omitempty"`
	// +optional
	Degraded int32 `json:"degraded,omitempty"`
	// +optional
	Out int32 `json:"out,omitempty"`
	// Mixed counts domains whose members carry more than one accelerator model or count.
	// +optional
	Mixed int32 `json:"mixed,omitempty"`
	// WholeFree counts whole domains with no accelerator in use.
	// +optional
	WholeFree int32 `json:"wholeFree,omitempty"`
	// Outside counts members without the unit's label: in no domain, never dropped.
	// +optional
	Outside int32 `json:"outside,omitempty"`
	// LargestFreeBlock is the most accelerators free in one whole domain: the largest
	// job that fits inside one unit now.
	// +optional
	LargestFreeBlock int64 `json:"largestFreeBlock,omitempty"`
	// Fullest and Freest are the domains with the least and the most free
	// accelerators.
	// +listType=atomic
	// +optional
	Fullest []DomainSummary `json:"fullest,omitempty"`
	// +listType=atomic
	// +optional
	Freest []DomainSummary `json:"freest,omitempty"`
}

// DomainSummary is one domain of the unit level.
type DomainSummary struct {
	// Name is the unit label's value.
	Name string `json:"name"`
	// Nodes and ReadyNodes count the domain's members and the schedulable ones.
	Nodes int32 `json:"nodes"`
	// +optional
	ReadyNodes int32 `json:"readyNodes"`
	// Total and Free are the domain's accelerators (allocatable of schedulable
	// members, and what their pods leave).
	// +optional
	Total int64 `json:"total"`
	// +optional
	Free int64 `json:"free"`
	// State is Whole (every member schedulable), Degraded (some member out) or Out
	// (no member schedulable).
	State string `json:"state"`
}

// QueueScheduler names the queueing system a pool feeds.
// +kubebuilder:validation:Enum=Kueue;Volcano
type QueueScheduler string

const (
	// QueueKueue is Kueue (kueue.x-k8s.io/v1beta2): a ResourceFlavor, a ClusterQueue and
	// LocalQueues.
	QueueKueue QueueScheduler = "Kueue"
	// QueueVolcano is Volcano (scheduling.volcano.sh/v1beta1): a Queue whose capability
	// is the pool's capacity, and with spec.topology one HyperNode
	// (topology.volcano.sh/v1alpha1) per domain. KAI's Queue is an adapter to come.
	QueueVolcano QueueScheduler = "Volcano"
)

// QueueSpec is how a pool feeds a scheduler's queue. The quota is computed by the
// controller from the members' nodes, never taken from this spec: the spec only lowers
// it (headroom) or says which resources it covers.
// +kubebuilder:validation:XValidation:rule="(has(self.cohort) && self.cohort.size() > 0) || (has(self.shares) && self.shares.size() > 0) || (!has(self.borrowingLimit) && !has(self.lendingLimit) && (!has(self.devices) || (!has(self.devices.borrowingLimit) && !has(self.devices.lendingLimit))))",message="borrowingLimit and lendingLimit (and devices') need a cohort to borrow from and lend to: set spec.queue.cohort (or shares, whose cohort is the pool's), or leave the limits out"
type QueueSpec struct {
	// Scheduler is the queueing system the pool feeds.
	// +kubebuilder:default=Kueue
	// +optional
	Scheduler QueueScheduler `json:"scheduler,omitempty"`
	// Headroom is the accelerators left out of the quota, kept for work that does not
	// go through the queue.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Headroom int64 `json:"headroom,omitempty"`
	// Resources the quota covers beyond the pool's accelerator: cpu and memory, the
	// allocatable of the same schedulable members. A workload that requests a resource
	// its queue does not cover is not admitted by Kueue.
	// +listType=set
	// +optional
	Resources []QueueResource `json:"resources,omitempty"`
	// Cohort puts the pool's queue into a Kueue cohort: it may borrow the unused quota of
	// the cohort's other queues and lend its own. Written as given, never changed by
	// litepool; absent, a pool with shares puts its queues in a cohort of its name.
	// +optional
	Cohort string `json:"cohort,omitempty"`
	// BorrowingLimit caps the accelerators the queue borrows from its cohort (absent:
	// no cap).
	// +kubebuilder:validation:Minimum=0
	// +optional
	BorrowingLimit *int64 `json:"borrowingLimit,omitempty"`
	// LendingLimit caps the accelerators of its quota the queue lends to its cohort
	// (absent: all it does not use).
	// +kubebuilder:validation:Minimum=0
	// +optional
	LendingLimit *int64 `json:"lendingLimit,omitempty"`
	// Devices puts the members' DRA devices into the quota: the devices of the
	// schedulable members that the named DeviceClasses select, as Kueue's
	// deviceClassMappings entry of the same name counts a workload's claims.
	// +optional
	Devices *QueueDevices `json:"devices,omitempty"`
	// Shares give namespaces a share of the pool (gpuctl's kind: quota, per namespace):
	// each is a ClusterQueue of its own in the pool's cohort, and the namespace's
	// LocalQueue points at it. The pool's own ClusterQueue keeps the capacity less the
	// shares; when the capacity drops below their sum, each share shrinks in proportion.
	// +listType=map
	// +listMapKey=namespace
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Shares []QueueShare `json:"shares,omitempty"`
	// Deserved is the accelerators Volcano's Queue deserves (spec.deserved: what its
	// capacity plugin reclaims up to); Volcano only, never above the capacity (refused
	// at admission; lowered to the capacity when members leave it, and the Queue
	// condition says so).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Deserved *int64 `json:"deserved,omitempty"`
	// Guarantee is the accelerators Volcano keeps for the Queue whatever the other
	// queues use (spec.guarantee.resource); Volcano only, never above the capacity,
	// as Deserved.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Guarantee *int64 `json:"guarantee,omitempty"`
}

// QueueShare is one namespace's share of a pool's queue.
type QueueShare struct {
	// Namespace is the namespace the share is for; a namespace the pool does not admit
	// gets no share (the Queue condition names it).
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`
	// Accelerators is the share's quota of the pool's accelerator (gpuctl's gpu).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Accelerators int64 `json:"accelerators,omitempty"`
	// Devices is the share's quota of the DRA devices' logical resource
	// (spec.queue.devices).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Devices int64 `json:"devices,omitempty"`
	// CPU and Memory are the share's quota of cpu and memory, when spec.queue.resources
	// covers them (gpuctl's cpu and memory).
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
	// BorrowingLimit caps what the share borrows from the cohort, in the accelerators
	// and devices it has (0: a hard ceiling, as gpuctl's ResourceQuota is; absent: it
	// may borrow whatever the cohort lends).
	// +kubebuilder:validation:Minimum=0
	// +optional
	BorrowingLimit *int64 `json:"borrowingLimit,omitempty"`
}

// QueueDevices is one logical resource of DRA devices in a pool's queue. It repeats an
// entry of Kueue's Configuration (resources.deviceClassMappings), which litepool cannot
// read from the cluster: Kueue charges a workload's claims of these classes to
// Resource, and litepool writes the devices of these classes as Resource's quota.
type QueueDevices struct {
	// Resource is the logical resource's name, as in Kueue's deviceClassMappings.
	Resource corev1.ResourceName `json:"resource"`
	// DeviceClassNames are the DeviceClasses it stands for: a device counts once when
	// any of them selects it.
	// +kubebuilder:validation:MinItems=1
	// +listType=set
	DeviceClassNames []string `json:"deviceClassNames"`
	// BorrowingLimit and LendingLimit are spec.queue's limits for the devices: the
	// devices the queue may borrow from its cohort (absent: no cap) and lend of its
	// quota (absent: all it does not use).
	// +kubebuilder:validation:Minimum=0
	// +optional
	BorrowingLimit *int64 `json:"borrowingLimit,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	LendingLimit *int64 `json:"lendingLimit,omitempty"`
}

// QueueResource is a resource a queue's quota covers beside the accelerator.
// +kubebuilder:validation:Enum=cpu;memory
type QueueResource string

// QueueStatus is the pool's queue as the controller last wrote and read it.
type QueueStatus struct {
	Scheduler QueueScheduler `json:"scheduler"`
	// ClusterQueue is the queue's name (Kueue: the ClusterQueue, and each LocalQueue).
	// +optional
	ClusterQueue string `json:"clusterQueue,omitempty"`
	// Resource is the accelerator the quota counts.
	// +optional
	Resource corev1.ResourceName `json:"resource,omitempty"`
	// Quota is the accelerator quota written: the schedulable capacity less headroom.
	Quota int64 `json:"quota"`
	// DeviceResource and DeviceQuota are the DRA devices' logical resource and its
	// quota (spec.queue.devices): the schedulable members' healthy devices less headroom.
	// +optional
	DeviceResource corev1.ResourceName `json:"deviceResource,omitempty"`
	// +optional
	DeviceQuota int64 `json:"deviceQuota,omitempty"`
	// DeviceUsed is the devices the scheduler has admitted workloads with.
	// +optional
	DeviceUsed int64 `json:"deviceUsed,omitempty"`
	// SchedulableNodes are the members whose accelerators are in the quota: Ready, not
	// cordoned, not quarantined by the health loop, not in a driver rollout.
	SchedulableNodes int32 `json:"schedulableNodes"`
	// Used is the accelerators the scheduler has admitted workloads with.
	// +optional
	Used int64 `json:"used"`
	// Admitted and Pending count the scheduler's workloads in the queue.
	// +optional
	Admitted int32 `json:"admitted"`
	// +optional
	Pending int32 `json:"pending"`
	// Namespaces hold the pool's LocalQueues.
	// +listType=set
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`
	// Shares are the namespaces' shares as written (spec.queue.shares), after any
	// shrinking to the capacity; Quota and Used above are the whole pool's.
	// +listType=map
	// +listMapKey=namespace
	// +optional
	Shares []QueueShareStatus `json:"shares,omitempty"`
	// Deserved and Guarantee are what was written into Volcano's Queue (spec.queue's,
	// lowered to the quota when it is below them).
	// +optional
	Deserved *int64 `json:"deserved,omitempty"`
	// +optional
	Guarantee *int64 `json:"guarantee,omitempty"`
	// HyperNodes are the Volcano HyperNodes written for the pool's domains (one per
	// domain of each level); HyperNodesSkipped says why none were written (Volcano's
	// own label discovery is on).
	// +optional
	HyperNodes int32 `json:"hyperNodes,omitempty"`
	// +optional
	HyperNodesSkipped string `json:"hyperNodesSkipped,omitempty"`
}

// QueueShareStatus is one share's queue as written and read.
type QueueShareStatus struct {
	Namespace string `json:"namespace"`
	// ClusterQueue is the share's ClusterQueue (<pool>-<namespace>).
	ClusterQueue string `json:"clusterQueue"`
	// Quota and DeviceQuota are what was written: the share, or less when the
	// capacity is below the sum of the shares.
	Quota int64 `json:"quota"`
	// +optional
	DeviceQuota int64 `json:"deviceQuota,omitempty"`
	// Used is the accelerators its admitted workloads use (borrowed ones included).
	// +optional
	Used int64 `json:"used"`
}

// AcceleratorSpec names the accelerator model of a pool.
type AcceleratorSpec struct {
	// Type is the value member nodes carry in runwhere.ai/gpu-type (A100-80G, Snt9B, ...);
	// empty for CPU pools.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^([A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?)?$`
	// +optional
	Type string `json:"type,omitempty"`
	// ResourceName is the extended resource the accelerators are counted by
	// (nvidia.com/gpu, huawei.com/Ascend910, ...); detected from the nodes when empty.
	// +optional
	ResourceName corev1.ResourceName `json:"resourceName,omitempty"`
}

// NodePool is a named group of same-spec nodes inside a pool (label runwhere.ai/node-pool).
type NodePool struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Labels are applied to every member node.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Taints are applied to every member node.
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
}

// SoftwareSpec is the version chain hardware → driver → firmware → CANN → torch_npu → image.
type SoftwareSpec struct {
	// +optional
	Driver string `json:"driver,omitempty"`
	// +optional
	Firmware string `json:"firmware,omitempty"`
	// +optional
	CANN string `json:"cann,omitempty"`
	// +optional
	TorchNPU string `json:"torchNPU,omitempty"`
	// +optional
	PyTorch string `json:"pytorch,omitempty"`
	// +optional
	CUDA string `json:"cuda,omitempty"`
	// +optional
	Image string `json:"image,omitempty"`
}

// HCCLSpec holds HCCL settings.
type HCCLSpec struct {
	// +optional
	OpRetry OpRetrySpec `json:"opRetry,omitempty,omitzero"`
}

// OpRetrySpec is HCCL operator-level retry (HCCL_OP_RETRY_ENABLE / HCCL_OP_RETRY_PARAMS).
type OpRetrySpec struct {
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +kubebuilder:default=3
	// +optional
	MaxRetries int32 `json:"maxRetries,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +kubebuilder:default=300
	// +optional
	RetryTimeoutSeconds int32 `json:"retryTimeoutSeconds,omitempty"`
}

// StressTestSpec configures stress tests.
type StressTestSpec struct {
	// Deprecated: nothing reads Schedule, and a change to it changes no schedule. The
	// schedule of periodic runs is the CronJob litepool-stress-<pool> that `kubectl
	// litepool stress schedule` writes (kubectl get cronjob litepool-stress-<pool>);
	// that command clears this field. It stays so that Pools that carry it stay valid.
	// +optional
	Schedule string `json:"schedule,omitempty"`
	// +optional
	Image string `json:"image,omitempty"`
	// +listType=set
	// +optional
	Tests []StressTest `json:"tests,omitempty"`
}

// StressTest names one stress test.
// +kubebuilder:validation:Enum=npu;hccs;roce;storage
type StressTest string

// UpgradeSpec is the driver installer used for this pool's nodes.
type UpgradeSpec struct {
	// +optional
	InstallerImage string `json:"installerImage,omitempty"`
	// +optional
	InstallerCommand []string `json:"installerCommand,omitempty"`
}

// PoolStatus is the observed state of a pool. The controller in litepool-webhook keeps
// it (pkg/controller); the plugin computes the same figures with the same code
// (pkg/inventory) each time it reads a pool, so that -o json/yaml are exact.
type PoolStatus struct {
	// ObservedAt is when the controller last wrote this status (it writes only when a
	// figure or condition changes, so this is the time of the last change it saw).
	// +optional
	ObservedAt *metav1.Time `json:"observedAt,omitempty"`
	// ObservedGeneration is the spec generation the conditions were computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is Running, Degraded (some nodes not Running), Empty or Upgrading.
	// +optional
	Phase string `json:"phase,omitempty"`
	// NodeCount is the number of member nodes.
	// +optional
	NodeCount int32 `json:"nodeCount"`
	// NodeStates counts members by state (Running, NotReady, Cordoned, Draining,
	// Upgrading, Degraded); states with no member are left out.
	// +optional
	NodeStates map[string]int32 `json:"nodeStates,omitempty"`
	// UpgradeStates counts members by driver-upgrade state (runwhere.ai/upgrade-state);
	// nodes never upgraded are left out.
	// +optional
	UpgradeStates map[string]int32 `json:"upgradeStates,omitempty"`
	// HealthyNodes are members in state Running; FaultyNodes the rest.
	// +optional
	HealthyNodes int32 `json:"healthyNodes"`
	// +optional
	FaultyNodes int32 `json:"faultyNodes"`
	// AcceleratorResource is the resource the figures below count.
	// +optional
	AcceleratorResource corev1.ResourceName `json:"acceleratorResource,omitempty"`
	// AcceleratorTotal is the allocatable accelerators of every member, as kubectl shows
	// the nodes.
	// +optional
	AcceleratorTotal int64 `json:"acceleratorTotal"`
	// AcceleratorUsed is what non-terminal pods bound to the members request.
	// +optional
	AcceleratorUsed int64 `json:"acceleratorUsed"`
	// AcceleratorFree is what pods can still be given: allocatable less requests on the
	// members in service only (Ready, not cordoned, quarantined or upgrading, and no
	// NoSchedule or NoExecute taint the pool's pods do not tolerate: the count the
	// queue's quota and the domains use), at least 0 a member. Total - used - free is
	// what members out of service hold idle.
	// +optional
	AcceleratorFree int64 `json:"acceleratorFree"`
	// MIGSlices are the NVIDIA MIG slices (nvidia.com/mig-<profile>) of the members, per
	// profile. A slice is part of a GPU: slices are never added to the figures above.
	// +optional
	MIGSlices []MIGSliceStatus `json:"migSlices,omitempty"`
	// DRA counts the members' Dynamic Resource Allocation devices (ResourceSlices, and
	// ResourceClaims allocated to them), apart from the extended-resource figures above:
	// each physical device once. Absent when no member publishes any.
	// +optional
	DRA *DRAStatus `json:"dra,omitempty"`
	// GPUTypes are the accelerator models seen on members.
	// +optional
	GPUTypes []string `json:"gpuTypes,omitempty"`
	// DriverVersions are the driver versions seen on members.
	// +optional
	DriverVersions []string `json:"driverVersions,omitempty"`
	// QuarantinedNodes counts the members the health loop holds out of scheduling
	// (every health state but Healthy and Waiting); left out when none is.
	// +optional
	QuarantinedNodes int32 `json:"quarantinedNodes,omitempty"`
	// BreakerTripped: a fault was left unquarantined because the pool already has
	// spec.health.maxQuarantinedPercent of its members out; a person must look.
	// +optional
	BreakerTripped bool `json:"breakerTripped,omitempty"`
	// NodeHealth is the health loop's memory, one entry per member it has seen
	// fault. Only the controller writes it; it holds no orders (spec.health.hold and
	// release do). The loop checks an entry against the node's quarantine taint: a
	// changed or removed entry keeps its node out, never returns it.
	// +listType=map
	// +listMapKey=node
	// +optional
	NodeHealth []NodeHealthStatus `json:"nodeHealth,omitempty"`
	// Queue is the pool's scheduler queue (spec.queue); absent when it has none.
	// +optional
	Queue *QueueStatus `json:"queue,omitempty"`
	// Topology summarises the pool's domains (spec.topology); absent without one.
	// +optional
	Topology *TopologyStatus `json:"topology,omitempty"`
	// Conditions of the pool: Degraded (some member not Running), BelowMinNodes (fewer
	// Running members than spec.minNodes), Upgrading (a member is mid-upgrade), Queue
	// (its scheduler queue is written: False says why not).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// HealthMode says what the health loop does with what it sees.
// +kubebuilder:validation:Enum=Enforce;DryRun
type HealthMode string

const (
	// HealthEnforce quarantines, drains, remediates, re-checks and returns nodes.
	HealthEnforce HealthMode = "Enforce"
	// HealthDryRun records the Events the loop would record and changes no node.
	HealthDryRun HealthMode = "DryRun"
)

// HealthPolicy is a pool's node health loop: which signals quarantine a member, what
// is done while it is out and when it comes back. Every field has a safe default.
type HealthPolicy struct {
	// Mode: Enforce (default) or DryRun (Events only).
	// +kubebuilder:default=Enforce
	// +optional
	Mode HealthMode `json:"mode,omitempty"`
	// Conditions are the node conditions that quarantine a member when they have
	// their status (default True). Absent: the conditions Node Problem Detector and
	// NVSentinel set (policy.DefaultHealthConditions); an empty list: none.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []HealthCondition `json:"conditions,omitempty"`
	// NotReadyGrace is how long a member may be NotReady before it is quarantined.
	// Default 5m.
	// +optional
	NotReadyGrace *metav1.Duration `json:"notReadyGrace,omitempty"`
	// Drain evicts the workload pods of a member quarantined for a fatal fault,
	// through the Eviction API (PodDisruptionBudgets are honoured). Default off.
	// +optional
	Drain bool `json:"drain,omitempty"`
	// Remediation runs an operator-approved Job on a quarantined member before it is
	// re-checked (a reset or reboot image). Absent: no remediation.
	// +optional
	Remediation *RemediationSpec `json:"remediation,omitempty"`
	// Recheck is the stress test a member must pass before it returns: an operator's
	// definition, or an image and tests defaulting to spec.stressTest's. With neither a
	// definition nor an image the member returns after the hold time alone, and the
	// Event says it was not re-checked.
	// +optional
	Recheck *RecheckSpec `json:"recheck,omitempty"`
	// HoldTime is how long a member's signals must stay clear after it passed the
	// re-check before it returns. Default 10m.
	// +optional
	HoldTime *metav1.Duration `json:"holdTime,omitempty"`
	// MaxQuarantinedPercent caps the share of members quarantined automatically (at
	// least one node). Past it litepool raises BreakerTripped and waits for a person.
	// Default 25.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxQuarantinedPercent int32 `json:"maxQuarantinedPercent,omitempty"`
	// FlapWindow: a member that faults again within this time of returning is held
	// out until a person releases it. Default 24h.
	// +optional
	FlapWindow *metav1.Duration `json:"flapWindow,omitempty"`
	// DomainOutPercent holds a unit domain (spec.topology.unit) out whole once this
	// share of its members is out on their own signals: its other members get the
	// quarantine taint (reason DomainHeldOut), within the circuit breaker, and return
	// together when the share falls below it. Only with spec.topology. Absent: off.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	DomainOutPercent int32 `json:"domainOutPercent,omitempty"`
	// Hold are the members a person holds out (kubectl litepool health hold): each is
	// tainted and stays out while its entry is here. Orders live in spec, a Pool
	// editor's right; the status only reports what the loop did with them.
	// +listType=map
	// +listMapKey=node
	// +kubebuilder:validation:MaxItems=5000
	// +optional
	Hold []NodeHold `json:"hold,omitempty"`
	// Release are the members a person released (kubectl litepool health release): a
	// member the loop holds out that went out no later than the release's time
	// returns. A release written before the member's present quarantine began does
	// nothing, so an old one never releases a new fault.
	// +listType=map
	// +listMapKey=node
	// +kubebuilder:validation:MaxItems=5000
	// +optional
	Release []NodeRelease `json:"release,omitempty"`
}

// NodeHold holds one member out by hand.
type NodeHold struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`
	// Reason is shown in the node's entry and Event.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Reason string `json:"reason,omitempty"`
	// By names who held it, as the health verb's caller was known to the API server
	// (a claim of whoever wrote the Pool).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	By string `json:"by,omitempty"`
}

// NodeRelease returns one member the loop holds out.
type NodeRelease struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`
	// At is when the release was given: it returns a member whose quarantine began
	// no later (the quarantine taint's timeAdded, which only the controller and writers
	// of nodes set).
	At metav1.Time `json:"at"`
	// By names who released it (a claim of whoever wrote the Pool).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	By string `json:"by,omitempty"`
}

// HealthCondition is one node condition the loop watches.
type HealthCondition struct {
	// Type of the node condition (KernelDeadlock, SysLogsXIDError, ...).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	Type string `json:"type"`
	// Status that means a fault. Default True.
	// +kubebuilder:validation:Enum=True;False;Unknown
	// +optional
	Status corev1.ConditionStatus `json:"status,omitempty"`
	// Fatal faults drain the member when spec.health.drain is on.
	// +optional
	Fatal bool `json:"fatal,omitempty"`
}

// RemediationSpec is the Job run on a quarantined member, in litepool's namespace,
// pinned to the node like the driver installer. What it runs (image and command) is
// an operator's definition the Pool names: a Pool's editor chooses among what the
// operator defined (--health-definition of Deployment litepool-controller), never the
// image or command of a privileged Job.
type RemediationSpec struct {
	// Definition names the operator's remediation definition (--health-definition
	// NAME=...).
	// +optional
	Definition string `json:"definition,omitempty"`
	// Image and Command are no longer run: a remediation that gives them and no
	// definition holds its node out (reason NotDefined) and says why.
	// +optional
	Image string `json:"image,omitempty"`
	// +optional
	Command []string `json:"command,omitempty"`
	// Timeout of the Job (its activeDeadlineSeconds). Default: the definition's, else
	// 30m.
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// RecheckSpec overrides the stress test a quarantined member must pass.
type RecheckSpec struct {
	// Definition names an operator's re-check definition (--health-definition
	// NAME=...), whose image and command replace Image and Command.
	// +optional
	Definition string `json:"definition,omitempty"`
	// +optional
	Image string `json:"image,omitempty"`
	// +optional
	Command []string `json:"command,omitempty"`
	// +listType=set
	// +optional
	Tests []StressTest `json:"tests,omitempty"`
}

// NodeHealthState is where a member is in the health loop.
// +kubebuilder:validation:Enum=Healthy;Waiting;Quarantined;Draining;Remediating;Rechecking;Holding;HeldOut;Released;DomainOut
type NodeHealthState string

const (
	// NodeHealthHealthy: back in service; the entry remembers when, for the flap window.
	NodeHealthHealthy NodeHealthState = "Healthy"
	// NodeHealthWaiting: faulty, but the breaker left it in service.
	NodeHealthWaiting NodeHealthState = "Waiting"
	// NodeHealthQuarantined: tainted; waits for its signals to clear.
	NodeHealthQuarantined NodeHealthState = "Quarantined"
	// NodeHealthDraining: tainted; its workload pods are being evicted.
	NodeHealthDraining NodeHealthState = "Draining"
	// NodeHealthRemediating: tainted; the remediation Job runs.
	NodeHealthRemediating NodeHealthState = "Remediating"
	// NodeHealthRechecking: tainted; the re-check stress run runs.
	NodeHealthRechecking NodeHealthState = "Rechecking"
	// NodeHealthHolding: passed the re-check; its signals must stay clear for the hold time.
	NodeHealthHolding NodeHealthState = "Holding"
	// NodeHealthHeldOut: out until a person releases it (flapping, failed re-check or
	// remediation, or held by hand).
	NodeHealthHeldOut NodeHealthState = "HeldOut"
	// NodeHealthReleased: a release in spec.health.release applies this pass; the
	// loop stores Healthy, never this. An entry written with it orders nothing.
	NodeHealthReleased NodeHealthState = "Released"
	// NodeHealthDomainOut: the member shows no fault of its own but its unit domain is
	// held out whole (spec.health.domainOutPercent); it returns with its domain.
	NodeHealthDomainOut NodeHealthState = "DomainOut"
)

// NodeHealthStatus is one member's place in the health loop.
type NodeHealthStatus struct {
	Node  string          `json:"node"`
	State NodeHealthState `json:"state"`
	// Reason is the signal that took the node out (DeviceUnhealthy, NotReady,
	// Condition/<type>, StressTestFailed, Flapping, RecheckFailed, ...).
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// Since is when the node entered State.
	Since metav1.Time `json:"since"`
	// FaultedAt is when this episode's first fault was seen.
	// +optional
	FaultedAt *metav1.Time `json:"faultedAt,omitempty"`
	// ReturnedAt is when the node last returned; a fault within spec.health.flapWindow
	// of it holds the node out.
	// +optional
	ReturnedAt *metav1.Time `json:"returnedAt,omitempty"`
	// Fatal: one of the signals is fatal.
	// +optional
	Fatal bool `json:"fatal,omitempty"`
	// StressRun is the re-check run of this episode.
	// +optional
	StressRun string `json:"stressRun,omitempty"`
	// Job is the remediation Job of this episode, in litepool's namespace.
	// +optional
	Job string `json:"job,omitempty"`
	// Drained and Remediated record the steps this episode has done.
	// +optional
	Drained bool `json:"drained,omitempty"`
	// +optional
	Remediated bool `json:"remediated,omitempty"`
	// By names who held or released the node by hand.
	// +optional
	By string `json:"by,omitempty"`
	// Domain is the member's unit domain when this episode began, and DomainSize the
	// members that domain had then (spec.health.domainOutPercent): a fault counts
	// toward a domain only while the node's labels still put it there.
	// +optional
	Domain string `json:"domain,omitempty"`
	// +optional
	DomainSize int32 `json:"domainSize,omitempty"`
	// History is the node's last transitions, newest last (at most 10).
	// +listType=atomic
	// +optional
	History []NodeHealthTransition `json:"history,omitempty"`
}

// NodeHealthTransition is one step of a member's health history.
type NodeHealthTransition struct {
	Time  metav1.Time     `json:"time"`
	State NodeHealthState `json:"state"`
	// +optional
	Reason string `json:"reason,omitempty"`
}

// MIGSliceStatus counts one MIG profile's slices: total (allocatable of Ready members),
// used (requested by non-terminal pods bound to members) and free.
type MIGSliceStatus struct {
	Resource corev1.ResourceName `json:"resource"`
	Total    int64               `json:"total"`
	Used     int64               `json:"used"`
	Free     int64               `json:"free"`
}

// DRAStatus counts DRA devices of Ready members. A device published whole and as
// partitions (consuming one counter set) is one device; it is allocated when any of its
// views is. Unhealthy devices carry a NoSchedule or NoExecute device taint. Free devices
// are neither allocated nor unhealthy.
type DRAStatus struct {
	Total     int64 `json:"total"`
	Allocated int64 `json:"allocated"`
	Free      int64 `json:"free"`
	Unhealthy int64 `json:"unhealthy"`
	// Devices breaks the figures down by driver, device class and model.
	// +optional
	Devices []DRADeviceStatus `json:"devices,omitempty"`
}

// DRADeviceStatus is the devices of one driver, DeviceClass and model.
type DRADeviceStatus struct {
	Driver string `json:"driver"`
	// DeviceClass is the narrowest DeviceClass that selects the devices; empty when none.
	// +optional
	DeviceClass string `json:"deviceClass,omitempty"`
	// Model is the devices' productName, model or product attribute.
	// +optional
	Model     string `json:"model,omitempty"`
	Total     int64  `json:"total"`
	Allocated int64  `json:"allocated"`
	Free      int64  `json:"free"`
	Unhealthy int64  `json:"unhealthy"`
	// Partitionable is devices published with partitions; PartitionsAllocated is the
	// partitions allocated (a partition is part of one of the devices counted above).
	// +optional
	Partitionable int64 `json:"partitionable,omitempty"`
	// +optional
	PartitionsAllocated int64 `json:"partitionsAllocated,omitempty"`
}

// +kubebuilder:object:root=true

// PoolList is a list of Pools.
type PoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Pool `json:"items"`
}
