package edit

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/plugin/kit/kittest"
	"github.com/runwhere-ai/litepool/pkg/policy"
)

func TestEditPoolFlags(t *testing.T) {
	old := &v1alpha1.Pool{Spec: v1alpha1.PoolSpec{Description: "d", Tags: map[string]string{"a": "1", "b": "2"}, MinNodes: 1}}
	o := &EditPoolOptions{Tags: []string{"a-", "c=3"}, MinNodes: 2, Exclusive: true, Type: "Inference",
		set: map[string]bool{"tag": true, "min-nodes": true, "exclusive": true, "type": true}}
	p, err := o.applyFlags(old)
	require.NoError(t, err)
	assert.Equal(t, v1alpha1.PoolSpec{Description: "d", Tags: map[string]string{"b": "2", "c": "3"}, MinNodes: 2, Exclusive: true, Type: "Inference"}, p.Spec)
	assert.Equal(t, map[string]string{"a": "1", "b": "2"}, old.Spec.Tags, "the original is not changed")
	assert.Equal(t, []string{"tags", "type", "minNodes", "exclusive"}, changedFields(old, p))
}

func member(name string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{policy.LabelPool: "train-a100", policy.LabelGPUType: "A100-80G"}},
		Spec: corev1.NodeSpec{Taints: taints}}
}

// cluster: train-a100 (A100, minNodes 1, tag team=llm) with members n1 and n2;
// infer-a10 is a pool of labels only (g1).
func cluster(t *testing.T) *kittest.Factory {
	return kittest.NewFactory(t,
		&v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-a100"}, Spec: v1alpha1.PoolSpec{
			Description: "d", Type: "Training", MinNodes: 1, Tags: map[string]string{"team": "llm"},
			Accelerator: v1alpha1.AcceleratorSpec{Type: "A100-80G"}}},
		member("n1"), member("n2"),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "g1", Labels: map[string]string{policy.LabelPool: "infer-a10"}}},
	)
}

func TestEditPool(t *testing.T) {
	exclusive := []corev1.Taint{policy.ExclusiveTaint("train-a100")}
	for _, tc := range []struct {
		name     string
		args     []string
		out      string
		spec     func(*v1alpha1.PoolSpec) // the stored spec afterwards, from the fixture's
		nodeTain []corev1.Taint
		events   []string
	}{
		{"flags change what they name", []string{"--description", "LLM pre-training", "--tag", "cost=42", "--tag", "team-", "--min-nodes", "2"},
			"pool.runwhere.ai/train-a100 edited\n",
			func(s *v1alpha1.PoolSpec) {
				s.Description, s.Tags, s.MinNodes = "LLM pre-training", map[string]string{"cost": "42"}, 2
			}, nil, []string{"Edited: pool train-a100 edited: description, tags, minNodes"}},
		{"no change", []string{"--tag", "team=llm"}, "pool.runwhere.ai/train-a100 unchanged\n", func(*v1alpha1.PoolSpec) {}, nil, nil},
		{"exclusive taints the members", []string{"--exclusive"},
			"pool.runwhere.ai/train-a100 edited\nnode/n1 tainted\nnode/n2 tainted\n",
			func(s *v1alpha1.PoolSpec) { s.Exclusive = true }, exclusive, []string{"Edited: pool train-a100 edited: exclusive"}},
		{"client dry run", []string{"--exclusive", "--dry-run=client"},
			"pool.runwhere.ai/train-a100 edited (dry run)\nnode/n1 tainted (dry run)\nnode/n2 tainted (dry run)\n",
			func(*v1alpha1.PoolSpec) {}, nil, nil},
		{"server dry run", []string{"--exclusive", "--dry-run=server"},
			"pool.runwhere.ai/train-a100 edited (server dry run)\nnode/n1 tainted (server dry run)\nnode/n2 tainted (server dry run)\n",
			func(*v1alpha1.PoolSpec) {}, nil, nil},
		{"-o name", []string{"--exclusive", "-o", "name"}, "pool.runwhere.ai/train-a100\nnode/n1\nnode/n2\n",
			func(s *v1alpha1.PoolSpec) { s.Exclusive = true }, exclusive, []string{"Edited: pool train-a100 edited: exclusive"}},
		{"-o jsonpath under dry run: the pool as it would be", []string{"--min-nodes", "2", "--dry-run=client", "-o", "jsonpath={.spec.minNodes}"}, "2",
			func(*v1alpha1.PoolSpec) {}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := cluster(t)
			want := f.Pool(t, "train-a100").Spec
			tc.spec(&want)
			r := kittest.Run(f, NewCmdEditPool, "", append([]string{"train-a100"}, tc.args...)...)
			require.NoError(t, r.Err)
			assert.Equal(t, tc.out, r.Out)
			assert.Empty(t, r.ErrOut)
			assert.Equal(t, want, f.Pool(t, "train-a100").Spec)
			assert.Equal(t, tc.nodeTain, f.Node(t, "n2").Spec.Taints)
			assert.Equal(t, tc.events, f.Events(t))
		})
	}
}

func TestEditPoolUntaints(t *testing.T) {
	f := kittest.NewFactory(t, &v1alpha1.Pool{ObjectMeta: metav1.ObjectMeta{Name: "train-a100"}, Spec: v1alpha1.PoolSpec{MinNodes: 1, Exclusive: true}},
		member("n1", policy.ExclusiveTaint("train-a100")), member("n2"))
	r := kittest.Run(f, NewCmdEditPool, "", "train-a100", "--exclusive=false")
	require.NoError(t, r.Err)
	assert.Equal(t, "pool.runwhere.ai/train-a100 edited\nnode/n1 untainted\n", r.Out, "n2 had no taint: nothing said")
	assert.Empty(t, f.Node(t, "n1").Spec.Taints)
}

func TestEditPoolRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"R1 --min-nodes", []string{"train-a100", "--min-nodes", "0"}, `[R1] --min-nodes 0: must be at least 1`},
		{"R1 type", []string{"train-a100", "--type", "Batch"},
			"pool \"train-a100\" was not changed:\n[R1] unknown pool type \"Batch\": must be one of Training, Inference, Development, Compute"},
		{"bad --tag", []string{"train-a100", "--tag", "team"}, `invalid --tag "team": expected KEY=VALUE or KEY-`},
		{"a pool of labels", []string{"infer-a10", "--description", "x"},
			`pool "infer-a10" has no Pool object (it exists only as labels on 1 node(s)): create one with kubectl litepool create -f, which adopts its nodes`},
		{"the default pool", []string{"default", "--description", "x"}, `the default pool has no Pool object to edit: it is the nodes that belong to no pool`},
		{"no such pool", []string{"no-such-pool", "--description", "x"}, `pools.runwhere.ai "no-such-pool" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := cluster(t)
			before := f.Pool(t, "train-a100")
			r := kittest.Run(f, NewCmdEditPool, "", tc.args...)
			require.EqualError(t, r.Err, tc.want)
			assert.Empty(t, r.Out)
			assert.Equal(t, before, f.Pool(t, "train-a100"))
			assert.Empty(t, f.Events(t))
		})
	}
}

// A write the API server refuses is the command's error; a conflict says the pool was
// changed meanwhile. Nothing is written, no node is tainted, no event is recorded.
func TestEditPoolWriteFails(t *testing.T) {
	for err, want := range map[error]string{
		apierrors.NewInternalError(errors.New("connection lost")):                                          "Internal error occurred: connection lost",
		apierrors.NewConflict(v1alpha1.PoolResource.GroupResource(), "train-a100", errors.New("modified")): `pool "train-a100" was changed by someone else while you edited it; nothing was written: run the command again`,
	} {
		f := cluster(t)
		f.Dynamic.PrependReactor("update", "pools", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, err })
		r := kittest.Run(f, NewCmdEditPool, "", "train-a100", "--exclusive")
		require.EqualError(t, r.Err, want)
		assert.Empty(t, r.Out)
		assert.False(t, f.Pool(t, "train-a100").Spec.Exclusive)
		assert.Empty(t, f.Node(t, "n1").Spec.Taints)
		assert.Empty(t, f.Events(t))
	}
}

// A conflict that only the Pool's status explains (the controller writes it as pods
// come and go) is written again on the Pool as it is now; a change to the spec by
// someone else meanwhile is refused, as above.
func TestEditPoolRetriesAStatusOnlyConflict(t *testing.T) {
	f := cluster(t)
	conflicts := 0
	f.Dynamic.PrependReactor("update", "pools", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts++; conflicts == 1 {
			return true, nil, apierrors.NewConflict(v1alpha1.PoolResource.GroupResource(), "train-a100", errors.New("modified"))
		}
		return false, nil, nil
	})
	r := kittest.Run(f, NewCmdEditPool, "", "train-a100", "--description", "LLM")
	require.NoError(t, r.Err)
	assert.Equal(t, "pool.runwhere.ai/train-a100 edited\n", r.Out)
	assert.Equal(t, 2, conflicts)
	assert.Equal(t, "LLM", f.Pool(t, "train-a100").Spec.Description)
}

// useEditor sets $KUBE_EDITOR to a script that runs sed on the file it is given (and
// $TMPDIR to a directory of the test's, where a refused edit's file is kept).
func useEditor(t *testing.T, sed string) {
	t.Setenv("TMPDIR", t.TempDir())
	path := filepath.Join(t.TempDir(), "editor.sh")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\nsed -i -e '"+sed+"' \"$1\"\n"), 0o700))
	t.Setenv("KUBE_EDITOR", path)
}

func TestEditPoolInTheEditor(t *testing.T) {
	f := cluster(t)
	useEditor(t, "s/description: .*/description: edited in vi/; s/minNodes: 1/minNodes: 2/")
	r := kittest.Run(f, NewCmdEditPool, "", "train-a100")
	require.NoError(t, r.Err)
	assert.Equal(t, "pool.runwhere.ai/train-a100 edited\n", r.Out)
	assert.Empty(t, r.ErrOut)
	p := f.Pool(t, "train-a100")
	assert.Equal(t, []any{"edited in vi", int32(2)}, []any{p.Spec.Description, p.Spec.MinNodes})
	assert.Equal(t, []string{"Edited: pool train-a100 edited: description, minNodes"}, f.Events(t))

	// Saving without a change cancels.
	t.Setenv("KUBE_EDITOR", "true")
	r = kittest.Run(f, NewCmdEditPool, "", "train-a100")
	require.NoError(t, r.Err)
	assert.Equal(t, []string{"", "Edit cancelled, no changes made.\n"}, []string{r.Out, r.ErrOut})
}

func TestEditPoolInTheEditorRefusals(t *testing.T) {
	for sed, want := range map[string]string{
		"s/type: A100-80G/type: H100-80G/":                                                "^pool \"train-a100\" was not changed:\n\\[R1\\] accelerator type of pool \"train-a100\" cannot change from \"A100-80G\" to \"H100-80G\" while it has 2 node\\(s\\); remove its nodes first$",
		"s/name: train-a100/name: train-h100/":                                            `^pool "train-a100" was not changed: the name cannot change \(to "train-h100"\); your changes are in /.*/litepool-edit-\d+\.yaml$`,
		`s/^spec:/spec:\n  topology:\n    preset: Cray/`:                                  `^pool "train-a100" was not changed:\n\[R1\] unknown topology preset "Cray": use one of Ascend, EKS, GKE, NVIDIA, Topograph, or list the node label keys in spec.topology.levels$`,
		`s/^spec:/spec:\n  topology:\n    levels: [rack, kubernetes.io\/hostname, rack]/`: `^pool "train-a100" was not changed:\n\[R1\] kubernetes.io/hostname may only be the last level`,
		"s/minNodes: 1/minNode: 1/":                                                       `^pool "train-a100" was not changed: the edited file is not a valid Pool: unknown field "minNode"; your changes are in /.*/litepool-edit-\d+\.yaml$`,
	} {
		f := cluster(t)
		before := f.Pool(t, "train-a100")
		useEditor(t, sed)
		r := kittest.Run(f, NewCmdEditPool, "", "train-a100")
		require.Error(t, r.Err, sed)
		assert.Regexp(t, want, r.Err.Error())
		assert.Equal(t, before, f.Pool(t, "train-a100"))
		assert.Empty(t, f.Events(t))
	}
}
