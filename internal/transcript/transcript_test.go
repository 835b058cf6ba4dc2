package transcript

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const doc = "Intro\n\n```sh\nmake demo\n```\n\n```\npreamble line\n\n$ kubectl get nodes\nNAME     STATUS   AGE   VERSION\nnode-1   Ready    6s    fake\n\n# A comment:\n$ kubectl run x \\\n  --image=busybox\npod/x created\n$ true\n```\n"

func TestParse(t *testing.T) {
	cmds := Parse("doc.md", doc)
	require.Len(t, cmds, 3)
	assert.Equal(t, Command{Doc: "doc.md", Line: 10, Text: "kubectl get nodes",
		Want: []string{"NAME     STATUS   AGE   VERSION", "node-1   Ready    6s    fake"}}, cmds[0])
	assert.Equal(t, "kubectl run x \\\n  --image=busybox", cmds[1].Text)
	assert.Equal(t, []string{"pod/x created"}, cmds[1].Want)
	assert.Empty(t, cmds[2].Want)
	assert.Equal(t, "doc.md:18: $ true", cmds[2].String())
}

func TestCompare(t *testing.T) {
	want := []string{"NAME     STATUS   AGE   VERSION", "node-1   Ready    6s    fake"}
	assert.Empty(t, Compare(want, "NAME     STATUS   AGE    VERSION\nnode-1   Ready    12m    fake\n"), "AGE and column widths vary")
	assert.NotEmpty(t, Compare(want, "NAME     STATUS   AGE   VERSION\nnode-1   NotReady 6s    fake\n"))
	assert.NotEmpty(t, Compare(want, "NAME     STATUS   AGE   VERSION\n"), "a missing line")
	assert.NotEmpty(t, Compare(want, "NAME     STATUS   AGE   VERSION\nnode-1   Ready    6s    fake\nnode-2   Ready    6s    fake\n"), "an extra line")

	yaml := []string{"kind: Pool", "metadata:", "  name: a", "  ...", "spec:", "  minNodes: 1"}
	assert.Empty(t, Compare(yaml, "kind: Pool\nmetadata:\n  name: a\n  uid: 1\n  resourceVersion: \"3\"\nspec:\n  minNodes: 1\n"),
		"... stands for any lines; the lines around it still count")
	assert.NotEmpty(t, Compare(yaml, "kind: Pool\nmetadata:\n  name: b\nspec:\n  minNodes: 1\n"))

	version := []string{"litepool v0.1.0-dev (commit b44d796, go1.26.8, linux/amd64)"}
	assert.Empty(t, Compare(version, "litepool v0.3.0-4-g1ad1357 (commit 1ad1357, go1.26.9, linux/amd64)\n"))
	assert.NotEmpty(t, Compare(version, "litepool v0.3.0 (commit 1ad1357, go1.26.9, linux/arm64)\n"))
	assert.Empty(t, Compare(nil, ""))
	assert.NotEmpty(t, Compare(nil, "something\n"))
}

// A doc line changed in any transcript of README.md or docs/quickstart.md no longer
// matches the output the doc showed before: the e2e test (test/e2e/docs) would fail.
func TestChangedDocLineFails(t *testing.T) {
	for _, name := range []string{"README.md", "docs/quickstart.md"} {
		b, err := os.ReadFile(filepath.Join("..", "..", name))
		require.NoError(t, err)
		cmds := Parse(name, string(b))
		require.NotEmpty(t, cmds, "%s has transcripts", name)
		changed := 0
		for _, c := range cmds {
			printed := strings.Join(c.Want, "\n") + "\n"
			for i, l := range c.Want {
				if strings.TrimSpace(l) == "..." || strings.TrimSpace(l) == "" {
					continue
				}
				want := append([]string(nil), c.Want...)
				want[i] = strings.Replace(l, strings.Fields(l)[0], strings.Fields(l)[0]+"x", 1)
				assert.NotEmpty(t, Compare(want, printed), "%s: changed line %q", c, want[i])
				changed++
			}
		}
		assert.Positive(t, changed, name)
	}
}
