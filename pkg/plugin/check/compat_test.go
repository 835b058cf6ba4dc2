package check

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/compat"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

var ascend = []string{"compat", "--hardware", "Snt9B", "--driver", "24.1.0.3", "--firmware", "7.5.0.5.220"}

func run(t *testing.T, f *kittest.Factory, args ...string) kittest.Result {
	t.Helper()
	return kittest.Run(f, NewCmdCheck, "", args...)
}

// -o jsonpath reads the checks as kubectl reads a list: {.items[*]...}.
func TestCheckCompatJSONPath(t *testing.T) {
	r := run(t, kittest.NewFactory(t), append(ascend, "-o", "jsonpath={range .items[*]}{.subject}: {.result.verdict}{range .result.links[*]} {.link}={.verdict}{end}{end}")...)
	require.NoError(t, r.Err)
	assert.Equal(t, "versions given: compatible hardware=compatible driver=compatible firmware=compatible cann=not-declared torch_npu=not-declared image=not-declared", r.Out)
	assert.Empty(t, r.ErrOut)
}

// -o json is what it always was: the checks, indented, one newline after.
func TestCheckCompatJSONIsTheChecks(t *testing.T) {
	r := run(t, kittest.NewFactory(t), append(ascend, "-o", "json")...)
	require.NoError(t, r.Err)
	m, err := compat.Source{}.Load(t.Context(), nil)
	require.NoError(t, err)
	want, err := json.MarshalIndent([]kit.CompatCheck{{Subject: "versions given", Result: compat.Check(m,
		compat.Chain{Hardware: "Snt9B", SoftwareSpec: v1alpha1.SoftwareSpec{Driver: "24.1.0.3", Firmware: "7.5.0.5.220"}})}}, "", "  ")
	require.NoError(t, err)
	assert.Equal(t, string(want)+"\n", r.Out)
}

// The verdict of a pool's chain: nodes grouped by model and driver, the rest from the
// Pool's spec.software; an incompatible chain is the command's error, after the table.
func TestCheckCompatPool(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{
		policy.LabelPool: "p", policy.LabelGPUType: "Snt9B", policy.DriverVersionLabels[0]: "23.0.6"}}}
	pool := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.PoolSpec{Software: v1alpha1.SoftwareSpec{CANN: "8.2.RC1"}}}
	f := kittest.NewFactory(t, node, pool)
	r := run(t, f, "compat", "--pool", "p", "-o", "jsonpath={.items[0].nodes[*]} {.items[0].result.verdict}")
	assert.Equal(t, "n1 incompatible", r.Out)
	require.EqualError(t, r.Err, "pool p: [C1] version chain is incompatible: cann 8.2.RC1 incompatible: driver 23.0.6 is published with CANN 7.0.1.5, 8.0.RC2, and no CANN/HDK statement pairs CANN 8.2.RC1 with it")

	// "What if" the pool ran 24.1.0.3: the flag replaces the node's driver.
	r = run(t, f, "compat", "--pool", "p", "--driver", "24.1.0.3", "-o", "jsonpath={.items[0].result.links[1].value}")
	assert.Equal(t, "24.1.0.3", r.Out)
}

func TestCheckCompatWideKeepsItsTable(t *testing.T) {
	r := run(t, kittest.NewFactory(t), append(ascend, "-o", "wide")...)
	require.NoError(t, r.Err)
	assert.Contains(t, r.Out, "versions given: huawei-ascend, matrix embedded\nLINK ")
	assert.Contains(t, r.Out, "REASON")
	assert.Contains(t, r.Out, "SOURCE\n")
	assert.Contains(t, r.Out, "verdict: compatible\n")
}

func TestCheckCompatRefusesBadInput(t *testing.T) {
	f := kittest.NewFactory(t)
	r := run(t, f, append(ascend, "-o", "table")...)
	require.Error(t, r.Err)
	assert.Contains(t, r.Err.Error(), `invalid -o "table": must be one of wide, json, yaml, jsonpath`)
	assert.Empty(t, r.Out)
	r = run(t, f, "compat")
	require.EqualError(t, r.Err, "nothing to check: give --pool POOL, or versions (--hardware, --driver, --firmware, --cann, --torch-npu, --pytorch, --cuda, --image)")
	r = run(t, f, "compat", "p")
	require.EqualError(t, r.Err, `check compat takes no arguments (got "p"): name the pool with --pool`)
}

func TestOverlayChain(t *testing.T) {
	got := overlayChain(compat.Chain{Hardware: "Snt9B", SoftwareSpec: v1alpha1.SoftwareSpec{Driver: "23.0.6", CANN: "8.2.RC1"}},
		compat.Chain{SoftwareSpec: v1alpha1.SoftwareSpec{Driver: "24.1.0.3"}})
	assert.Equal(t, compat.Chain{Hardware: "Snt9B", SoftwareSpec: v1alpha1.SoftwareSpec{Driver: "24.1.0.3", CANN: "8.2.RC1"}}, got)
}
