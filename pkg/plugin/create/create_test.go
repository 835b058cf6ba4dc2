package create

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runwhere-ai/litepool/pkg/plugin/internal/fixtures"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

const gpuctlQuotaFile = `kind: quota
version: v0.1
quota:
  name: team-quota
  description: per-team limits
namespace:
  team-a: {cpu: 16, memory: 64Gi, gpu: 4}
default: {gpu: 1}
`

func TestCreateGpuctlQuotaFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "quota.yaml")
	require.NoError(t, os.WriteFile(file, []byte(gpuctlQuotaFile), 0o600))
	f := kittest.NewFactory(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	kube := f.Kube
	r := kittest.Run(f, NewCmdCreate, "", "-f", file)
	require.NoError(t, r.Err)
	ctx := context.Background()
	assert.Equal(t, "resourcequota/team-quota-default created (namespace default)\nnamespace/team-a created\nresourcequota/team-quota-team-a created (namespace team-a)\n", r.Out)

	ns, err := kube.CoreV1().Namespaces().Get(ctx, "team-a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "true", ns.Labels["runwhere.ai/namespace"], "gpuctl lists its namespaces by this label")
	rq, err := kube.CoreV1().ResourceQuotas("team-a").Get(ctx, "team-quota-team-a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"runwhere.ai/quota": "team-quota", "runwhere.ai/namespace": "team-a"}, rq.Labels)
	gpu := rq.Spec.Hard["requests.nvidia.com/gpu"]
	assert.Equal(t, "4", gpu.String())

	// A second quota for the same namespaces is refused, and nothing changes.
	r = kittest.Run(f, NewCmdCreate, "", "-f", file)
	require.Error(t, r.Err)
	assert.Contains(t, r.Err.Error(), `namespace "team-a" already has gpuctl quota "team-quota" (resourcequota/team-quota-team-a): a namespace has one; delete it first (kubectl delete resourcequota -n team-a team-quota-team-a)`)
	assert.Empty(t, r.Out)
}

const gpuctlPoolFile = `kind: pool
version: v0.1
pool:
  name: train-a100
  description: LLM training
nodes:
  f1: {gpu-type: A100-80G}
  f2: {gpu-type: A100-80G}
`

// cluster: f1 and f2 (A100-80G) in the default pool, f1 without a gpu-type label.
func cluster(t *testing.T) (*kittest.Factory, string) {
	f1 := fixtures.Node("f1", "", "", "", 8, true)
	f1.Labels["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-80GB"
	f := kittest.NewFactory(t, f1, fixtures.Node("f2", "", "", "A100-80G", 8, true),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	file := filepath.Join(t.TempDir(), "pool.yaml")
	require.NoError(t, os.WriteFile(file, []byte(gpuctlPoolFile), 0o600))
	return f, file
}

// labels is, per node, its litepool labels.
func labels(t *testing.T, f *kittest.Factory, names ...string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, name := range names {
		out[name] = map[string]string{}
		for k, v := range f.Node(t, name).Labels {
			if strings.HasPrefix(k, policy.Prefix) {
				out[name][k] = v
			}
		}
	}
	return out
}

func TestCreateGpuctlPoolFile(t *testing.T) {
	before := map[string]map[string]string{"f1": {}, "f2": {"runwhere.ai/gpu-type": "A100-80G"}}
	joined := map[string]map[string]string{
		"f1": {"runwhere.ai/pool": "train-a100", "runwhere.ai/gpu-type": "A100-80G", "runwhere.ai/gpuType": "A100-80G"},
		"f2": {"runwhere.ai/pool": "train-a100", "runwhere.ai/gpu-type": "A100-80G", "runwhere.ai/gpuType": "A100-80G"}}
	for _, tc := range []struct {
		name    string
		args    []string
		out     string
		created bool
		after   map[string]map[string]string
		events  []string
	}{
		{"creates and joins", nil, "pool.runwhere.ai/train-a100 created\nnode/f1 labeled\nnode/f2 labeled\n", true, joined,
			[]string{"AddedToPool: node f1 added to pool train-a100 (kubectl litepool create)", "AddedToPool: node f2 added to pool train-a100 (kubectl litepool create)"}},
		{"-o name", []string{"-o", "name"}, "pool.runwhere.ai/train-a100\nnode/f1\nnode/f2\n", true, joined,
			[]string{"AddedToPool: node f1 added to pool train-a100 (kubectl litepool create)", "AddedToPool: node f2 added to pool train-a100 (kubectl litepool create)"}},
		{"client dry run", []string{"--dry-run=client"}, "pool.runwhere.ai/train-a100 created (dry run)\nnode/f1 labeled (dry run)\nnode/f2 labeled (dry run)\n", false, before, nil},
		{"server dry run", []string{"--dry-run=server"}, "pool.runwhere.ai/train-a100 created (server dry run)\nnode/f1 labeled (server dry run)\nnode/f2 labeled (server dry run)\n", false, before, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, file := cluster(t)
			r := kittest.Run(f, NewCmdCreate, "", append([]string{"-f", file}, tc.args...)...)
			require.NoError(t, r.Err)
			assert.Equal(t, tc.out, r.Out)
			assert.Empty(t, r.ErrOut)
			assert.Equal(t, tc.created, f.Pool(t, "train-a100") != nil)
			assert.Equal(t, tc.after, labels(t, f, "f1", "f2"))
			assert.Equal(t, tc.events, f.Events(t))
		})
	}
}

// A write that fails half-way undoes what was done, newest first: the nodes that
// joined leave with the labels create gave them, and the Pool object goes.
func TestCreateRollsBack(t *testing.T) {
	fail := func(f *kittest.Factory, verb, resource string, n int) {
		count := 0
		react := func(k8stesting.Action) (bool, runtime.Object, error) {
			if count++; count == n {
				return true, nil, apierrors.NewInternalError(errors.New("connection lost"))
			}
			return false, nil, nil
		}
		if resource == "pools" {
			f.Dynamic.PrependReactor(verb, resource, react)
			return
		}
		f.Kube.PrependReactor(verb, resource, react)
	}
	for _, tc := range []struct {
		name           string
		verb, resource string
		n              int
		out, err       string
	}{
		{"the Pool create fails", "create", "pools", 1, "", "Internal error occurred: connection lost; what was done has been undone"},
		{"the first join fails", "update", "nodes", 1, "pool.runwhere.ai/train-a100 created\n", "Internal error occurred: connection lost; what was done has been undone"},
		{"the second join fails", "update", "nodes", 2, "pool.runwhere.ai/train-a100 created\nnode/f1 labeled\n", "Internal error occurred: connection lost; what was done has been undone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, file := cluster(t)
			fail(f, tc.verb, tc.resource, tc.n)
			r := kittest.Run(f, NewCmdCreate, "", "-f", file)
			assert.EqualError(t, r.Err, tc.err)
			assert.Equal(t, tc.out, r.Out)
			assert.Empty(t, r.ErrOut)
			assert.Nil(t, f.Pool(t, "train-a100"), "the Pool object is gone")
			assert.Equal(t, map[string]map[string]string{"f1": {}, "f2": {"runwhere.ai/gpu-type": "A100-80G"}}, labels(t, f, "f1", "f2"))
		})
	}
}

// A quota whose create fails takes back the namespace it created.
func TestCreateQuotaRollsBack(t *testing.T) {
	file := filepath.Join(t.TempDir(), "quota.yaml")
	require.NoError(t, os.WriteFile(file, []byte(gpuctlQuotaFile), 0o600))
	f := kittest.NewFactory(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	count := 0
	f.Kube.PrependReactor("create", "resourcequotas", func(k8stesting.Action) (bool, runtime.Object, error) {
		if count++; count == 2 {
			return true, nil, apierrors.NewForbidden(corev1.Resource("resourcequotas"), "team-quota-team-a", errors.New("quota admission"))
		}
		return false, nil, nil
	})
	r := kittest.Run(f, NewCmdCreate, "", "-f", file)
	assert.EqualError(t, r.Err, `resourcequotas "team-quota-team-a" is forbidden: quota admission; what was done has been undone`)
	assert.Equal(t, "resourcequota/team-quota-default created (namespace default)\nnamespace/team-a created\n", r.Out)
	_, err := f.Kube.CoreV1().Namespaces().Get(t.Context(), "team-a", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the namespace create made is removed again: %v", err)
	list, err := f.Kube.CoreV1().ResourceQuotas("").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, list.Items)
}

func TestCreateRefusesAndChangesNothing(t *testing.T) {
	f, file := cluster(t)
	require.NoError(t, os.WriteFile(file, []byte(strings.ReplaceAll(gpuctlPoolFile, "{gpu-type: A100-80G}", "{gpu-type: H100}")), 0o600))
	r := kittest.Run(f, NewCmdCreate, "", "-f", file)
	assert.EqualError(t, r.Err, "nothing was created:\n"+
		file+`: [N2] node "f1": the pool file declares gpu-type "H100" but its device plugin reports nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB: declare the model the node has, or leave the node out`+"\n"+
		file+`: [N2] node "f2" is labelled runwhere.ai/gpu-type=A100-80G but the pool file declares gpu-type "H100" for it`)
	assert.Empty(t, r.Out)
	assert.Nil(t, f.Pool(t, "train-a100"))
	assert.Equal(t, map[string]map[string]string{"f1": {}, "f2": {"runwhere.ai/gpu-type": "A100-80G"}}, labels(t, f, "f1", "f2"))
}
