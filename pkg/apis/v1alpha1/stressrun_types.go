package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// StressRunResource is the REST resource of StressRun objects, for dynamic clients.
var StressRunResource = GroupVersion.WithResource("stressruns")

// Registered here rather than in register.go, which other kinds share.
func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &StressRun{}, &StressRunList{})
		return nil
	})
}

// +genclient
// +genclient:nonNamespaced
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=lpstress,categories=litepool
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.spec.pool`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Passed",type=integer,JSONPath=`.status.passed`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.total`
// +kubebuilder:printcolumn:name="Skipped",type=integer,JSONPath=`.status.skipped`,priority=1
// +kubebuilder:printcolumn:name="Tests",type=string,JSONPath=`.spec.tests`,priority=1
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="a stress run's name is at most 63 characters: it labels the run's pods"

// StressRun is one stress test of a pool's idle nodes: litepool's controller runs one
// pod per node and test, in litepool's own namespace, and records each outcome here.
// Whoever may create a StressRun chooses the image and command its pods run; nothing
// else (no Pool or Node annotation) makes litepool run a stress pod.
type StressRun struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   StressRunSpec   `json:"spec"`
	Status StressRunStatus `json:"status,omitempty"`
}

// StressRunSpec says what to test, where and how.
// +kubebuilder:validation:XValidation:rule="!has(self.domains) || !self.domains || !has(self.nodes) || size(self.nodes) == 0",message="set one of spec.nodes (some members) or spec.domains (whole domains): a run by domain tests whole domains"
// +kubebuilder:validation:XValidation:rule="self.pool == oldSelf.pool && self.tests == oldSelf.tests && self.image == oldSelf.image && (has(self.command) == has(oldSelf.command) && (!has(self.command) || self.command == oldSelf.command)) && (has(self.nodes) == has(oldSelf.nodes) && (!has(self.nodes) || self.nodes == oldSelf.nodes)) && has(self.domains) == has(oldSelf.domains) && (!has(self.domains) || self.domains == oldSelf.domains)",message="a stress run's pool, nodes, domains, tests, image and command are fixed once created; only abort may change"
type StressRunSpec struct {
	// Pool whose idle nodes are tested.
	// +kubebuilder:validation:MinLength=4
	// +kubebuilder:validation:MaxLength=24
	// +kubebuilder:validation:Pattern=`^[a-z]([a-z0-9-]*[a-z0-9])?$`
	Pool string `json:"pool"`
	// Nodes limits the run to these members of the pool; empty: every member. A node
	// named here that is not a member is reported skipped.
	// +listType=set
	// +optional
	Nodes []string `json:"nodes,omitempty"`
	// Domains tests the pool by unit domain (spec.topology of the Pool): a domain's
	// members are tested together, and only when every member is idle; a domain with
	// one member busy, cordoned or NotReady is skipped whole, with the reason. Each
	// domain's result (its link test) is in status.domains. Only for a pool with a
	// topology (rule T4).
	// +optional
	Domains bool `json:"domains,omitempty"`
	// Tests run one after the other on each node, one pod per test; a node's first
	// failing test ends its run.
	// +kubebuilder:validation:MinItems=1
	// +listType=set
	Tests []StressTest `json:"tests"`
	// Image of the test pods.
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`
	// Command of the test pods (default: the image's entrypoint). The test's name is in
	// $STRESS_TESTS, the node's in $NODE_NAME, the pool's in $POOL.
	// +optional
	Command []string `json:"command,omitempty"`
	// Timeout of one test pod (its activeDeadlineSeconds): a test still running then
	// has failed. Default 30m.
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// KeepPods keeps the pods of passed tests too (failed tests' pods are always kept
	// for their logs, until the run is deleted).
	// +optional
	KeepPods bool `json:"keepPods,omitempty"`
	// Abort stops the run: running pods are deleted and tests not finished are
	// reported Aborted; nodes are not judged on them.
	// +optional
	Abort bool `json:"abort,omitempty"`
}

// StressRunPhase is where a run is.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;Aborted
type StressRunPhase string

const (
	// StressRunPending: not started; another run of the pool may hold it.
	StressRunPending StressRunPhase = "Pending"
	// StressRunRunning: test pods are being run.
	StressRunRunning StressRunPhase = "Running"
	// StressRunSucceeded: every tested node passed every test.
	StressRunSucceeded StressRunPhase = "Succeeded"
	// StressRunFailed: a node failed a test, or the run could not be run at all.
	StressRunFailed StressRunPhase = "Failed"
	// StressRunAborted: spec.abort stopped it.
	StressRunAborted StressRunPhase = "Aborted"
)

// Finished says the run's verdicts will not change any more. Its nodes may not be told
// yet: the phase is stored first, each node's label after (StressRunStatus.Settled).
func (p StressRunPhase) Finished() bool {
	return p == StressRunSucceeded || p == StressRunFailed || p == StressRunAborted
}

// Settled says the run has finished and every judged node carries its verdict (label,
// annotation, Event): what one who follows a run waits for before saying a node is
// now healthy or degraded.
func (s *StressRunStatus) Settled() bool {
	if !s.Phase.Finished() {
		return false
	}
	for _, j := range s.Judged {
		if !j.Recorded {
			return false
		}
	}
	return true
}

// StressOutcome is where one test of one node is.
type StressOutcome string

const (
	StressOutcomePending StressOutcome = "Pending"
	StressOutcomeRunning StressOutcome = "Running"
	StressOutcomePassed  StressOutcome = "Passed"
	StressOutcomeFailed  StressOutcome = "Failed"
	// StressOutcomeSkipped: the node was not tested (busy, cordoned, NotReady, not a
	// member); the message says why.
	StressOutcomeSkipped StressOutcome = "Skipped"
	// StressOutcomeNotRun: an earlier test of the node failed.
	StressOutcomeNotRun  StressOutcome = "NotRun"
	StressOutcomeAborted StressOutcome = "Aborted"
)

// Final says the result will not change any more.
func (o StressOutcome) Final() bool {
	return o != StressOutcomePending && o != StressOutcomeRunning
}

// StressNodeResult is one test on one node (a skipped node has one result, with no
// test).
type StressNodeResult struct {
	Node string `json:"node"`
	// +optional
	Test StressTest `json:"test,omitempty"`
	// Pod that runs the test, in litepool's namespace.
	// +optional
	Pod     string        `json:"pod,omitempty"`
	Outcome StressOutcome `json:"outcome"`
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	FinishTime *metav1.Time `json:"finishTime,omitempty"`
}

// StressRunStatus is the run's progress, written by the controller (or by the plugin
// running the same reconciler when no controller runs).
type StressRunStatus struct {
	// ObservedGeneration is the generation last reconciled: the plugin knows a
	// controller took the run when it is set.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Phase StressRunPhase `json:"phase,omitempty"`
	// Namespace the test pods run in: litepool's own.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Total, Passed, Failed and Skipped count nodes: a node passes when it passed
	// every test; Total counts the nodes tested. Always written, so that kubectl's
	// columns read 0 rather than nothing.
	// +optional
	Total int32 `json:"total"`
	// +optional
	Passed int32 `json:"passed"`
	// +optional
	Failed int32 `json:"failed"`
	// +optional
	Skipped int32 `json:"skipped"`
	// Results per node and test, by node then test order.
	// +listType=atomic
	// +optional
	Results []StressNodeResult `json:"results,omitempty"`
	// Domains are the results per unit domain of a run by domain (spec.domains), by
	// name.
	// +listType=map
	// +listMapKey=domain
	// +optional
	Domains []StressDomainResult `json:"domains,omitempty"`
	// Judged are the verdicts of the nodes whose tests are all final, stored before the
	// node is labelled: a pass that ends between the two labels the node on the next
	// one, and a verdict recorded is never recorded twice.
	// +listType=map
	// +listMapKey=node
	// +optional
	Judged []StressJudgement `json:"judged,omitempty"`
	// Conditions: Started (False with reason PoolBusy while another run of the pool
	// holds it), Complete.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// StressDomainResult is one unit domain's result in a run by domain: the link test of
// the domain as a whole. It failed when one member failed (that member is also marked,
// as any node that fails is).
type StressDomainResult struct {
	// Domain is the domain's key (the level values down to the unit, joined by "/").
	Domain string `json:"domain"`
	// Members are the domain's members in the pool when the run started, sorted.
	// +listType=atomic
	Members []string `json:"members"`
	// Outcome: Pending, Running, Passed, Failed, Skipped (a member busy, cordoned or
	// NotReady: Message says which), Aborted.
	Outcome StressOutcome `json:"outcome"`
	// FailedMembers are the members that failed a test.
	// +listType=atomic
	// +optional
	FailedMembers []string `json:"failedMembers,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// StressJudgement is one node's verdict in a run.
type StressJudgement struct {
	Node string `json:"node"`
	// Health is the runwhere.ai/health label the node gets: healthy or degraded.
	Health string `json:"health"`
	// Summary is the node's runwhere.ai/stress-result annotation.
	Summary string `json:"summary"`
	// Recorded: the label, the annotation and the node's Event are written.
	// +optional
	Recorded bool `json:"recorded,omitempty"`
}

// +kubebuilder:object:root=true

// StressRunList is a list of StressRuns.
type StressRunList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StressRun `json:"items"`
}
