package kueue

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/pkg/poolclient"
	"github.com/runwhere-ai/litepool/pkg/queue"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

const controllerSA = "system:serviceaccount:litepool-system:litepool-controller"

// The Kueue adapter, run as litepool-controller with nothing but
// deploy/webhook/components/kueue's rights, writes, updates and removes a pool's queue;
// the component grants no more than that (no Workloads, no Cohorts). A share's
// ClusterQueue is written and, when the share is taken out, found by listing and deleted.
func TestTheKueueComponentIsEnoughAndNoMore(t *testing.T) {
	ctx := context.Background()
	const pool, ns = "qrbac", "q-rbac"
	apply := framework.C.Kubectl(t, "", "apply", "-f", filepath.Join(framework.Root, "deploy", "webhook", "components", "kueue", "rbac.yaml"))
	require.Equal(t, 0, apply.ExitCode, apply.Stderr)
	t.Cleanup(func() {
		framework.C.Kubectl(t, "", "delete", "--ignore-not-found", "-f", filepath.Join(framework.Root, "deploy", "webhook", "components", "kueue", "rbac.yaml"))
	})
	framework.WaitAuthorized(t, controllerSA, nil, "create", "kueue.x-k8s.io", "clusterqueues")
	createNamespace(t, ns, nil)
	p, err := poolclient.New(framework.C.Dynamic).Create(ctx, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1, Namespaces: []string{ns}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The in-cluster controller leaves this pool alone (no spec.queue): the adapter
	// below is the only writer. It is given the spec it would have.
	p.Spec.Queue = &v1alpha1.QueueSpec{Scheduler: v1alpha1.QueueKueue, Shares: []v1alpha1.QueueShare{{Namespace: ns, Accelerators: 4}}}

	cfg := rest.CopyConfig(framework.C.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: controllerSA}
	c, err := client.New(cfg, client.Options{})
	require.NoError(t, err)
	k := queue.Kueue{Client: c}
	capacity := policy.Capacity{Resource: gpu, Accelerators: 16, Nodes: []string{"a", "b"}}
	_, err = k.Sync(ctx, p, capacity, []string{ns}, false)
	require.NoError(t, err, "the component's rights must be enough to write the queue")
	assert.Equal(t, "12", nominalQuota(t, pool), "the pool keeps 16 less the share")
	assert.Equal(t, "4", nominalQuota(t, queue.ShareQueueName(pool, ns)))
	p.Spec.Queue.Shares = nil
	capacity.Accelerators = 8
	_, err = k.Sync(ctx, p, capacity, nil, false)
	require.NoError(t, err, "update, and delete a LocalQueue of a namespace no longer admitted")
	assert.Equal(t, "8", nominalQuota(t, pool))
	_, err = dyn(localQueues, ns).Get(ctx, pool, metav1.GetOptions{})
	assert.Error(t, err)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := dyn(clusterQueues, "").Get(ctx, queue.ShareQueueName(pool, ns), metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}), "the share's ClusterQueue should be removed with the share")
	require.NoError(t, k.Remove(ctx, p))
	// Kueue's finalizer holds the ClusterQueue until Kueue sees it unused.
	require.NoError(t, wait.PollUntilContextTimeout(ctx, waitInterval, waitTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := dyn(clusterQueues, "").Get(ctx, pool, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}), "the ClusterQueue should be removed")

	for _, args := range [][]string{
		{"create", "workloads.kueue.x-k8s.io", "-n", ns},
		{"watch", "clusterqueues.kueue.x-k8s.io"},
		{"create", "cohorts.kueue.x-k8s.io"},
		{"patch", "workloads.kueue.x-k8s.io/status", "-n", ns},
	} {
		r := framework.C.Kubectl(t, "", append(append([]string{"auth", "can-i"}, args...), "--as="+controllerSA)...)
		assert.Equal(t, "no\n", r.Stdout, "the controller may not %v", args)
	}
}
