package kit

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/runwhere-ai/litepool/pkg/interrupt"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
)

func TestFilterCompletions(t *testing.T) {
	names := []string{"train-a100", "infer-a10", "default", "train-snt9b"}
	assert.Equal(t, []string{"default", "infer-a10", "train-a100", "train-snt9b"}, filterCompletions(names, nil, ""))
	assert.Equal(t, []string{"train-a100", "train-snt9b"}, filterCompletions(names, nil, "train"))
	assert.Equal(t, []string{"train-snt9b"}, filterCompletions(names, []string{"train-a100"}, "tr"))
	assert.Empty(t, filterCompletions(names, nil, "x"))
}

func TestPoolSelector(t *testing.T) {
	assert.Equal(t, "runwhere.ai/pool=train-a100", PoolSelector("train-a100"))
	assert.Equal(t, "!runwhere.ai/pool", PoolSelector("default"))
}

// completeNodeNames against a stand-in API server: it asks for node metadata only, with
// the pool's selector when --pool is set, and offers what the server returns, filtered.
func TestCompleteNodeNames(t *testing.T) {
	var selectors []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/nodes" || !strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadataList") {
			http.Error(w, "unexpected "+r.URL.Path+" "+r.Header.Get("Accept"), http.StatusBadRequest)
			return
		}
		selectors = append(selectors, r.URL.Query().Get("labelSelector"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{},"items":[
			{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a100-node-2"}},
			{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a100-node-1"}},
			{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"cpu-node-1"}}]}`))
	}))
	defer srv.Close()
	flags := genericclioptions.NewConfigFlags(false)
	server := srv.URL
	flags.APIServer = &server
	complete := CompleteNodeNames(NewFactory(cmdutil.NewFactory(flags), nil))

	cmd := &cobra.Command{Use: "cordon"}
	cmd.Flags().String("pool", "", "")
	names, directive := complete(cmd, []string{"a100-node-2"}, "a")
	assert.Equal(t, []string{"a100-node-1"}, names)
	assert.Equal(t, cobra.ShellCompDirectiveNoFileComp, directive)

	require.NoError(t, cmd.Flags().Set("pool", "train-a100"))
	names, _ = complete(cmd, nil, "")
	assert.Equal(t, []string{"a100-node-1", "a100-node-2", "cpu-node-1"}, names)
	require.NoError(t, cmd.Flags().Set("pool", "default"))
	_, _ = complete(cmd, nil, "")
	assert.Equal(t, []string{"", "runwhere.ai/pool=train-a100", "!runwhere.ai/pool"}, selectors)

	// An unreachable cluster completes nothing, quietly.
	srv.Close()
	names, directive = complete(&cobra.Command{Use: "x"}, nil, "")
	assert.Empty(t, names)
	assert.Equal(t, cobra.ShellCompDirectiveNoFileComp, directive)
}

// The first signal cancels the command; the second exits 130 at once, saying what the
// command left and how to go on.
func TestSecondSignalExitsWithWhatWasLeft(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	done := make(chan struct{})
	cancelled := make(chan struct{})
	exited := make(chan int, 1)
	var out bytes.Buffer
	interrupt.InFlight.Set(func() string { return "scale-down of pool p left node(s) n1 cordoned" })
	defer interrupt.InFlight.Clear()
	go watchSignals(sigs, done, func() { close(cancelled) }, &out, func(code int) { exited <- code })

	sigs <- syscall.SIGINT
	<-cancelled
	sigs <- syscall.SIGINT
	assert.Equal(t, ExitInterrupted, <-exited)
	assert.Equal(t, "interrupted: stopping and putting back what this command changed; press Ctrl-C again to exit at once\n"+
		"interrupted again: exiting at once.\nscale-down of pool p left node(s) n1 cordoned\n", out.String())
}

func TestNoSignalNoExit(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		watchSignals(sigs, done, func() { t.Error("cancelled without a signal") }, &bytes.Buffer{}, func(int) { t.Error("exited") })
		close(finished)
	}()
	close(done)
	<-finished
}

func TestConfirm(t *testing.T) {
	risk := Risk{Level: "critical", Operation: `delete pool "p1"`, Impact: []string{"i"}, Precaution: []string{"p"}}
	ask := func(m *Mutation, r Risk, answer string) (string, error) {
		var errOut bytes.Buffer
		err := m.Confirm(genericiooptions.IOStreams{In: strings.NewReader(answer), ErrOut: &errOut}, r, "pool-1")
		return errOut.String(), err
	}
	prompt, err := ask(&Mutation{}, risk, "pool-1\n")
	require.NoError(t, err)
	assert.Equal(t, "Risk: critical: delete pool \"p1\"\n  Impact: i\n  Precaution: p\nType the name \"pool-1\" to confirm: \n", prompt)
	_, err = ask(&Mutation{}, risk, "yes\n")
	assert.EqualError(t, err, `delete pool "p1": not confirmed (typed "yes", expected "pool-1"); nothing was changed`)
	_, err = ask(&Mutation{}, risk, "")
	assert.EqualError(t, err, `delete pool "p1": not confirmed (no answer on standard input); nothing was changed; pass --yes to skip the prompt`)

	risk.Level = "high"
	_, err = ask(&Mutation{}, risk, "yes")
	assert.NoError(t, err, "an answer without a newline still counts")
	prompt, err = ask(&Mutation{Yes: true}, risk, "")
	assert.NoError(t, err)
	assert.Empty(t, prompt, "--yes asks nothing")
	prompt, err = ask(&Mutation{DryRun: cmdutil.DryRunServer}, risk, "")
	assert.NoError(t, err)
	assert.Empty(t, prompt, "a dry run changes nothing, so it asks nothing")
}
