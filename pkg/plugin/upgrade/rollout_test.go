package upgrade

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

// fakeInstaller plays the installer and the device plugin: the Job completes as soon
// as it is created, and its node's driver-version label then reads the target.
func fakeInstaller(t *testing.T, f *kittest.Factory) {
	jobs := batchv1.SchemeGroupVersion.WithResource("jobs")
	nodes := corev1.SchemeGroupVersion.WithResource("nodes")
	f.Kube.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		job := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job).DeepCopy()
		job.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		if err := f.Kube.Tracker().Create(jobs, job, job.Namespace); err != nil {
			return true, nil, err
		}
		name := job.Spec.Template.Spec.NodeName
		obj, err := f.Kube.Tracker().Get(nodes, "", name)
		require.NoError(t, err, "the installer Job is pinned to its node")
		node := obj.(*corev1.Node).DeepCopy()
		node.Labels[policy.DriverVersionLabels[0]] = target
		return true, job, f.Kube.Tracker().Update(nodes, node, "")
	})
}

const marked1 = "rollout 20261122-120000-24.1.0.3: 1 node(s) marked for driver 24.1.0.3\n"

const rolloutLines = `wave 1: p-1 (max unavailable 1; 0/1 done)
node/p-1: upgrade-required → cordon
node/p-1: cordon → wait-for-jobs
node/p-1: wait-for-jobs → drain
node/p-1: drain → install
node/p-1: installer job kube-system/litepool-driver-p-1-a7e20d72 created (image inst:1)
node/p-1: install → validate: installer job litepool-driver-p-1-a7e20d72 completed
node/p-1: validate → uncordon: driver-version label reads 24.1.0.3
node/p-1: uncordon → done
rollout 20261122-120000-24.1.0.3: 1/1 nodes at 24.1.0.3
`

const drivenHere = "rollout 20261122-120000-24.1.0.3: driven by this command (no litepool controller found: reading Lease litepool-system/litepool-controller: " +
	"leases.coordination.k8s.io \"litepool-controller\" not found); stopping it pauses the rollout: resume with kubectl litepool upgrade resume\n"

// With no controller, the plugin drives the rollout itself, through every step, and
// says on stderr that stopping it pauses the rollout. Under -o name, stdout has the
// marked node only.
func TestUpgradeDriverDrivesTheRolloutWithoutAController(t *testing.T) {
	for _, tc := range []struct {
		name        string
		args        []string
		out, errOut string
	}{
		{"default", nil, preflight + marked1 + rolloutLines, drivenHere},
		{"-o name", []string{"-o", "name"}, "node/p-1\n", preflight + marked1 + drivenHere + rolloutLines},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := kittest.NewFactory(t, poolNode("p-1", "p"))
			fakeInstaller(t, f)
			r := upgradeCmd(f, "", append([]string{"driver", "--node", "p-1", "--version", target, "--installer-image", "inst:1", "--yes"}, tc.args...)...)
			require.NoError(t, r.Err)
			assert.Equal(t, tc.out, r.Out)
			assert.Equal(t, tc.errOut, r.ErrOut)
			n := f.Node(t, "p-1")
			assert.Equal(t, string(policy.UpgradeDone), n.Annotations[policy.AnnotationUpgradeState])
			assert.Equal(t, target, policy.DriverVersion(n))
			assert.False(t, n.Spec.Unschedulable, "uncordoned after the upgrade")
			jobs, err := f.Kube.BatchV1().Jobs("kube-system").List(t.Context(), metav1.ListOptions{})
			require.NoError(t, err)
			assert.Len(t, jobs.Items, 1)
			// Every step of the state machine, in order (the installer Job's name carries
			// the rollout id, which comes from the fake clock).
			evs := f.Events(t)
			require.Len(t, evs, 7)
			assert.Equal(t, []string{
				"DriverUpgrade: driver upgrade to 24.1.0.3: upgrade-required done, next cordon",
				"DriverUpgrade: driver upgrade to 24.1.0.3: cordon done, next wait-for-jobs",
				"DriverUpgrade: driver upgrade to 24.1.0.3: wait-for-jobs done, next drain",
				"DriverUpgrade: driver upgrade to 24.1.0.3: drain done, next install",
				"DriverUpgrade: driver upgrade to 24.1.0.3: install done, next validate: installer job " + jobs.Items[0].Name + " completed",
				"DriverUpgrade: driver upgrade to 24.1.0.3: validate done, next uncordon: driver-version label reads 24.1.0.3",
				"DriverUpgraded: driver upgrade to 24.1.0.3: uncordon done, next done",
			}, evs)
		})
	}
}
