package plugin

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// run executes the root command with args and returns stdout and the error.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	root := NewCmdLitepool(streams)
	// cobra's __complete writes to the command's own output.
	root.SetOut(out)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestCompletionScripts(t *testing.T) {
	// Each script is for the kubectl-litepool executable, never for kubectl: a script
	// that registered "kubectl" would replace kubectl's own completion.
	cases := map[string][]string{
		"bash":       {"# bash completion V2 for kubectl-litepool", "__start_kubectl-litepool()", "complete -o default -F __start_kubectl-litepool kubectl-litepool"},
		"zsh":        {"#compdef kubectl-litepool", "compdef _kubectl-litepool kubectl-litepool"},
		"fish":       {"complete -c kubectl-litepool", "__kubectl_litepool_perform_completion"},
		"powershell": {"Register-ArgumentCompleter -CommandName 'kubectl-litepool'"},
	}
	for shell, want := range cases {
		t.Run(shell, func(t *testing.T) {
			out, err := run(t, "completion", shell)
			require.NoError(t, err)
			for _, w := range want {
				assert.Contains(t, out, w)
			}
			assert.NotRegexp(t, `(?m)(complete .*-F \S+ kubectl$|#compdef kubectl$|complete -c kubectl |CommandName 'kubectl')`, out)
		})
	}
}

func TestCompletionRestoresTheRootName(t *testing.T) {
	streams := genericiooptions.NewTestIOStreamsDiscard()
	root := NewCmdLitepool(streams)
	root.SetArgs([]string{"completion", "bash"})
	require.NoError(t, root.Execute())
	assert.Equal(t, "litepool", root.Use)
	assert.Equal(t, "kubectl litepool", root.CommandPath(), "help and usage text still say kubectl litepool")
}

func TestCompletionBadShell(t *testing.T) {
	_, err := run(t, "completion", "tcsh")
	assert.EqualError(t, err, `unsupported shell "tcsh": use one of bash, zsh, fish, powershell`)
	_, err = run(t, "completion")
	assert.EqualError(t, err, "completion takes one shell, one of bash, zsh, fish, powershell; got 0 arguments")
}

// __complete is what every completion script and kubectl_complete-litepool call.
func TestCompleteCommandsAndShells(t *testing.T) {
	out, err := run(t, "__complete", "")
	require.NoError(t, err)
	// Other commands register themselves too; these three are always there.
	for _, c := range []string{"completion\tPrint the shell completion script for kubectl-litepool", "get\t", "version\t"} {
		assert.Contains(t, "\n"+out, "\n"+c)
	}
	assert.True(t, strings.HasSuffix(out, "\n:4\n"), "directive NoFileComp: %q", out)

	out, err = run(t, "__complete", "completion", "")
	require.NoError(t, err)
	assert.Equal(t, "bash\nzsh\nfish\npowershell\n:4\n", out)

	out, err = run(t, "__complete", "get", "po")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(out, "pools\tList pools with their accelerator use\n"), out)
}
