package get

import (
	"context"
	"testing"

	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
)

func gpuctlRQ(ns, quota string, hard, used corev1.ResourceList) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: quota + "-" + ns, Namespace: ns, Labels: map[string]string{"runwhere.ai/quota": quota, "runwhere.ai/namespace": ns}},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
		Status:     corev1.ResourceQuotaStatus{Hard: hard, Used: used},
	}
}

func TestGetQuota(t *testing.T) {
	kube := fake.NewClientset(
		gpuctlRQ("team-b", "team-quota", rl("requests.cpu", "8", "requests.memory", "32Gi"), nil),
		gpuctlRQ("team-a", "team-quota", rl("requests.cpu", "16", "requests.memory", "64Gi", "requests.nvidia.com/gpu", "4"),
			rl("requests.cpu", "2500m", "requests.memory", "8Gi", "requests.nvidia.com/gpu", "3")),
		gpuctlRQ("npu", "npu-quota", rl("requests.huawei.com/Ascend910", "16"), rl("requests.huawei.com/Ascend910", "8")),
		&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "not-gpuctl", Namespace: "team-a"}},
	)
	run := func(format string, names ...string) string {
		streams, _, out, _ := genericiooptions.NewTestIOStreams()
		o := &GetQuotaOptions{Print: kit.NewPrintOptions(), Names: names, clients: &kit.Clients{Kube: kube}, IOStreams: streams}
		*o.Print.Flags.OutputFormat = format
		require.NoError(t, o.Run(context.Background()))
		return out.String()
	}
	assert.Equal(t, `NAMESPACE   QUOTA        CPU        MEMORY     GPU
npu         npu-quota    -          -          8/16
team-a      team-quota   2500m/16   8Gi/64Gi   3/4
team-b      team-quota   0/8        0/32Gi     -
`, run(""))
	assert.Equal(t, `NAMESPACE   QUOTA        CPU        MEMORY     GPU   NAME                GPU RESOURCE
team-a      team-quota   2500m/16   8Gi/64Gi   3/4   team-quota-team-a   nvidia.com/gpu
team-b      team-quota   0/8        0/32Gi     -     team-quota-team-b   <none>
`, run("wide", "team-quota"))
	assert.Contains(t, run("yaml", "npu-quota"), "requests.huawei.com/Ascend910: \"16\"")
}

// gpuctl's own client writes the bare keys cpu, memory and nvidia.com/gpu; users add
// limits.*. Each is shown as the API server reports it, and the key Kubernetes does
// not enforce is named on stderr with the one it would.
func TestGetQuotaGpuctlKeys(t *testing.T) {
	f := kittest.NewFactory(t,
		gpuctlRQ("team-a", "gpu-quota", rl("cpu", "64", "memory", "256Gi", "nvidia.com/gpu", "16"),
			rl("cpu", "9", "memory", "34Gi", "nvidia.com/gpu", "0")),
		gpuctlRQ("team-b", "gpu-quota", rl("requests.cpu", "8", "limits.cpu", "16", "limits.memory", "64Gi", "limits.nvidia.com/gpu", "2"),
			rl("requests.cpu", "1", "limits.cpu", "2", "limits.memory", "4Gi")),
	)
	r := kittest.Run(f, NewCmdGetQuota, "", "-o", "wide")
	require.NoError(t, r.Err)
	assert.Equal(t, `NAMESPACE   QUOTA       CPU                MEMORY            GPU          NAME               GPU RESOURCE
team-a      gpu-quota   9/64               34Gi/256Gi        0/16         gpu-quota-team-a   nvidia.com/gpu
team-b      gpu-quota   1/8, limits 2/16   limits 4Gi/64Gi   limits 0/2   gpu-quota-team-b   nvidia.com/gpu
`, r.Out)
	assert.Equal(t, `Warning: resourcequota team-a/gpu-quota-team-a: nvidia.com/gpu is not enforced by Kubernetes, which limits an extended resource only by its requests, so pods may use more than 16; set requests.nvidia.com/gpu instead
Warning: resourcequota team-b/gpu-quota-team-b: limits.nvidia.com/gpu is not enforced by Kubernetes, which limits an extended resource only by its requests, so pods may use more than 2; set requests.nvidia.com/gpu instead
`, r.ErrOut)
}

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}
