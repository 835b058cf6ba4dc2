package delete

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/internal/fixtures"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
	"github.com/runwhere-ai/litepool/pkg/policy"
	corev1 "k8s.io/api/core/v1"
)

// cluster: pool p (exclusive) with nodes n1 and n2, a job on n2 when busy, and the
// label-only pool l with node l1.
func cluster(t *testing.T, busy bool) *kittest.Factory {
	n1, n2 := fixtures.Node("n1", "p", "", "A100-80G", 8, true), fixtures.Node("n2", "p", "", "A100-80G", 8, true)
	for _, n := range []*corev1.Node{n1, n2} {
		n.Spec.Taints = []corev1.Taint{policy.ExclusiveTaint("p")}
	}
	objs := []runtime.Object{
		&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.PoolSpec{Type: v1alpha1.PoolTypeTraining, MinNodes: 1, Exclusive: true,
			Accelerator: v1alpha1.AcceleratorSpec{Type: "A100-80G"}}},
		n1, n2, fixtures.Node("l1", "l", "", "L40S", 4, true),
	}
	if busy {
		objs = append(objs, fixtures.Pod("ai", "job-0", "n2", "8", nil))
	}
	return kittest.NewFactory(t, objs...)
}

// left is, per node, its pool label, taints and force annotation.
func left(t *testing.T, f *kittest.Factory, names ...string) map[string]string {
	return f.Nodes(t, func(n *corev1.Node) string {
		s := "pool=" + n.Labels[policy.LabelPool]
		for _, taint := range n.Spec.Taints {
			s += ",taint=" + taint.Key
		}
		if v, ok := n.Annotations[policy.AnnotationForce]; ok {
			s += ",force=" + v
		}
		return s
	}, names...)
}

func TestDeletePool(t *testing.T) {
	for _, tc := range []struct {
		name     string
		busy     bool
		args     []string
		stdin    string
		out, err string
		poolLeft bool
		after    map[string]string
	}{
		{"idle, typed name", false, []string{"pool", "p"}, "p\n", "node/n1 unlabeled\nnode/n2 unlabeled\npool.runwhere.ai/p deleted\n", "", false, map[string]string{"l1": "pool=l", "n1": "pool=", "n2": "pool="}},
		{"idle, --yes, -o name", false, []string{"pool", "p", "--yes", "-o", "name"}, "", "node/n1\nnode/n2\npool.runwhere.ai/p\n", "", false, map[string]string{"l1": "pool=l", "n1": "pool=", "n2": "pool="}},
		{"wrong name typed", false, []string{"pool", "p"}, "q\n", "", `delete pool "p": not confirmed (typed "q", expected "p"); nothing was changed`, true, map[string]string{"l1": "pool=l", "n1": "pool=p,taint=runwhere.ai/pool", "n2": "pool=p,taint=runwhere.ai/pool"}},
		{"busy: refused by R2", true, []string{"pool", "p", "--yes"}, "", "", `[R2] pool "p" cannot be deleted: 1 workload pod(s) run on its nodes (ai/job-0); wait for them to finish, or confirm with the annotation runwhere.ai/confirm-delete=p (kubectl litepool delete pool p --force), which leaves the pods running`, true, map[string]string{"l1": "pool=l", "n1": "pool=p,taint=runwhere.ai/pool", "n2": "pool=p,taint=runwhere.ai/pool"}},
		{"busy, --force", true, []string{"pool", "p", "--yes", "--force"}, "", "node/n1 unlabeled\nnode/n2 unlabeled\npool.runwhere.ai/p deleted\n", "", false, map[string]string{"l1": "pool=l", "n1": "pool=", "n2": "pool="}},
		{"client dry run", false, []string{"pool", "p", "--dry-run=client"}, "", "node/n1 unlabeled (dry run)\nnode/n2 unlabeled (dry run)\npool.runwhere.ai/p deleted (dry run)\n", "", true, map[string]string{"l1": "pool=l", "n1": "pool=p,taint=runwhere.ai/pool", "n2": "pool=p,taint=runwhere.ai/pool"}},
		{"a pool of labels", false, []string{"pool", "l", "--yes"}, "", "node/l1 unlabeled\n", "", true, map[string]string{"l1": "pool=", "n1": "pool=p,taint=runwhere.ai/pool", "n2": "pool=p,taint=runwhere.ai/pool"}},
		{"the default pool", false, []string{"pool", "default", "--yes"}, "", "", `[R1] the default pool cannot be deleted: it is the nodes that belong to no pool`, true, map[string]string{"l1": "pool=l", "n1": "pool=p,taint=runwhere.ai/pool", "n2": "pool=p,taint=runwhere.ai/pool"}},
		{"no such pool", false, []string{"pool", "nope", "--yes"}, "", "", `pools.runwhere.ai "nope" not found`, true, map[string]string{"l1": "pool=l", "n1": "pool=p,taint=runwhere.ai/pool", "n2": "pool=p,taint=runwhere.ai/pool"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := cluster(t, tc.busy)
			r := kittest.Run(f, NewCmdDelete, tc.stdin, tc.args...)
			if tc.err == "" {
				require.NoError(t, r.Err)
			} else {
				assert.EqualError(t, r.Err, tc.err)
			}
			assert.Equal(t, tc.out, r.Out)
			prompt := ""
			if tc.stdin != "" { // asked: the risk, then the name typed back
				prompt = "Risk: critical: delete pool \"p\"\n  Impact: 2 node(s) lose the pool's labels and taints and return to the default pool\n" +
					"  Impact: workloads that select this pool can no longer be scheduled\n  Precaution: stop the pool's jobs and services first, and save their data\n" +
					"Type the name \"p\" to confirm: \n"
			}
			assert.Equal(t, prompt, r.ErrOut)
			assert.Equal(t, tc.poolLeft, f.Pool(t, "p") != nil)
			assert.Equal(t, tc.after, left(t, f, "n1", "n2", "l1"))
		})
	}
}

// A release that fails half-way keeps the Pool object, and says to run the command
// again; the second run releases the rest and deletes the object.
func TestDeletePoolResumesAfterAFailedRelease(t *testing.T) {
	f := cluster(t, false)
	count := 0
	f.Kube.PrependReactor("update", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if count++; count == 3 { // n2's first update
			return true, nil, apierrors.NewInternalError(errors.New("connection lost"))
		}
		return false, nil, nil
	})
	r := kittest.Run(f, NewCmdDelete, "", "pool", "p", "--yes")
	assert.EqualError(t, r.Err, `pool "p": releasing node "n2" failed: Internal error occurred: connection lost; the Pool object is kept: run the command again to release the rest and delete it`)
	assert.Equal(t, "node/n1 unlabeled\n", r.Out)
	assert.Empty(t, r.ErrOut)
	require.NotNil(t, f.Pool(t, "p"), "the Pool object is kept for the re-run")
	assert.Equal(t, map[string]string{"n1": "pool=", "n2": "pool=p,taint=runwhere.ai/pool"}, left(t, f, "n1", "n2"))

	r = kittest.Run(f, NewCmdDelete, "", "pool", "p", "--yes")
	require.NoError(t, r.Err)
	assert.Equal(t, "node/n2 unlabeled\npool.runwhere.ai/p deleted\n", r.Out)
	assert.Nil(t, f.Pool(t, "p"))
	assert.Equal(t, map[string]string{"n1": "pool=", "n2": "pool="}, left(t, f, "n1", "n2"))
	assert.Equal(t, []string{"RemovedFromPool: node n1 removed from pool p: the pool was deleted",
		"RemovedFromPool: node n2 removed from pool p: the pool was deleted"}, f.Events(t))
}
