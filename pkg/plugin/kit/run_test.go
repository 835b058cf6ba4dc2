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
	"k8s.io/client-go/dynamic"
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
func (f fakeFactory) DynamicClient() (dynamic.Interface, error) {
	return nil, errors.New("no dynamic client in this test")
}
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

// mutator is a mutating command's options as the commands write them: Complete builds
// the clients through Mutation.CompleteClients.
type mutator struct{ runner }

func (m *mutator) Complete(f Factory, cmd *cobra.Command, _ []string) (err error) {
	m.clients, err = m.CompleteClients(f, cmd)
	return err
}

func runMutator(t *testing.T, f Factory, m *mutator, args ...string) error {
	cmd := Bind(mutatingCmd(t, &m.runner, args...), f, m)
	return cmd.RunE(cmd, nil)
}

func TestBindMutation(t *testing.T) {
	c := &Clients{Kube: fake.NewClientset()}
	m := &mutator{}
	require.NoError(t, runMutator(t, fakeFactory{clients: c}, m, "--dry-run=server"))
	assert.Same(t, c, m.clients, "the clients are handed over")
	assert.Equal(t, cmdutil.DryRunServer, m.DryRun, "--dry-run is read")
	assert.True(t, m.Recorder.DryRun, "the recorder records nothing under dry run")
	assert.True(t, m.validated && m.ran)
}

func TestBindMutationStopsAtTheFirstError(t *testing.T) {
	m := &mutator{}
	require.EqualError(t, runMutator(t, fakeFactory{err: errors.New("no kubeconfig")}, m), "no kubeconfig")
	assert.False(t, m.validated || m.ran)

	m = &mutator{runner{invalid: errors.New("bad flags")}}
	require.EqualError(t, runMutator(t, fakeFactory{clients: &Clients{Kube: fake.NewClientset()}}, m), "bad flags")
	assert.False(t, m.ran, "an invalid command does not run")

	m = &mutator{}
	require.Error(t, runMutator(t, fakeFactory{clients: &Clients{Kube: fake.NewClientset()}}, m, "-o", "table"))
	assert.False(t, m.ran, "an unknown -o does not run")
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

	assert.False(t, IsBound(&cobra.Command{Use: "y", RunE: cmd.RunE}), "a RunE of its own does not count as bound")
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
