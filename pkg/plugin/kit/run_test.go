package kit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes/fake"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runwhere-ai/litepool/pkg/events"
)

type fakeFactory struct {
	genericclioptions.RESTClientGetter
	clients *Clients
	err     error
	clock   clock.PassiveClock
}

func (f fakeFactory) Clients() (*Clients, error) { return f.clients, f.err }
func (f fakeFactory) Clock() clock.PassiveClock {
	if f.clock == nil {
		return clock.RealClock{}
	}
	return f.clock
}

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

// Bind runs Complete, Validate and Run in kubectl's order, stops at the first error,
// and marks the command so that the tree walk in pkg/plugin can tell it from one that
// bypasses them.
func TestBind(t *testing.T) {
	newCmd := func(c *completer) *cobra.Command {
		cmd := Bind(&cobra.Command{Use: "x", Run: func(*cobra.Command, []string) {}}, fakeFactory{}, c)
		cmd.SetContext(context.Background())
		return cmd
	}
	c := &completer{}
	cmd := newCmd(c)
	assert.True(t, IsBound(cmd))
	assert.Nil(t, cmd.Run, "Bind's RunE is the command's only entry")
	require.NoError(t, cmd.RunE(cmd, nil))
	assert.True(t, c.completed && c.validated && c.ran)

	c = &completer{completeErr: errors.New("bad flag")}
	cmd = newCmd(c)
	assert.EqualError(t, cmd.RunE(cmd, nil), "bad flag")
	assert.False(t, c.validated || c.ran)

	c = &completer{runner: runner{invalid: errors.New("invalid")}}
	cmd = newCmd(c)
	assert.EqualError(t, cmd.RunE(cmd, nil), "invalid")
	assert.True(t, c.completed)
	assert.False(t, c.ran)

	assert.False(t, IsBound(&cobra.Command{Use: "y", RunE: RunE(fakeFactory{}, c)}), "the old RunE does not count as bound")
}

// CompleteClients hands over the Factory's clients, reads --dry-run and stamps events
// with the Factory's clock.
func TestCompleteClients(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := &Clients{Kube: fake.NewClientset()}
	f := fakeFactory{clients: c, clock: clocktesting.NewFakePassiveClock(at)}
	r := &runner{}
	got, err := r.CompleteClients(f, mutatingCmd(t, r))
	require.NoError(t, err)
	assert.Same(t, c, got)
	assert.Equal(t, cmdutil.DryRunNone, r.DryRun)
	require.NoError(t, r.Recorder.Normal(context.Background(), events.PoolRef("p"), "Test", "m"))
	evs, err := c.Kube.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, evs.Items, 1)
	assert.Equal(t, at, evs.Items[0].EventTime.UTC(), "the event carries the Factory's time")

	_, err = r.CompleteClients(fakeFactory{err: errors.New("no kubeconfig")}, mutatingCmd(t, r))
	assert.EqualError(t, err, "no kubeconfig")
}
