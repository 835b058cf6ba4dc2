package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// TestAgentNamespacesAgree: the namespaces whose node agents the pod-placement entries
// leave out are exactly the webhook's --agent-namespace list. A namespace only in the
// conditions would let any DaemonSet of it onto exclusive nodes unjudged.
func TestAgentNamespacesAgree(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/webhook/deployment.yaml")
	require.NoError(t, err)
	var flagged []string
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var d appsv1.Deployment
		require.NoError(t, yaml.Unmarshal([]byte(doc), &d))
		if d.Name != "litepool-webhook" {
			continue
		}
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			if v, ok := strings.CutPrefix(a, "--agent-namespace="); ok {
				flagged = append(flagged, strings.Split(v, ",")...)
			}
		}
	}
	require.NotEmpty(t, flagged, "the webhook Deployment lists agent namespaces")
	for _, ns := range flagged {
		require.NoError(t, policy.ValidateAgentNamespace(ns))
	}
	inList := regexp.MustCompile(`request\.namespace in \[([^\]]*)\]`)
	for _, h := range placementConfig(t) {
		for _, c := range h.MatchConditions {
			if !strings.Contains(c.Expression, "daemon-set-controller") {
				continue
			}
			m := inList.FindStringSubmatch(c.Expression)
			require.NotNil(t, m, "%s: the node agents' clause names their namespaces", h.Name)
			var listed []string
			for _, v := range strings.Split(m[1], ",") {
				listed = append(listed, strings.Trim(strings.TrimSpace(v), "'"))
			}
			assert.Equal(t, flagged, listed, h.Name)
		}
	}
}

// TestAgentConditionSendsTenantDaemonSets: a device-free, tolerate-all DaemonSet pod
// the DaemonSet controller creates is left out only in the listed namespaces; a
// tenant's reaches P6.
func TestAgentConditionSendsTenantDaemonSets(t *testing.T) {
	entries := compileEntries(placementConfig(t))
	dsc := &user.DefaultInfo{Name: "system:serviceaccount:kube-system:daemon-set-controller"}
	for ns, sent := range map[string]bool{"gpu-operator": false, "monitoring": false, "ai-team": true, "default": true} {
		pod := defaultedPod()
		delete(pod.Labels, "runwhere.ai/pool")
		pod.Namespace = ns
		pod.Spec.NodeSelector = nil
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", Controller: new(true)}}
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
		pod.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Pod"})
		attr := admission.NewAttributesRecord(pod, nil, pod.GroupVersionKind(), ns, pod.Name,
			schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "", admission.Create, &metav1.CreateOptions{}, false, dsc)
		assert.Equal(t, sent, admit(t, entries, attr), ns)
	}
}

// TestPinnedConditionSends: the mutating entries for pinned pods send a pod without a
// pool (no label, or "default") whose every required placement term names a pool, a
// node or a hostname (what policy.PlacementPin can pin), and keep the rest off the wire.
func TestPinnedConditionSends(t *testing.T) {
	w, err := loadConfigs("../../deploy/webhook/webhooks.yaml")
	require.NoError(t, err)
	var hooks []admissionregistrationv1.ValidatingWebhook
	for _, m := range w.mut.Webhooks {
		if m.Name == "pods-node-selector.runwhere.ai" || m.Name == "pods-pinned-default-label.runwhere.ai" {
			hooks = append(hooks, admissionregistrationv1.ValidatingWebhook{Name: m.Name, Rules: m.Rules, ObjectSelector: m.ObjectSelector,
				MatchConditions: m.MatchConditions, FailurePolicy: m.FailurePolicy})
		}
	}
	require.Len(t, hooks, 2)
	entries := compileEntries(hooks)
	in := func(key string, v ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: v}
	}
	exprs := func(r ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: r}
	}
	byName := corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{in("metadata.name", "gpu-node-00001")}}
	admin := &user.DefaultInfo{Name: "kubernetes-admin"}
	for _, tc := range []struct {
		name     string
		selector map[string]string
		terms    []corev1.NodeSelectorTerm
		sent     bool
		owner    string // a controller ownerReference of this kind
		gpus     bool
	}{
		{"nothing", nil, nil, false, "", false},
		{"nodeSelector pool", map[string]string{"runwhere.ai/pool": "p"}, nil, true, "", false},
		{"nodeSelector hostname", map[string]string{"kubernetes.io/hostname": "h"}, nil, true, "", false},
		{"nodeSelector zone", map[string]string{"topology.kubernetes.io/zone": "z"}, nil, false, "", false},
		{"pool In", nil, []corev1.NodeSelectorTerm{exprs(in("runwhere.ai/pool", "p"))}, true, "", false},
		{"hostname In", nil, []corev1.NodeSelectorTerm{exprs(in("kubernetes.io/hostname", "h"))}, true, "", false},
		{"matchFields", nil, []corev1.NodeSelectorTerm{byName}, true, "", false},
		{"two bounded terms", nil, []corev1.NodeSelectorTerm{byName, exprs(in("runwhere.ai/pool", "p"))}, true, "", false},
		{"a bounded term or an unbounded one", nil, []corev1.NodeSelectorTerm{byName, exprs(in("runwhere.ai/gpu-type", "A100"))}, false, "", false},
		{"pool NotIn", nil, []corev1.NodeSelectorTerm{exprs(corev1.NodeSelectorRequirement{Key: "runwhere.ai/pool", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"p"}})}, false, "", false},
		{"zone affinity", nil, []corev1.NodeSelectorTerm{exprs(in("topology.kubernetes.io/zone", "z"))}, false, "", false},
		{"a node agent (a DaemonSet's, no device)", nil, []corev1.NodeSelectorTerm{byName}, false, "DaemonSet", false},
		{"a DaemonSet's pod asking for GPUs", nil, []corev1.NodeSelectorTerm{byName}, true, "DaemonSet", true},
	} {
		for _, label := range []string{"", "default", "p"} {
			pod := defaultedPod()
			delete(pod.Labels, "runwhere.ai/pool")
			if label != "" {
				pod.Labels["runwhere.ai/pool"] = label
			}
			pod.Spec.NodeSelector = tc.selector
			if tc.owner != "" {
				pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: tc.owner, Name: "agent", UID: "u", Controller: ptr.To(true)}}
			}
			if tc.gpus {
				pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
			}
			if tc.terms != nil {
				pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: tc.terms}}}
			}
			pod.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Pod"})
			attr := admission.NewAttributesRecord(pod, nil, pod.GroupVersionKind(), pod.Namespace, pod.Name,
				schema.GroupVersionResource{Version: "v1", Resource: "pods"}, "", admission.Create, &metav1.CreateOptions{}, false, admin)
			assert.Equal(t, tc.sent && label != "p", admit(t, entries, attr), "%s, label %q", tc.name, label)
		}
	}
}
