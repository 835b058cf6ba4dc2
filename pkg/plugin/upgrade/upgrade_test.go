package upgrade

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

const (
	oldDriver = "23.0.6"
	target    = "24.1.0.3"
	// rolloutID is the id of a rollout started at kittest.Now.
	rolloutID = "20261122-120000-" + target
)

func poolNode(name, pool string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		policy.LabelPool: pool, policy.LabelGPUType: "Snt9B", policy.DriverVersionLabels[0]: oldDriver}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

// lease is the controller's leader Lease, renewed 5s before kittest.Now for 15s.
func lease() *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: kit.ControllerLease, Namespace: "litepool-system"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("webhook-0"), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: &metav1.MicroTime{Time: kittest.Now.Add(-5 * time.Second)}}}
}

// marked is a node already in a rollout, in state.
func marked(n *corev1.Node, run policy.UpgradeRun, state policy.UpgradeState, msg string) *corev1.Node {
	n.Annotations = map[string]string{policy.AnnotationUpgradeState: string(state), policy.AnnotationUpgradeTarget: run.Target,
		policy.AnnotationUpgradeRun: run.Encode(), policy.AnnotationUpgradeMessage: msg}
	n.Spec.Unschedulable = policy.UpgradeStarted(state) || state == policy.UpgradeFailed
	return n
}

const preflight = `pre-flight: driver 24.1.0.3: huawei-ascend, matrix embedded
LINK        VERSION    VERDICT        REASON
hardware    Snt9B      compatible     known Ascend model: Snt9B
driver      24.1.0.3   compatible     published for Snt9B: recommended (ModelArts 7.3.0, Lite Server / Lite Cluster / Standard)
firmware    -          not-declared   not declared
cann        -          not-declared   not declared
torch_npu   -          not-declared   not declared
image       -          not-declared   not declared
verdict: compatible
`

const plan = `would upgrade 2 node(s) to 24.1.0.3 with installer inst:1 (max unavailable 1):
  wave 1: p-1
  wave 2: p-2
(dry run: nothing changed)
`

var driver = []string{"driver", "--pool", "p", "--version", target, "--installer-image", "inst:1"}

func upgradeCmd(f *kittest.Factory, stdin string, args ...string) kittest.Result {
	return kittest.Run(f, NewCmdUpgrade, stdin, args...)
}

func state(t *testing.T, f *kittest.Factory, node string) string {
	return f.Node(t, node).Annotations[policy.AnnotationUpgradeState]
}

func TestUpgradeDriverDryRunPlansAndChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name        string
		args        []string
		out, errOut string
	}{
		{"client", []string{"--dry-run=client"}, preflight + plan, ""},
		{"server", []string{"--dry-run=server"}, preflight + plan, ""},
		{"-o name: the nodes on stdout, the plan on stderr", []string{"--dry-run=client", "-o", "name"}, "node/p-1\nnode/p-2\n", preflight + plan},
		{"-o jsonpath: the nodes as they would be marked", []string{"--dry-run=server", "-o", "jsonpath={.metadata.annotations.runwhere\\.ai/upgrade-state} "},
			"upgrade-required upgrade-required ", preflight + plan},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := kittest.NewFactory(t, poolNode("p-1", "p"), poolNode("p-2", "p"), lease())
			r := upgradeCmd(f, "", append(driver, tc.args...)...)
			require.NoError(t, r.Err)
			assert.Equal(t, tc.out, r.Out)
			assert.Equal(t, tc.errOut, r.ErrOut)
			assert.Empty(t, state(t, f, "p-1"))
			assert.Empty(t, state(t, f, "p-2"))
			assert.Empty(t, f.Events(t))
		})
	}
}

// With the controller's Lease fresh (by the factory's clock), the rollout is recorded on
// the nodes and handed over; the rollout id comes from the same clock.
func TestUpgradeDriverHandsOverToARunningController(t *testing.T) {
	f := kittest.NewFactory(t, poolNode("p-1", "p"), poolNode("p-2", "p"), lease())
	r := upgradeCmd(f, "", append(driver, "--yes")...)
	require.NoError(t, r.Err)
	assert.Equal(t, preflight+"rollout "+rolloutID+": 2 node(s) marked for driver 24.1.0.3\n"+
		"rollout "+rolloutID+": handed to the controller in litepool-webhook; follow it with `kubectl litepool upgrade status --pool p`\n", r.Out)
	assert.Empty(t, r.ErrOut)
	for _, name := range []string{"p-1", "p-2"} {
		n := f.Node(t, name)
		assert.Equal(t, string(policy.UpgradeRequired), n.Annotations[policy.AnnotationUpgradeState])
		assert.Equal(t, target, n.Annotations[policy.AnnotationUpgradeTarget])
		run, err := policy.DecodeUpgradeRun(n.Annotations[policy.AnnotationUpgradeRun])
		require.NoError(t, err)
		assert.Equal(t, rolloutID, run.ID)
		assert.True(t, run.InCluster)
		assert.Equal(t, "inst:1", run.InstallerImage)
		assert.False(t, n.Spec.Unschedulable, "the controller cordons, not the plugin")
	}
}

// -o json prints the marked nodes as written; what is said goes to stderr.
func TestUpgradeDriverOutputJSONPrintsTheMarkedNodes(t *testing.T) {
	f := kittest.NewFactory(t, poolNode("p-1", "p"), lease())
	r := upgradeCmd(f, "", append(driver, "--yes", "-o", "jsonpath={.metadata.name}={.metadata.annotations.runwhere\\.ai/upgrade-state}")...)
	require.NoError(t, r.Err)
	assert.Equal(t, "p-1=upgrade-required", r.Out)
	assert.Contains(t, r.ErrOut, "rollout "+rolloutID+": 1 node(s) marked for driver 24.1.0.3\n")
}

// A Lease not renewed within its duration, by the fake clock, is no controller: the
// plugin would drive the rollout itself, so --wait has nothing to follow.
func TestUpgradeDriverExpiredLeaseMeansNoController(t *testing.T) {
	f := kittest.NewFactory(t, poolNode("p-1", "p"), poolNode("p-2", "p"), lease())
	f.Clocks.Step(11 * time.Second)
	r := upgradeCmd(f, "", append(driver, "--yes", "--wait")...)
	require.EqualError(t, r.Err, "--wait follows a rollout handed to the cluster, and this one is not (no litepool controller holds Lease litepool-system/litepool-controller): the plugin drives the rollout and waits anyway")
	assert.Empty(t, r.Out)
	assert.Empty(t, state(t, f, "p-1"))
}

func TestUpgradeDriverRefusals(t *testing.T) {
	inOther := marked(poolNode("p-2", "p"), policy.UpgradeRun{ID: "other", Pool: "p", Target: "25.0.0"}, policy.UpgradeDrain, "draining")
	for _, tc := range []struct {
		name  string
		nodes []*corev1.Node
		stdin string
		args  []string
		err   string
	}{
		{"not confirmed", []*corev1.Node{poolNode("p-1", "p")}, "no\n", nil,
			`driver upgrade to 24.1.0.3: not confirmed (typed "no", expected "yes"); nothing was changed`},
		{"a node in another rollout", []*corev1.Node{poolNode("p-1", "p"), inOther}, "", []string{"--yes"},
			"[U4] node \"p-2\" is already in a driver upgrade (state drain, target 25.0.0): finish it with `kubectl litepool upgrade resume` or stop it with `kubectl litepool upgrade abort` first"},
		{"a pool without nodes", nil, "", []string{"--yes"}, `pool "p" has no nodes (no node carries runwhere.ai/pool=p)`},
		{"an unknown output", []*corev1.Node{poolNode("p-1", "p")}, "", []string{"--yes", "-o", "table"},
			`unable to match a printer suitable for the output format "table", allowed formats are: go-template,go-template-file,json,jsonpath,jsonpath-as-json,jsonpath-file,kyaml,name,template,templatefile,yaml`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{lease()}
			for _, n := range tc.nodes {
				objs = append(objs, n)
			}
			f := kittest.NewFactory(t, objs...)
			r := upgradeCmd(f, tc.stdin, append(driver, tc.args...)...)
			require.EqualError(t, r.Err, tc.err)
			for _, n := range tc.nodes {
				assert.Equal(t, n.Annotations, f.Node(t, n.Name).Annotations, "nothing changed on %s", n.Name)
			}
		})
	}
}

func TestUpgradeDriverValidate(t *testing.T) {
	base := func() *UpgradeDriverOptions {
		return &UpgradeDriverOptions{Pool: "p", Version: "24.1.0.3", MaxUnavailable: "25%", WaitTimeout: time.Minute}
	}
	assert.NoError(t, base().Validate())
	cases := map[string]func(o *UpgradeDriverOptions){
		"give exactly one of --pool POOL or --node NODE":                                                              func(o *UpgradeDriverOptions) { o.Node = "n" },
		"[U2] --version is required: the driver version to install (as the node's driver-version label will read it)": func(o *UpgradeDriverOptions) { o.Version = "" },
		`[U2] invalid --max-unavailable "0%": a percentage must be 1%-100%`:                                           func(o *UpgradeDriverOptions) { o.MaxUnavailable = "0%" },
		"--canary applies to a pool rollout (--pool)":                                                                 func(o *UpgradeDriverOptions) { o.Pool, o.Node, o.Canary = "", "n", "m" },
		`invalid --wait-selector "x=y,": found '', expected: identifier after ','`:                                    func(o *UpgradeDriverOptions) { o.WaitSelector = "x=y," },
		"--validate-timeout -1s: must not be negative":                                                                func(o *UpgradeDriverOptions) { o.ValidateTimeout = -time.Second },
	}
	for msg, mutate := range cases {
		o := base()
		mutate(o)
		assert.EqualError(t, o.Validate(), msg)
	}
}

func TestUpgradeDriverRisk(t *testing.T) {
	o := &UpgradeDriverOptions{Pool: "upg", Version: "24.1.0.3", MaxUnavailable: "2", InstallerImage: "inst:1", WaitTimeout: 10 * time.Minute}
	assert.Equal(t, kit.Risk{Level: "high", Operation: "driver upgrade to 24.1.0.3",
		Impact:     []string{"6 node(s) of pool upg will be cordoned, drained and have the driver reinstalled by inst:1, at most 2 unavailable at a time; workload pods still running after 10m0s are evicted"},
		Precaution: []string{"make sure running jobs checkpoint or can restart, and that the installer image fits the nodes' OS"},
	}, o.risk(6))
}
