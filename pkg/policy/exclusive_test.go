package policy

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
)

func TestCheckExclusivePlacement(t *testing.T) {
	dev := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "dev-exclusive"}, Spec: v1alpha1.PoolSpec{Exclusive: true, Namespaces: []string{"nb-team"}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a10-node-3", Labels: map[string]string{LabelPool: "dev-exclusive", "zone": "a"}}}
	members := []ExclusiveMember{{Node: node, Pool: PoolInfo{Name: "dev-exclusive", Object: dev, Members: 1}}}
	nbTeam := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nb-team"}}
	aiTeam := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ai-team"}}
	mk := func(ns string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns, Labels: labels}}
	}
	tolerateAll := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	matchFields := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"a10-node-3"}}}}}}}}

	t.Run("bound by nodeName or binding: foreign pod denied", func(t *testing.T) {
		err := CheckExclusivePlacement(mk("ai-team", nil), aiTeam, "a10-node-3", members, AgentNone)
		require.Error(t, err)
		assert.Equal(t, `[P6] pod ai-team/p may not run on node "a10-node-3": it is bound to the node, but the node belongs to exclusive pool "dev-exclusive", which runs only its own pods and node agents (DaemonSet pods that ask for no device, from a namespace the operator trusts with node agents), and the pod asks for no pool; label the pod runwhere.ai/pool=dev-exclusive from a namespace the pool admits, or keep it off the pool's nodes`, err.Error())
		assert.NoError(t, CheckExclusivePlacement(mk("ai-team", nil), aiTeam, "a100-node-1", members, AgentNone), "another node")
	})
	t.Run("the pool's pod from an admitted namespace is allowed; P4 holds", func(t *testing.T) {
		own := map[string]string{LabelPool: "dev-exclusive"}
		assert.NoError(t, CheckExclusivePlacement(mk("nb-team", own), nbTeam, "a10-node-3", members, AgentNone))
		err := CheckExclusivePlacement(mk("ai-team", own), aiTeam, "a10-node-3", members, AgentNone)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `and pool "dev-exclusive" does not admit namespace "ai-team"`)
		other := CheckExclusivePlacement(mk("nb-team", map[string]string{LabelPool: "train-a100"}), nbTeam, "a10-node-3", members, AgentNone)
		assert.ErrorContains(t, other, `the pod asks for pool "train-a100"`)
	})
	t.Run("tolerate-all with matchFields denied; without a matching affinity allowed", func(t *testing.T) {
		p := mk("ai-team", nil)
		p.Spec.Tolerations, p.Spec.Affinity = tolerateAll, matchFields
		err := CheckExclusivePlacement(p, aiTeam, "", members, AgentNone)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `it tolerates the pool's taint (operator Exists on every key) and its node affinity allows the node`)
		p.Spec.Affinity = nil
		assert.Error(t, CheckExclusivePlacement(p, aiTeam, "", members, AgentNone), "tolerate-all with no affinity can land anywhere")
		p.Spec.NodeSelector = map[string]string{"zone": "b"}
		assert.NoError(t, CheckExclusivePlacement(p, aiTeam, "", members, AgentNone), "its nodeSelector keeps it off the node")
		q := mk("ai-team", nil)
		q.Spec.Affinity = matchFields
		assert.NoError(t, CheckExclusivePlacement(q, aiTeam, "", members, AgentNone), "no toleration: the taint keeps it off")
		q.Spec.Tolerations = []corev1.Toleration{ExclusivePoolToleration("dev-exclusive")}
		assert.ErrorContains(t, CheckExclusivePlacement(q, aiTeam, "", members, AgentNone), "(runwhere.ai/pool Equal dev-exclusive)")
	})
	t.Run("node agents are allowed; an ownerReference alone makes none", func(t *testing.T) {
		p := mk("monitoring", nil)
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ne", Controller: ptr.To(true)}}
		p.Spec.Tolerations, p.Spec.Affinity = tolerateAll, matchFields
		assert.NoError(t, CheckExclusivePlacement(p, nil, "a10-node-3", members, AgentCreated))
		assert.NoError(t, CheckExclusivePlacement(p, nil, "", members, AgentCreated))
		assert.Error(t, CheckExclusivePlacement(p, nil, "a10-node-3", members, AgentNone), "a DaemonSet owner the pod's writer claims")
		assert.NoError(t, CheckExclusivePlacement(p, nil, "a10-node-3", members, AgentClaimed), "bound where its tolerations let it")
		q := p.DeepCopy()
		q.Spec.Tolerations = nil
		assert.Error(t, CheckExclusivePlacement(q, nil, "a10-node-3", members, AgentClaimed), "bound past a taint it does not tolerate")
	})
}

func TestIsNodeAgent(t *testing.T) {
	ds := []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ne", Controller: ptr.To(true)}}
	agent := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: ds}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("1"), "hugepages-2Mi": resource.MustParse("2Mi")}}}}}}
	const dsc = "system:serviceaccount:kube-system:daemon-set-controller"
	trusted := TrustedAgentNamespaces("litepool-system", []string{"gpu-operator"})
	assert.True(t, IsNodeAgent(agent, "kube-system", dsc, DaemonSetControllers, trusted))
	assert.True(t, IsNodeAgent(agent, "gpu-operator", "system:kube-controller-manager", DaemonSetControllers, trusted))
	assert.True(t, IsNodeAgent(agent, "litepool-system", dsc, DaemonSetControllers, trusted), "litepool's own namespace")
	assert.False(t, IsNodeAgent(agent, "ai-team", dsc, DaemonSetControllers, trusted), "a tenant's DaemonSet: the controller creates anyone's pods")
	assert.False(t, IsNodeAgent(agent, "", dsc, DaemonSetControllers, trusted), "no namespace")
	assert.True(t, IsNodeAgent(agent, "kube-system", dsc, DaemonSetControllers, nil), "nil: kube-system alone")
	assert.False(t, IsNodeAgent(agent, "gpu-operator", dsc, DaemonSetControllers, nil), "nil: kube-system alone")
	assert.False(t, IsNodeAgent(agent, "kube-system", "mallory", DaemonSetControllers, trusted), "created by anyone else, a DaemonSet owner is a claim")
	assert.True(t, IsNodeAgent(agent, "kube-system", "kcm-admin", []string{"kcm-admin"}, trusted), "a controller manager configured to run as another identity")
	assert.False(t, IsNodeAgent(&corev1.Pod{}, "kube-system", dsc, DaemonSetControllers, trusted), "not a DaemonSet's pod")
	gpu := agent.DeepCopy()
	gpu.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}}
	assert.False(t, IsNodeAgent(gpu, "kube-system", dsc, DaemonSetControllers, trusted), "asks for GPUs")
	claim := agent.DeepCopy()
	claim.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu"}}
	assert.False(t, IsNodeAgent(claim, "kube-system", dsc, DaemonSetControllers, trusted), "asks for a ResourceClaim")

	assert.True(t, ClaimsNodeAgent(agent, "gpu-operator", trusted))
	assert.False(t, ClaimsNodeAgent(agent, "ai-team", trusted), "a claim counts only in a trusted namespace")
	assert.False(t, ClaimsNodeAgent(gpu, "gpu-operator", trusted), "asks for GPUs")
}

func TestTrustedAgentNamespaces(t *testing.T) {
	assert.Equal(t, []string{"kube-system", "litepool-system", "gpu-operator", "monitoring"},
		TrustedAgentNamespaces("litepool-system", []string{"gpu-operator", "kube-system", "monitoring", "gpu-operator"}))
	assert.Equal(t, []string{"kube-system"}, TrustedAgentNamespaces("", nil))
	for _, ok := range []string{"gpu-operator", "monitoring", "nvidia-gpu-operator"} {
		assert.NoError(t, ValidateAgentNamespace(ok), ok)
	}
	for bad, says := range map[string]string{
		"":             "not a namespace name",
		"GPU_Operator": "not a namespace name",
		"a,b":          "not a namespace name",
		"default":      "every user's pods land in by default",
	} {
		assert.ErrorContains(t, ValidateAgentNamespace(bad), says, bad)
	}
}

func TestDesiredExclusiveTaints(t *testing.T) {
	excl := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "excl"}, Spec: v1alpha1.PoolSpec{Exclusive: true}}
	open := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "excl"}}
	other := corev1.Taint{Key: "gpu", Value: "broken", Effect: corev1.TaintEffectNoSchedule}
	mk := func(pool string, taints ...corev1.Taint) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{}}, Spec: corev1.NodeSpec{Taints: taints}}
		if pool != "" {
			n.Labels[LabelPool] = pool
		}
		return n
	}
	for _, tt := range []struct {
		name string
		node *corev1.Node
		pool *v1alpha1.Pool
		want []corev1.Taint
	}{
		{"a member of an exclusive pool is tainted", mk("excl", other), excl, []corev1.Taint{other, ExclusiveTaint("excl")}},
		{"already tainted: nothing changes", mk("excl", ExclusiveTaint("excl"), other), excl, []corev1.Taint{ExclusiveTaint("excl"), other}},
		{"a pool that is no longer exclusive loses it", mk("excl", ExclusiveTaint("excl"), other), open, []corev1.Taint{other}},
		{"a pool of labels only has no taint", mk("excl", ExclusiveTaint("excl")), nil, nil},
		{"a node that left loses it", mk("", other, ExclusiveTaint("excl")), nil, []corev1.Taint{other}},
		{"a node that moved gets its new pool's", mk("excl", ExclusiveTaint("old")), excl, []corev1.Taint{ExclusiveTaint("excl")}},
		{"any other effect under the key goes", mk("excl", ExclusiveTaint("excl"), corev1.Taint{Key: LabelPool, Value: "excl", Effect: corev1.TaintEffectNoExecute}), excl, []corev1.Taint{ExclusiveTaint("excl")}},
		{"an untainted node outside pools stays so", mk(""), nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, DesiredExclusiveTaints(tt.node, tt.pool))
		})
	}
}

// largeAffinityPod tolerates everything and names, in its required node affinity, many
// nodes none of which is a member: P6 must check it against every exclusive member.
func largeAffinityPod(terms, values int) *corev1.Pod {
	sel := &corev1.NodeSelector{}
	for i := range terms {
		req := corev1.NodeSelectorRequirement{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn}
		for j := range values {
			req.Values = append(req.Values, fmt.Sprintf("elsewhere-%d-%d", i, j))
		}
		sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{req}})
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "ai-team"}, Spec: corev1.PodSpec{
		Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		Affinity:    &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: sel}}}}
}

func exclusiveMembers(n int) []ExclusiveMember {
	pool := PoolInfo{Name: "excl", Object: &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "excl"}, Spec: v1alpha1.PoolSpec{Exclusive: true}}}
	out := make([]ExclusiveMember, n)
	for i := range out {
		name := fmt.Sprintf("excl-node-%d", i)
		out[i] = ExclusiveMember{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}, Pool: pool}
	}
	return out
}

// BenchmarkCheckExclusivePlacementLargeAffinity: a pod with 100 terms of 100 hostnames
// each, tolerating everything, judged against 1,000 exclusive members (issue 28 item 11).
func BenchmarkCheckExclusivePlacementLargeAffinity(b *testing.B) {
	pod, members := largeAffinityPod(100, 100), exclusiveMembers(1000)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ai-team"}}
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckExclusivePlacement(pod, ns, "", members, AgentNone); err != nil {
			b.Fatal(err)
		}
	}
}

func TestMayPassExclusiveTaint(t *testing.T) {
	own := corev1.Toleration{Key: LabelPool, Operator: corev1.TolerationOpEqual, Value: "train-a100", Effect: corev1.TaintEffectNoSchedule}
	other := corev1.Toleration{Key: LabelPool, Value: "dev-sandbox"}
	for _, c := range []struct {
		name     string
		label    string
		tol      []corev1.Toleration
		nodeName string
		want     bool
	}{
		{"its own pool's toleration", "train-a100", []corev1.Toleration{own}, "", false},
		{"no toleration of the key", "train-a100", []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists}}, "", false},
		{"bound to a node", "train-a100", []corev1.Toleration{own}, "n1", true},
		{"another pool's toleration", "train-a100", []corev1.Toleration{own, other}, "", true},
		{"every key", "train-a100", []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, "", true},
		{"the key with Exists", "train-a100", []corev1.Toleration{{Key: LabelPool, Operator: corev1.TolerationOpExists}}, "", true},
		{"a pool's toleration without the label", "", []corev1.Toleration{own}, "", true},
		{"the default label is no pool", "default", []corev1.Toleration{{Key: LabelPool, Value: "default"}}, "", true},
	} {
		pod := &corev1.Pod{Spec: corev1.PodSpec{Tolerations: c.tol, NodeName: c.nodeName}}
		if c.label != "" {
			pod.Labels = map[string]string{LabelPool: c.label}
		}
		assert.Equal(t, c.want, MayPassExclusiveTaint(pod), c.name)
	}
}
