package policy

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

// DesiredExclusiveTaints are node's taints as its membership says they should be: the
// exclusive taint of its pool when pool (the Pool object of the pool its label names;
// nil when there is none) is exclusive, and no other taint under the key
// runwhere.ai/pool. Other taints are kept as they are, in order; when nothing needs to
// change, node's own slice is returned.
func DesiredExclusiveTaints(node *corev1.Node, pool *v1alpha1.Pool) []corev1.Taint {
	var want *corev1.Taint
	if name := node.Labels[LabelPool]; pool != nil && pool.Name == name && pool.Spec.Exclusive {
		t := ExclusiveTaint(name)
		want = &t
	}
	have := node.Spec.Taints
	stale := func(t corev1.Taint) bool {
		return t.Key == LabelPool && (want == nil || t.Effect != want.Effect || t.Value != want.Value)
	}
	present := want != nil && slices.ContainsFunc(have, func(t corev1.Taint) bool {
		return t.Key == want.Key && t.Effect == want.Effect && t.Value == want.Value
	})
	if !slices.ContainsFunc(have, stale) && (want == nil || present) {
		return have
	}
	out := make([]corev1.Taint, 0, len(have)+1)
	for _, t := range have {
		if !stale(t) {
			out = append(out, t)
		}
	}
	if want != nil && !present {
		out = append(out, *want)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// ExclusiveMember is a node of an exclusive pool, as P6 needs it.
type ExclusiveMember struct {
	Node *corev1.Node
	Pool PoolInfo
}

// CheckExclusivePlacement is rule P6: a pod that is not an exclusive pool's (node
// agents excepted: agent, see Agent) never lands on that pool's nodes, however it gets
// there. The pool's
// taint stops the scheduler; P6 closes the bypasses: a pod bound to a node directly
// (spec.nodeName, a pods/binding by someone other than the scheduler: target is that
// node), and a pod that tolerates the taint (an empty key with operator Exists, or the
// key runwhere.ai/pool) whose required node affinity (nodeSelector, matchExpressions,
// matchFields) lets it be scheduled onto a member. A pod is a pool's pod when it asks
// for the pool (label, or its namespace's default pool) and the pool admits its
// namespace (P4). members are the nodes of exclusive pools, target the node the pod is
// bound to ("" when it is not).
func CheckExclusivePlacement(pod *corev1.Pod, ns *corev1.Namespace, target string, members []ExclusiveMember, agent Agent) error {
	if agent == AgentCreated {
		return nil
	}
	// The pod's affinity is parsed once, and its tolerations and whether it is the
	// pool's judged once per pool: a pod's affinity can be large, and a cluster can hold
	// thousands of members.
	var affinity *nodeaffinity.RequiredNodeAffinity
	type verdict struct{ tol, why string }
	verdicts := map[string]verdict{}
	for _, m := range members {
		if target != "" {
			if m.Node.Name != target {
				continue
			}
			if _, tolerates := toleratesExclusive(pod, m.Pool.Name); agent == AgentClaimed && tolerates {
				return nil
			}
			return exclusiveDenial(pod, ns, m, "it is bound to the node")
		}
		v, seen := verdicts[m.Pool.Name]
		if !seen {
			if v.tol, _ = toleratesExclusive(pod, m.Pool.Name); v.tol != "" {
				v.why = notThePoolsPod(pod, ns, m.Pool)
			}
			verdicts[m.Pool.Name] = v
		}
		if v.why == "" {
			continue
		}
		if affinity == nil {
			a := nodeaffinity.GetRequiredNodeAffinity(pod)
			affinity = &a
		}
		if affinityAllows(affinity, m.Node) {
			return exclusiveViolation(pod, m, fmt.Sprintf("it tolerates the pool's taint (%s) and its node affinity allows the node", v.tol), v.why)
		}
	}
	return nil
}

// exclusiveDenial is P6's denial for pod on member m, or nil when the pod is the pool's.
func exclusiveDenial(pod *corev1.Pod, ns *corev1.Namespace, m ExclusiveMember, how string) error {
	if why := notThePoolsPod(pod, ns, m.Pool); why != "" {
		return exclusiveViolation(pod, m, how, why)
	}
	return nil
}

// notThePoolsPod says why pod is not pool's pod, or "" when it is.
func notThePoolsPod(pod *corev1.Pod, ns *corev1.Namespace, pool PoolInfo) string {
	asked, _ := PodPoolName(pod, ns)
	switch {
	case asked == "" || asked == DefaultPool:
		return "the pod asks for no pool"
	case asked != pool.Name:
		return fmt.Sprintf("the pod asks for pool %q", asked)
	case CheckPodNamespace(pool, ns, pod.Namespace) != nil:
		return fmt.Sprintf("pool %q does not admit namespace %q", pool.Name, pod.Namespace)
	}
	return ""
}

func exclusiveViolation(pod *corev1.Pod, m ExclusiveMember, how, why string) error {
	return Violationf("P6", "pod %s/%s may not run on node %q: %s, but the node belongs to exclusive pool %q, which runs only its own pods and node agents (DaemonSet pods that ask for no device, from a namespace the operator trusts with node agents), and %s; label the pod %s=%s from a namespace the pool admits, or keep it off the pool's nodes",
		pod.Namespace, podName(pod), m.Node.Name, how, m.Pool.Name, why, LabelPool, m.Pool.Name)
}

func podName(pod *corev1.Pod) string {
	if pod.Name == "" && pod.GenerateName != "" {
		return pod.GenerateName + "*"
	}
	return pod.Name
}

// toleratesExclusive says whether the pod tolerates pool's exclusive taint, and how.
func toleratesExclusive(pod *corev1.Pod, pool string) (string, bool) {
	taint := ExclusiveTaint(pool)
	for i := range pod.Spec.Tolerations {
		t := &pod.Spec.Tolerations[i]
		if t.ToleratesTaint(klog.Background(), &taint, false) {
			if t.Key == "" {
				return "operator Exists on every key", true
			}
			if t.Value == "" {
				return fmt.Sprintf("%s %s", t.Key, t.Operator), true
			}
			return fmt.Sprintf("%s %s %s", t.Key, t.Operator, t.Value), true
		}
	}
	return "", false
}

// affinityAllows says whether the pod's nodeSelector and required node affinity let the
// scheduler place it on node; an invalid affinity matches nothing (the scheduler
// refuses it too).
func affinityAllows(affinity *nodeaffinity.RequiredNodeAffinity, node *corev1.Node) bool {
	ok, err := affinity.Match(node)
	return err == nil && ok
}

// MayPassExclusiveTaint says whether P6 has anything to judge in a pod being created:
// it is bound to a node already (spec.nodeName), or it tolerates the key
// runwhere.ai/pool (or every key) otherwise than as its own pool's toleration (operator
// Equal, the value of its runwhere.ai/pool label, that label not "default"). A pod for
// which it is false passes CheckExclusivePlacement whatever the members, given P4 (its
// own pool admits its namespace), which the pod rules judge first. It is the Go twin of
// the first clause of the pod-placement webhook entry's condition
// (deploy/webhook/webhooks.yaml): the mutating webhook judges P6 for the pods it
// mutates, which that entry's object selector leaves out, and reads no pool member
// when this is false.
func MayPassExclusiveTaint(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" {
		return true
	}
	own := pod.Labels[LabelPool]
	for _, t := range pod.Spec.Tolerations {
		switch {
		case t.Key == "" && t.Operator == corev1.TolerationOpExists:
			return true
		case t.Key == LabelPool && !ownToleration(t, own):
			return true
		}
	}
	return false
}

// ownToleration: operator Equal (or unset) with the pod's own pool as the value.
func ownToleration(t corev1.Toleration, own string) bool {
	return (t.Operator == "" || t.Operator == corev1.TolerationOpEqual) && own != "" && own != DefaultPool && t.Value == own
}

// Agent is what P6 knows of a pod being a node agent.
type Agent int

const (
	// AgentNone: not a node agent.
	AgentNone Agent = iota
	// AgentCreated: a pod being created by the DaemonSet controller in a namespace
	// trusted with node agents that asks for no device (IsNodeAgent). It may run on any
	// exclusive node.
	AgentCreated
	// AgentClaimed: a pod being bound, in a namespace trusted with node agents, whose
	// ownerReferences name a DaemonSet and that asks for no device (ClaimsNodeAgent). Who created it is not known at binding, so the claim counts
	// only on a node whose taint the pod tolerates: a pod that could pass the taint was
	// judged when it was created (refused unless the DaemonSet controller made it), and
	// the binder does what the scheduler would.
	AgentClaimed
)

// ClaimsNodeAgent says whether a pod in namespace claims to be a node agent: its
// ownerReferences name a DaemonSet as controller, it asks for no device, and namespace
// is one the operator trusts with node agents (TrustsAgentsOf). Outside a trusted
// namespace the claim counts for nothing, as it would at creation.
func ClaimsNodeAgent(pod *corev1.Pod, namespace string, trusted []string) bool {
	return TrustsAgentsOf(namespace, trusted) && isDaemonSetPod(pod) && !RequestsDevices(pod)
}

// NamespaceKubeSystem is where the cluster's own node agents run (kube-proxy, CNI and
// CSI node plugins); only cluster administrators write pods there.
const NamespaceKubeSystem = "kube-system"

// TrustedAgentNamespaces are the namespaces P6 takes node agents from: litepool's own
// (own; empty when unknown), kube-system, and the operator's (litepool-webhook
// --agent-namespace), without repeats. A Pool names none: who may write pods in these
// namespaces is who the operator trusts on every exclusive node.
func TrustedAgentNamespaces(own string, operators []string) []string {
	out := []string{NamespaceKubeSystem}
	for _, ns := range append([]string{own}, operators...) {
		if ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// TrustsAgentsOf says whether node agents may come from namespace: it is one of
// trusted, or trusted is nil and namespace is kube-system.
func TrustsAgentsOf(namespace string, trusted []string) bool {
	if trusted == nil {
		trusted = []string{NamespaceKubeSystem}
	}
	return namespace != "" && slices.Contains(trusted, namespace)
}

// ValidateAgentNamespace checks a namespace the operator trusts with node agents: a
// namespace name (DNS-1123 label), and not "default", where anyone given edit in the
// default namespace, as tenants often are, would run agents on exclusive nodes.
func ValidateAgentNamespace(ns string) error {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return fmt.Errorf("%q is not a namespace name: %s", ns, strings.Join(errs, "; "))
	}
	if ns == metav1.NamespaceDefault {
		return fmt.Errorf("%q is the namespace every user's pods land in by default: trust a namespace that holds node agents only (gpu-operator, monitoring, ...)", ns)
	}
	return nil
}

// DaemonSetControllers are the identities the DaemonSet controller creates pods as by
// default: its own ServiceAccount (kube-controller-manager
// --use-service-account-credentials, as kubeadm and managed clusters run it), or
// kube-controller-manager's identity when it runs without. Both are held by
// kube-controller-manager alone.
var DaemonSetControllers = []string{"system:serviceaccount:kube-system:daemon-set-controller", "system:kube-controller-manager"}

// IsNodeAgent says whether a pod created by requester in namespace is a node agent,
// which P6 lets onto an exclusive pool's nodes: a pod the DaemonSet controller created
// (requester is one of controllers, the identities it runs as; an ownerReference naming
// a DaemonSet is a claim whoever writes the pod makes) that asks for no device (no
// extended resource, no ResourceClaim; an agent watches a node, it does not take its
// accelerators), in a namespace the operator trusts with node agents (trusted, see
// TrustedAgentNamespaces). The DaemonSet controller creates the pods of anyone's
// DaemonSet: only the namespace says whose it is, and anyone with edit in a namespace
// may make one that tolerates every taint.
func IsNodeAgent(pod *corev1.Pod, namespace, requester string, controllers, trusted []string) bool {
	return slices.Contains(controllers, requester) && ClaimsNodeAgent(pod, namespace, trusted)
}

// RequestsDevices says whether a pod asks for a device: an extended resource (a name
// with a domain, nvidia.com/gpu, example.com/nic, ...) in any container, or a
// ResourceClaim.
func RequestsDevices(pod *corev1.Pod) bool {
	if len(pod.Spec.ResourceClaims) > 0 {
		return true
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			for _, rl := range []corev1.ResourceList{cs[i].Resources.Requests, cs[i].Resources.Limits} {
				for name := range rl {
					if strings.Contains(string(name), "/") {
						return true
					}
				}
			}
		}
	}
	return false
}

func isDaemonSetPod(pod *corev1.Pod) bool {
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "DaemonSet" && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}
