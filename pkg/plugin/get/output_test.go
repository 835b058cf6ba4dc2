package get

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
)

// richPools fills every kind of field a Pool has (maps, lists, pointers, conditions with
// times), so that a round trip that loses one shows.
func richPools() []v1alpha1.Pool {
	pools := samplePools()
	at := metav1.NewTime(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	p := &pools[0]
	p.UID, p.ResourceVersion, p.Generation, p.CreationTimestamp = "0d4c8a52-6f1e-4d4e-9a53-1c1a3f7b9e10", "4711", 2, at
	p.Labels = map[string]string{"team": "llm"}
	p.Spec.Description, p.Spec.Tags = "LLM pre-training", map[string]string{"cost-center": "42"}
	p.Spec.AllowedWorkloads = []v1alpha1.WorkloadType{v1alpha1.WorkloadTraining, v1alpha1.WorkloadDevelopment}
	p.Spec.Accelerator.ResourceName = "nvidia.com/gpu"
	p.Spec.NodePools = []v1alpha1.NodePool{{Name: "a100-np1", Labels: map[string]string{"rack": "r1"},
		Taints: []corev1.Taint{{Key: "dedicated", Value: "train", Effect: corev1.TaintEffectNoSchedule}}}}
	p.Spec.MinNodes, p.Spec.Exclusive = 2, true
	p.Spec.Namespaces = []string{"team-llm"}
	p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
	p.Spec.Software = v1alpha1.SoftwareSpec{Driver: "535.104.05", CUDA: "12.2", Image: "nvcr.io/nvidia/pytorch:24.01-py3"}
	p.Spec.HCCL.OpRetry = v1alpha1.OpRetrySpec{Enabled: true, MaxRetries: 3, RetryTimeoutSeconds: 300}
	p.Status.Conditions = append(p.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "NodesRunning", Message: "3/3", LastTransitionTime: at})
	p.Status.GPUTypes = []string{"A100-80G"}
	return pools
}

// `get pools -o json|yaml` prints a List whose items decode back into the very Pools
// that were printed; one named pool prints the Pool itself, which decodes back too.
func TestJSONAndYAMLOutputRoundTrips(t *testing.T) {
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			pools := richPools()
			out := printPools(t, format, false, pools)
			var list struct {
				APIVersion string          `json:"apiVersion"`
				Kind       string          `json:"kind"`
				Metadata   metav1.ListMeta `json:"metadata"`
				Items      []v1alpha1.Pool `json:"items"`
			}
			require.NoError(t, yaml.UnmarshalStrict([]byte(out), &list), out)
			assert.Equal(t, "v1", list.APIVersion)
			assert.Equal(t, "List", list.Kind)
			semanticEqual(t, richPools(), list.Items)

			one := kit.NewPrintOptions()
			*one.Flags.OutputFormat = format
			var buf jsonOrYAML
			require.NoError(t, kit.Print(one, &buf, pools[:1], true, PoolTable))
			var pool v1alpha1.Pool
			require.NoError(t, yaml.UnmarshalStrict(buf.Bytes(), &pool), buf.String())
			semanticEqual(t, richPools()[0], pool)
			if format == "json" {
				assert.True(t, json.Valid(buf.Bytes()))
			}
		})
	}
}

// Output carries no terminal escapes: nothing litepool prints is colored, so a pipe or a
// file gets plain text (docs/output.md).
func TestOutputHasNoEscapes(t *testing.T) {
	escape := regexp.MustCompile("\x1b\\[")
	for _, format := range []string{"", "wide", "json", "yaml", "name"} {
		assert.NotRegexp(t, escape, printPools(t, format, false, richPools()), format)
	}
}

// semanticEqual compares as the API machinery does: times by instant, not by the
// *time.Location the decoder picked.
func semanticEqual(t *testing.T, want, got any) {
	t.Helper()
	if !apiequality.Semantic.DeepEqual(want, got) {
		assert.Equal(t, want, got)
	}
}

type jsonOrYAML struct{ b []byte }

func (w *jsonOrYAML) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
func (w *jsonOrYAML) Bytes() []byte               { return w.b }
func (w *jsonOrYAML) String() string              { return string(w.b) }

// A Pool prints as it is stored: unset optional sections (accelerator, software, hccl)
// are left out rather than printed as {}. Printed as {}, `kubectl apply` of the output
// would add them, and the CRD's defaults with them, changing the pool's spec.
func TestUnsetSectionsAreNotPrinted(t *testing.T) {
	pool := v1alpha1.Pool{TypeMeta: metav1.TypeMeta{APIVersion: "runwhere.ai/v1alpha1", Kind: "Pool"},
		ObjectMeta: metav1.ObjectMeta{Name: "dev-sandbox"}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeDevelopment}}
	o := kit.NewPrintOptions()
	*o.Flags.OutputFormat = "yaml"
	var buf jsonOrYAML
	require.NoError(t, kit.Print(o, &buf, []v1alpha1.Pool{pool}, true, PoolTable))
	assert.Equal(t, `apiVersion: runwhere.ai/v1alpha1
kind: Pool
metadata:
  name: dev-sandbox
spec:
  type: Development
status:
  acceleratorFree: 0
  acceleratorTotal: 0
  acceleratorUsed: 0
  faultyNodes: 0
  healthyNodes: 0
  nodeCount: 0
`, buf.String())
}
