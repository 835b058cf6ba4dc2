package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=drollout,categories=litepool
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.spec.pool`
// +kubebuilder:printcolumn:name="Nodes",type=string,JSONPath=`.spec.nodes`,priority=1
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Done",type=string,JSONPath=`.status.progress`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="has(self.spec.pool) != has(self.spec.nodes)",message="name exactly one of spec.pool or spec.nodes"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.canary) || has(self.spec.pool)",message="spec.canary applies to a pool rollout (spec.pool)"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.maxUnavailableDomains) || has(self.spec.pool)",message="spec.maxUnavailableDomains applies to a pool rollout (spec.pool) whose pool has a topology"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.maxUnavailableDomains) || !has(self.spec.maxUnavailable)",message="set one of spec.maxUnavailable (node by node) or spec.maxUnavailableDomains (domain by domain)"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.maxUnavailableDomains) || !has(self.spec.canary)",message="spec.canary is a node: a rollout by domain (spec.maxUnavailableDomains) takes whole domains; start a rollout of the canary's node first (spec.nodes)"

// DriverRollout is one driver upgrade of a pool's nodes, or of named nodes: litepool's
// controller takes each node through the state machine of pkg/policy (upgrade-required
// → cordon → wait-for-jobs → drain → install → validate → uncordon → done, or failed),
// in waves bounded by maxUnavailable, and records every node's progress in status.
// Who may upgrade drivers is whoever RBAC lets create this object (the shipped
// ClusterRole litepool-operator).
type DriverRollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DriverRolloutSpec   `json:"spec"`
	Status DriverRolloutStatus `json:"status,omitempty"`
}

// DriverRolloutSpec is what to install where, how fast, and the operator's controls
// (paused, abort, retryFailed): every change to the rollout is a change of its spec.
type DriverRolloutSpec struct {
	// Pool upgrades the members of this pool whose driver is not at Version when the
	// rollout starts (nodes joining later are not added). Every member counts for
	// maxUnavailable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.pool is immutable: start another rollout"
	// +optional
	Pool string `json:"pool,omitempty"`
	// Nodes upgrades these nodes, one at a time.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.nodes is immutable: start another rollout"
	// +listType=set
	// +optional
	Nodes []string `json:"nodes,omitempty"`
	// Version is the target driver version, as the node's driver-version label will
	// read it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.version is immutable: start another rollout"
	Version string `json:"version"`
	// Installer runs on each node as a Job in litepool's own namespace.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.installer is immutable: start another rollout"
	Installer DriverInstaller `json:"installer"`
	// MaxUnavailable is the most nodes of the pool unavailable at once (cordoned or
	// NotReady, for any reason): a count or a percentage, rounded up, at least 1.
	// Default 1.
	// +kubebuilder:validation:XIntOrString
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// MaxUnavailableDomains chooses the rollout by domain: the pool's unit domains
	// (spec.topology) are upgraded whole, all members of a domain cordoned, drained and
	// upgraded together, at most this many domains at once; the pool's minNodes still
	// holds as a floor on available nodes. Absent: node by node (maxUnavailable).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.maxUnavailableDomains is immutable: start another rollout"
	// +optional
	MaxUnavailableDomains *int32 `json:"maxUnavailableDomains,omitempty"`
	// Canary is upgraded alone first; the rest follow only if it succeeds.
	// +optional
	Canary string `json:"canary,omitempty"`
	// WaitSelector selects the workload pods a node waits for before its drain
	// (default: every workload pod).
	// +optional
	WaitSelector string `json:"waitSelector,omitempty"`
	// WaitTimeout is how long a node waits for its workload pods before the drain
	// evicts what is left (0: no wait).
	// +optional
	WaitTimeout *metav1.Duration `json:"waitTimeout,omitempty"`
	// DrainTimeout is how long a drain may take (0: no limit).
	// +optional
	DrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`
	// InstallTimeout is how long the installer Job may run (0: no limit).
	// +optional
	InstallTimeout *metav1.Duration `json:"installTimeout,omitempty"`
	// ValidateTimeout is how long the node's driver-version label may take to read
	// the target after the installer (0: no limit).
	// +optional
	ValidateTimeout *metav1.Duration `json:"validateTimeout,omitempty"`
	// ForceDrain drains pods that no controller manages, as kubectl drain --force.
	// +optional
	ForceDrain bool `json:"forceDrain,omitempty"`
	// Paused starts no further node; nodes in the middle of their upgrade finish.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// Abort ends the rollout: nodes that have not started leave it (state aborted),
	// nodes in the middle of their upgrade finish, failed nodes stay failed. It cannot
	// be undone.
	// +kubebuilder:validation:XValidation:rule="oldSelf == false || self == true",message="spec.abort cannot be undone: start another rollout"
	// +optional
	Abort bool `json:"abort,omitempty"`
	// RetryFailed, raised above status.retriedFailed, re-marks every failed node
	// upgrade-required once (its installer runs afresh): raise it by one to retry.
	// +kubebuilder:validation:Minimum=0
	// +optional
	RetryFailed int32 `json:"retryFailed,omitempty"`
}

// DriverInstaller is the image and command of the installer Job. The Job gets
// DRIVER_VERSION, NODE_NAME and the host's root at /host.
type DriverInstaller struct {
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`
	// +optional
	Command []string `json:"command,omitempty"`
}

// DriverRolloutPhase is where a rollout is as a whole.
// +kubebuilder:validation:Enum=Pending;Progressing;Paused;Succeeded;Failed;Aborted
type DriverRolloutPhase string

// The phases. Failed is where a rollout stops on a failed node (retryFailed continues
// it); Succeeded and Aborted are final.
const (
	RolloutPending     DriverRolloutPhase = "Pending"
	RolloutProgressing DriverRolloutPhase = "Progressing"
	RolloutPaused      DriverRolloutPhase = "Paused"
	RolloutSucceeded   DriverRolloutPhase = "Succeeded"
	RolloutFailed      DriverRolloutPhase = "Failed"
	RolloutAborted     DriverRolloutPhase = "Aborted"
)

// DriverRolloutStatus is what the controller has done.
type DriverRolloutStatus struct {
	// ObservedGeneration is the generation of the spec the controller last acted on:
	// the plugin reads it to know a controller runs.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Phase DriverRolloutPhase `json:"phase,omitempty"`
	// Message says why the rollout is where it is (what it waits for, why it stopped).
	// +optional
	Message string `json:"message,omitempty"`
	// Progress is "done/total", for kubectl get.
	// +optional
	Progress string `json:"progress,omitempty"`
	// +optional
	Total int32 `json:"total"`
	// +optional
	Done int32 `json:"done"`
	// +optional
	Failed int32 `json:"failed"`
	// RetriedFailed is the spec.retryFailed the controller has honoured.
	// +optional
	RetriedFailed int32 `json:"retriedFailed,omitempty"`
	// StartTime is when the rollout fixed its nodes; CompletionTime when it ended
	// (Succeeded or Aborted): the wall time is the one less the other.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// DomainUnavailableSeconds is the sum over the pool's domains of the time the
	// rollout held at least one of their members out (from its cordon to its done or
	// failed): one member out makes a domain unfit for the jobs that span it. Only for
	// a pool with a topology.
	// +optional
	DomainUnavailableSeconds int64 `json:"domainUnavailableSeconds,omitempty"`
	// Domains is the progress of each unit domain of the rollout's nodes (a pool with
	// a topology), whatever the strategy.
	// +listType=map
	// +listMapKey=name
	// +optional
	Domains []DriverRolloutDomain `json:"domains,omitempty"`
	// Nodes is each node's progress, fixed when the rollout starts.
	// +listType=map
	// +listMapKey=name
	// +optional
	Nodes []DriverRolloutNode `json:"nodes,omitempty"`
	// Conditions: Complete (True once Succeeded; False with the reason while not).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DriverRolloutNode is one node's place in the rollout.
type DriverRolloutNode struct {
	Name string `json:"name"`
	// State is the node's state in the upgrade state machine, or aborted.
	State string `json:"state"`
	// Since is when the node entered State: the step's timeout counts from it.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// Attempt counts the node's tries (a retry raises it); its installer Job is named
	// after the rollout, the node and the attempt.
	// +optional
	Attempt int32 `json:"attempt,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// Job is the installer Job, in litepool's namespace.
	// +optional
	Job string `json:"job,omitempty"`
	// Domain is the node's unit domain when the rollout started (a pool with a
	// topology; empty for a node outside every domain): fixed then, so that a label
	// changed later does not move the node to another domain's wave.
	// +optional
	Domain string `json:"domain,omitempty"`
	// OutSince is when the node first left upgrade-required (its cordon); OutUntil
	// when it reached done. A failed node stays cordoned, so it stays out (no OutUntil)
	// through its retries.
	// +optional
	OutSince *metav1.Time `json:"outSince,omitempty"`
	// +optional
	OutUntil *metav1.Time `json:"outUntil,omitempty"`
}

// DriverRolloutDomain is one unit domain's progress in a rollout.
type DriverRolloutDomain struct {
	// Name is the domain's path of level values (policy.Topology.DomainOf).
	Name string `json:"name"`
	// State: Waiting, InProgress, Done, Failed.
	State string `json:"state"`
	// Nodes and Done count the domain's nodes in the rollout.
	Nodes int32 `json:"nodes"`
	// +optional
	Done int32 `json:"done"`
	// UnavailableSeconds is the time the rollout held at least one member out.
	// +optional
	UnavailableSeconds int64 `json:"unavailableSeconds,omitempty"`
}

// +kubebuilder:object:root=true

// DriverRolloutList is a list of DriverRollouts.
type DriverRolloutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DriverRollout `json:"items"`
}

// DriverRolloutResource is the REST resource of DriverRollout objects.
var DriverRolloutResource = GroupVersion.WithResource("driverrollouts")

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &DriverRollout{}, &DriverRolloutList{})
		return nil
	})
}
