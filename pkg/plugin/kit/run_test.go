package kit

import (
	"context"
	"errors"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes/fake"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/utils/clock"
)

type fakeFactory struct {
	genericclioptions.RESTClientGetter
	clients *Clients
	err     error
}

func (f fakeFactory) Clients() (*Clients, error) { return f.clients, f.err }
func (fakeFactory) Clock() clock.PassiveClock    { return clock.RealClock{} }

type runner struct {
	Mutation
	clients        *Clients
	invalid        error
	validated, ran bool
}

func (r *runner) Validate() error {
	r.validated = true
	if r.invalid != nil {
		return r.invalid
	}
	return r.Mutation.Validate()
}

func (r *runner) Run(context.Context) error { r.ran = true; return nil }

func mutatingCmd(t *testing.T, r *runner, args ...string) *cobra.Command {
	cmd := &cobra.Command{Use: "x"}
	r.Mutation = NewMutation()
	r.AddFlags(cmd, false)
	require.NoError(t, cmd.ParseFlags(args))
	cmd.SetContext(context.Background())
	return cmd
}

func TestRunMutation(t *testing.T) {
	c := &Clients{Kube: fake.NewClientset()}
	r := &runner{}
	cmd := mutatingCmd(t, r, "--dry-run=server")
	require.NoError(t, RunMutation(fakeFactory{clients: c}, cmd, &r.Mutation, &r.clients, r))
	assert.Same(t, c, r.clients, "the clients are handed over")
	assert.Equal(t, cmdutil.DryRunServer, r.DryRun, "--dry-run is read")
	assert.True(t, r.Recorder.DryRun, "the recorder records nothing under dry run")
	assert.True(t, r.validated && r.ran)
}

func TestRunMutationStopsAtTheFirstError(t *testing.T) {
	r := &runner{}
	err := RunMutation(fakeFactory{err: errors.New("no kubeconfig")}, mutatingCmd(t, r), &r.Mutation, &r.clients, r)
	require.EqualError(t, err, "no kubeconfig")
	assert.False(t, r.validated || r.ran)

	r = &runner{invalid: errors.New("bad flags")}
	err = RunMutation(fakeFactory{clients: &Clients{Kube: fake.NewClientset()}}, mutatingCmd(t, r), &r.Mutation, &r.clients, r)
	require.EqualError(t, err, "bad flags")
	assert.False(t, r.ran, "an invalid command does not run")

	r = &runner{}
	err = RunMutation(fakeFactory{clients: &Clients{Kube: fake.NewClientset()}}, mutatingCmd(t, r, "-o", "table"), &r.Mutation, &r.clients, r)
	require.Error(t, err)
	assert.False(t, r.ran, "an unknown -o does not run")
}

type completer struct {
	runner
	completeErr error
	completed   bool
}

func (c *completer) Complete(Factory, *cobra.Command, []string) error {
	c.completed = true
	return c.completeErr
}

// RunE runs Complete, Validate and Run in kubectl's order and stops at the first error.
func TestRunE(t *testing.T) {
	cmd := &cobra.Command{Use: "x"}
	cmd.SetContext(context.Background())

	c := &completer{}
	require.NoError(t, RunE(fakeFactory{}, c)(cmd, nil))
	assert.True(t, c.completed && c.validated && c.ran)

	c = &completer{completeErr: errors.New("bad flag")}
	assert.EqualError(t, RunE(fakeFactory{}, c)(cmd, nil), "bad flag")
	assert.False(t, c.validated || c.ran)

	c = &completer{runner: runner{invalid: errors.New("invalid")}}
	assert.EqualError(t, RunE(fakeFactory{}, c)(cmd, nil), "invalid")
	assert.True(t, c.completed)
	assert.False(t, c.ran)
}
