package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/runwhere-ai/litepool/pkg/cmd/kit"
)

// A schedule the API server refuses leaves nothing behind: the ServiceAccount and RBAC
// created before the CronJob are removed again.
func TestStressScheduleRollsBackWhatItCreated(t *testing.T) {
	kube := fake.NewSimpleClientset()
	kube.PrependReactor("create", "cronjobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "CronJob"}, "litepool-stress-p", nil)
	})
	o := &StressScheduleOptions{Pool: "pool-a", Cron: "0 2 * * 0", Image: "img", Tests: []string{"npu"}, Timeout: time.Minute,
		namespace: "ops", clients: &kit.Clients{Kube: kube}, IOStreams: genericiooptions.NewTestIOStreamsDiscard()}
	require.NoError(t, o.Validate())
	err := o.Run(context.Background())
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "cronjob/litepool-stress-pool-a: "), err.Error())
	assert.Contains(t, err.Error(), "the 3 object(s) created before it were removed")
	sas, _ := kube.CoreV1().ServiceAccounts("ops").List(context.Background(), metav1.ListOptions{})
	assert.Empty(t, sas.Items)
	roles, _ := kube.RbacV1().ClusterRoles().List(context.Background(), metav1.ListOptions{})
	assert.Empty(t, roles.Items)
	bindings, _ := kube.RbacV1().ClusterRoleBindings().List(context.Background(), metav1.ListOptions{})
	assert.Empty(t, bindings.Items)
}

func TestStressScheduleTimeZoneGoesToSpecTimeZone(t *testing.T) {
	o := &StressScheduleOptions{Pool: "pool-a", Cron: "CRON_TZ=Asia/Shanghai 0 2 * * 0", Image: "img", Tests: []string{"npu"}, Timeout: time.Minute, namespace: "ops"}
	require.NoError(t, o.Validate())
	_, _, _, cj := o.objects()
	assert.Equal(t, "0 2 * * 0", cj.Spec.Schedule)
	require.NotNil(t, cj.Spec.TimeZone)
	assert.Equal(t, "Asia/Shanghai", *cj.Spec.TimeZone)
}
