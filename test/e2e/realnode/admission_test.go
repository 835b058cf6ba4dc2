package realnode

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/pkg/policy"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

func denied(hook, msg string) string {
	return fmt.Sprintf("admission webhook %q denied the request: %s", hook, msg)
}

func poolPod(prefix, pool string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix, Labels: map[string]string{policy.LabelPool: pool, policy.LabelWorkloadType: "training"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: pauseImage}}},
	}
}

// admitted creates a pool pod as a server dry run (through every admission webhook,
// stored nowhere) and says whether the webhook pinned it to its pool.
func admitted(pool string) error {
	got, err := framework.C.Kube.CoreV1().Pods(workloads).Create(ctx, poolPod("probe-", pool), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return err
	}
	if got.Spec.NodeSelector[policy.LabelPool] != pool {
		return fmt.Errorf("pod admitted without its pool's nodeSelector: %v", got.Spec.NodeSelector)
	}
	return nil
}

func testAdmission(t *testing.T) {
	kube := framework.C.Kube
	// The API server calls the webhook through its Service (endpoint IPs of the real
	// pods: --enable-aggregator-routing, no kube-proxy here).
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return admitted("train-a100") == nil, nil
	}), "the webhook never pinned a pool pod: %v", admitted("train-a100"))

	t.Run("P1 a pool pod gets its nodeSelector", func(t *testing.T) {
		got, err := kube.CoreV1().Pods(workloads).Create(ctx, poolPod("p1-", "train-snt9b"), metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Equal(t, map[string]string{policy.LabelPool: "train-snt9b"}, got.Spec.NodeSelector)
	})

	t.Run("P2 an unknown pool is refused", func(t *testing.T) {
		_, err := kube.CoreV1().Pods(workloads).Create(ctx, poolPod("p2-", "train-h100"), metav1.CreateOptions{})
		require.Error(t, err)
		assert.Equal(t, denied("pods.runwhere.ai", `[P2] pool "train-h100" (label runwhere.ai/pool) does not exist: ask for a pool that exists (kubectl litepool get pools) or remove the label`), err.Error())
		assert.Equal(t, []string{"P2"}, policy.RulesOfStatus(err))
	})

	t.Run("N3 a departure is reserved, an unsafe one refused", func(t *testing.T) {
		leave := []byte(`{"metadata":{"labels":{"runwhere.ai/pool":null}}}`)
		// train-a100 has four members and minNodes 2; a100-node-3 is idle.
		_, err := kube.CoreV1().Nodes().Patch(ctx, "a100-node-3", types.MergePatchType, leave, metav1.PatchOptions{})
		require.NoError(t, err)
		cm, err := kube.CoreV1().ConfigMaps(system).Get(ctx, "litepool-departures-train-a100", metav1.GetOptions{})
		require.NoError(t, err, "the departure is reserved in the webhook's namespace")
		assert.Equal(t, "train-a100", cm.Labels["runwhere.ai/departures-of"])
		assert.Contains(t, fmt.Sprint(cm.Data), "a100-node-3", "the reservation names the node that left")

		err = kube.CoreV1().Nodes().Delete(ctx, "a100-node-2", metav1.DeleteOptions{})
		require.Error(t, err)
		assert.Equal(t, denied("node-departures.runwhere.ai", `[N3] node "a100-node-2" cannot leave pool "train-a100": it runs 1 workload pod(s) (ai-team/llama-train-1); drain it first (kubectl litepool drain a100-node-2) or wait for them to finish`), err.Error())
		assert.Equal(t, []string{"N3"}, policy.RulesOfStatus(err))
	})
}

// A webhook pod is deleted while pool pods keep coming: every one is admitted and
// pinned (pool pods fail closed, so a lost request would be a refused pod).
func testWebhookPodDeleted(t *testing.T) {
	kube := framework.C.Kube
	pods := webhookPods(t)
	require.NotEmpty(t, pods)
	victim := pods[0].Name

	var attempts, failures atomic.Int64
	var mu sync.Mutex
	var errs []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				attempts.Add(1)
				if err := admitted("train-a100"); err != nil {
					failures.Add(1)
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	time.Sleep(2 * time.Second)
	before := attempts.Load()
	require.NoError(t, kube.CoreV1().Pods(system).Delete(ctx, victim, metav1.DeleteOptions{}))
	// Until the pod is gone and its replacement serves: every Deployment Available again.
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		_, err := kube.CoreV1().Pods(system).Get(ctx, victim, metav1.GetOptions{})
		return err != nil, nil
	}), "pod %s never went away", victim)
	waitAvailable(t, 3*time.Minute)
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()

	assert.Greater(t, attempts.Load()-before, int64(20), "admission was exercised while the pod went")
	assert.Zero(t, failures.Load(), "pool pods refused while a webhook pod was deleted (%d of %d): %v", failures.Load(), attempts.Load(), errs)
}
