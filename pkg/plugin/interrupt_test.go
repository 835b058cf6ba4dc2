package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/cmd/kit"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// failingWrites makes the fake API server refuse the n-th write to a node (update or
// patch), as a webhook timeout or a lost connection would.
func failingWrites(kube *fake.Clientset, n int) {
	count := 0
	fail := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetResource().Resource != "nodes" {
			return false, nil, nil
		}
		count++
		if count == n {
			return true, nil, apierrors.NewInternalError(errors.New("connection lost"))
		}
		return false, nil, nil
	}
	kube.PrependReactor("update", "nodes", fail)
	kube.PrependReactor("patch", "nodes", fail)
}

// Whatever write fails while a drained node leaves the pool, "run the command again"
// can still reach it: it is either still a marked member of the pool, or out of the
// pool and uncordoned. (leave used to remove the label first and uncordon after: a
// failed uncordon left it cordoned in the default pool for good.)
func TestLeaveNeverStrandsACordonedNodeOutsideThePool(t *testing.T) {
	pool := &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	for failAt := 1; failAt <= 3; failAt++ {
		t.Run(fmt.Sprint("write ", failAt, " fails"), func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1",
				Labels:      map[string]string{policy.LabelPool: "p"},
				Annotations: map[string]string{policy.AnnotationScaleDown: "p", policy.CordonScaleDown.Annotation(): "false"}},
				Spec: corev1.NodeSpec{Unschedulable: true}}
			kube := fake.NewSimpleClientset(n)
			failingWrites(kube, failAt)
			o := &ScaleOptions{clients: &kit.Clients{Kube: kube}, IOStreams: genericiooptions.NewTestIOStreamsDiscard()}
			err := o.leave(context.Background(), pool, "n1")
			got, gerr := kube.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
			require.NoError(t, gerr)
			inPool := got.Labels[policy.LabelPool] == "p" && got.Annotations[policy.AnnotationScaleDown] == "p"
			released := got.Labels[policy.LabelPool] == "" && !got.Spec.Unschedulable && got.Annotations[policy.AnnotationScaleDown] == ""
			assert.True(t, inPool || released, "stranded: labels %v, annotations %v, unschedulable %v (err %v)", got.Labels, got.Annotations, got.Spec.Unschedulable, err)
			if err == nil {
				assert.True(t, released)
			}
		})
	}
}

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

func TestScaleUpLeftoversNameTheJoinedNodesAndTheCommands(t *testing.T) {
	p := &scaleUpProgress{pool: "p"}
	assert.Equal(t, "scale-up of pool p: no node had joined yet", p.describe())
	p.joined("n1")
	p.joined("n2")
	assert.Contains(t, p.describe(), "scale-up of pool p stopped half-way: node(s) n1, n2 joined.\nFinish it (with --add, leave out the nodes that joined):\n  kubectl litepool ")
	assert.True(t, strings.HasSuffix(p.describe(), "\nOr put them back in the default pool:\n  kubectl litepool scale p --remove n1,n2 --yes"), p.describe())
}
