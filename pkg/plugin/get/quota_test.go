package get

import (
	"context"
	"testing"

	"github.com/runwhere-ai/litepool/pkg/plugin/kit"
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

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}
