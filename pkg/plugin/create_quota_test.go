package plugin

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/runwhere-ai/litepool/pkg/cmd/kit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
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
	kube := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	o := &CreateOptions{Filenames: []string{file}, GPUResource: "nvidia.com/gpu", clients: &kit.Clients{Kube: kube}, IOStreams: streams}
	ctx := context.Background()
	require.NoError(t, o.Run(ctx))
	assert.Equal(t, "resourcequota/team-quota-default created (namespace default)\nnamespace/team-a created\nresourcequota/team-quota-team-a created (namespace team-a)\n", out.String())

	ns, err := kube.CoreV1().Namespaces().Get(ctx, "team-a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "true", ns.Labels["runwhere.ai/namespace"], "gpuctl lists its namespaces by this label")
	rq, err := kube.CoreV1().ResourceQuotas("team-a").Get(ctx, "team-quota-team-a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"runwhere.ai/quota": "team-quota", "runwhere.ai/namespace": "team-a"}, rq.Labels)
	gpu := rq.Spec.Hard["requests.nvidia.com/gpu"]
	assert.Equal(t, "4", gpu.String())

	// A second quota for the same namespaces is refused, and nothing changes.
	out.Reset()
	err = o.Run(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `namespace "team-a" already has gpuctl quota "team-quota" (resourcequota/team-quota-team-a): a namespace has one; delete it first (kubectl delete resourcequota -n team-a team-quota-team-a)`)
	assert.Empty(t, out.String())
}
