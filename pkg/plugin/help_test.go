package plugin

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// TestEveryCommandIsDocumented walks the whole command tree, with every command that
// registered itself, and holds each one to the plugin's help rules: a one-line Short, a
// Long, and examples written the way users run the plugin: `kubectl litepool ...`.
func TestEveryCommandIsDocumented(t *testing.T) {
	root := NewCmdLitepool(genericiooptions.NewTestIOStreamsDiscard())
	var seen int
	walk(root, func(cmd *cobra.Command) {
		seen++
		for _, problem := range helpProblems(cmd) {
			t.Errorf("%q: %s", cmd.CommandPath(), problem)
		}
	})
	// The tree has at least the root, get, get pools, version and completion.
	assert.GreaterOrEqual(t, seen, 5)
}

func walk(cmd *cobra.Command, visit func(*cobra.Command)) {
	visit(cmd)
	for _, c := range cmd.Commands() {
		// cobra's own help and __complete commands are not ours to document.
		if c.Hidden || c.Name() == "help" || strings.HasPrefix(c.Name(), "__") {
			continue
		}
		walk(c, visit)
	}
}

// helpProblems lists what is wrong with a command's help text.
func helpProblems(cmd *cobra.Command) []string {
	var out []string
	short := strings.TrimSpace(cmd.Short)
	switch {
	case short == "":
		out = append(out, "no Short: give a one-line summary")
	case strings.Contains(short, "\n"):
		out = append(out, "Short has more than one line")
	}
	if strings.TrimSpace(cmd.Long) == "" {
		out = append(out, "no Long: say what the command does, in more than one line if need be")
	}
	return append(out, exampleProblems(cmd.Example)...)
}

// exampleProblems: the first command of the examples starts with `kubectl litepool`,
// and every command line (not a comment, not the continuation of a line ending in \)
// runs the plugin as `kubectl litepool`.
func exampleProblems(example string) []string {
	var commands []string
	continued := false
	for _, line := range strings.Split(example, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continued = false
			continue
		}
		if !continued {
			commands = append(commands, line)
		}
		continued = strings.HasSuffix(line, `\`)
	}
	if len(commands) == 0 {
		return []string{"no Example: show how to run it, as `kubectl litepool ...`"}
	}
	var out []string
	if !strings.HasPrefix(commands[0], "kubectl litepool") {
		out = append(out, "the first example "+commands[0]+" does not start with `kubectl litepool`")
	}
	for _, c := range commands[1:] {
		if !strings.Contains(c, "kubectl litepool") {
			out = append(out, "example "+c+" does not run `kubectl litepool`")
		}
	}
	return out
}

// The rules above must be able to fail.
func TestHelpProblems(t *testing.T) {
	cases := []struct {
		name string
		cmd  cobra.Command
		want []string
	}{
		{name: "documented", cmd: cobra.Command{Use: "x", Short: "Do x", Long: "Do x well.", Example: "  # x\n  kubectl litepool x \\\n    --flag\n\n  cat f | kubectl litepool x -f -"}},
		{name: "nothing", cmd: cobra.Command{Use: "x"}, want: []string{
			"no Short: give a one-line summary",
			"no Long: say what the command does, in more than one line if need be",
			"no Example: show how to run it, as `kubectl litepool ...`"}},
		{name: "two-line short", cmd: cobra.Command{Use: "x", Short: "Do\nx", Long: "l", Example: "kubectl litepool x"},
			want: []string{"Short has more than one line"}},
		{name: "only comments", cmd: cobra.Command{Use: "x", Short: "s", Long: "l", Example: "# kubectl litepool x"},
			want: []string{"no Example: show how to run it, as `kubectl litepool ...`"}},
		{name: "the binary's name", cmd: cobra.Command{Use: "x", Short: "s", Long: "l", Example: "kubectl-litepool x"},
			want: []string{"the first example kubectl-litepool x does not start with `kubectl litepool`"}},
		{name: "a later example without the plugin", cmd: cobra.Command{Use: "x", Short: "s", Long: "l", Example: "kubectl litepool x\n\n# then\nlitepool y"},
			want: []string{"example litepool y does not run `kubectl litepool`"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, helpProblems(&tc.cmd))
		})
	}
}

// Usage lines name the plugin as users type it: "kubectl litepool get pools", never
// "kubectl get pools", which is kubectl's own command.
func TestUsageSaysKubectlLitepool(t *testing.T) {
	root := NewCmdLitepool(genericiooptions.NewTestIOStreamsDiscard())
	walk(root, func(cmd *cobra.Command) {
		assert.True(t, strings.HasPrefix(cmd.UseLine(), "kubectl litepool"), "%q", cmd.UseLine())
		assert.True(t, strings.HasPrefix(cmd.CommandPath(), "kubectl litepool"), "%q", cmd.CommandPath())
	})

	out, err := run(t, "get", "pools", "--help")
	require.NoError(t, err)
	assert.Contains(t, out, "Usage:\n  kubectl litepool get pools [NAME...] [flags]\n")
	assert.Contains(t, out, "  -h, --help                          help for pools\n")
	out, err = run(t, "--help")
	require.NoError(t, err)
	assert.Contains(t, out, "Usage:\n  kubectl litepool [command]\n")
	assert.Contains(t, out, `Use "kubectl litepool [command] --help" for more information about a command.`)
}

// Every command of the upgrade, check, stress and hccl trees documents itself.
func TestUpgradeCheckStressHCCLCommandsAreDocumented(t *testing.T) {
	root := NewCmdLitepool(genericiooptions.NewTestIOStreamsDiscard())
	seen := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		seen++
		assert.NotEmpty(t, c.Short, c.CommandPath())
		assert.NotEmpty(t, c.Long, c.CommandPath())
		assert.Contains(t, c.Example, "kubectl litepool ", c.CommandPath())
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	for _, name := range []string{"upgrade", "check", "stress", "hccl"} {
		cmd, _, err := root.Find([]string{name})
		if assert.NoError(t, err) && assert.Equal(t, name, cmd.Name()) {
			walk(cmd)
		}
	}
	assert.Equal(t, 14, seen) // 4 parents; upgrade driver/status/resume/abort; check compat; stress run/schedule/status; hccl set/get
}

// -w has one meaning across the plugin, kubectl's: --watch (kubectl get -w). It once
// meant --wait in stress run.
func TestDashWIsWatchEverywhere(t *testing.T) {
	root := NewCmdLitepool(genericiooptions.NewTestIOStreamsDiscard())
	var with []string
	walk(root, func(cmd *cobra.Command) {
		if f := cmd.Flags().ShorthandLookup("w"); f != nil {
			with = append(with, cmd.CommandPath()+" -w: --"+f.Name)
		}
	})
	assert.Equal(t, []string{
		"kubectl litepool stress run -w: --watch",
		"kubectl litepool upgrade abort -w: --watch",
		"kubectl litepool upgrade driver -w: --watch",
		"kubectl litepool upgrade resume -w: --watch",
		"kubectl litepool upgrade status -w: --watch",
	}, with)
}
