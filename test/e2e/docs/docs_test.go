// Package docs runs every shell transcript of README.md, docs/quickstart.md,
// docs/topology.md and docs/queueing.md's Volcano section (a "$ " line and the output
// after it) on the demo cluster, with Volcano's CRDs (make volcano-crds), as make
// demo leaves it (the sample AI cluster, the local webhook with the controller), and
// compares what each command prints with what the document shows (internal/transcript
// says how). A document whose example drifts from the code fails here.
package docs

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runwhere-ai/litepool/internal/transcript"
	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

func TestMain(m *testing.M) { framework.Main(m, "e2e-docs") }

// The documents, in the order a reader meets them: README's commands change the
// cluster (a pod), and the quickstart reads it after; docs/topology.md adds its own pool
// and nodes last, and docs/queueing.md's Volcano section its pool after that (its Kueue
// sections need Kueue, which test/e2e/kueue runs).
var documents = []string{"README.md", "docs/quickstart.md", "docs/topology.md", "docs/queueing.md#Feed Volcano"}

// section is the document's text, or with "#Heading" only that "## Heading" section's
// (the other lines blanked, so that line numbers stay the file's).
func section(doc, text string) string {
	_, heading, ok := strings.Cut(doc, "#")
	if !ok {
		return text
	}
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(l, "## ") {
			in = l == "## "+heading
		}
		if !in {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

func TestTranscripts(t *testing.T) {
	require.NoError(t, framework.InstallVolcanoCRDs(context.Background(), framework.C))
	startDemoWebhook(t)
	total := 0
	for _, doc := range documents {
		path, _, _ := strings.Cut(doc, "#")
		b, err := os.ReadFile(filepath.Join(framework.Root, path))
		require.NoError(t, err)
		cmds := transcript.Parse(path, section(doc, string(b)))
		require.NotEmpty(t, cmds, "%s has transcripts", doc)
		for _, c := range cmds {
			got := runCommand(t, c.Text)
			if diff := transcript.Compare(c.Want, got); diff != "" {
				t.Errorf("%s\n%s", c, diff)
			}
			total++
		}
	}
	t.Logf("ran %d commands of %d documents", total, len(documents))
}

// startDemoWebhook starts the webhook and the controller as make demo does (go run
// ./hack/localwebhook start) and waits, as hack/demo.sh does, until the controller has
// written every Pool's status.
func startDemoWebhook(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "localwebhook")
	runIn(t, framework.Root, "go", "build", "-o", bin, "./hack/localwebhook")
	args := []string{"--kubeconfig", framework.C.Kubeconfig, "--dir", filepath.Join(dir, "webhook")}
	runIn(t, framework.Root, bin, append([]string{"start"}, args...)...)
	t.Cleanup(func() { _ = exec.Command(bin, append([]string{"stop"}, args...)...).Run() })
	runIn(t, framework.Root, "kubectl", "--kubeconfig", framework.C.Kubeconfig, "wait",
		"--for=condition=Upgrading=false", "--timeout=120s", "--all", "pools")
}

func runIn(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
}

// runCommand runs a document's command as a reader would after `make demo`: bash in the
// repository's root, the cluster's kubeconfig, the built plugin first on PATH. What it
// prints on both streams is its output; a command that fails prints why, which the
// document shows where it means to (a denial).
func runCommand(t *testing.T, command string) string {
	t.Helper()
	cmd := exec.Command("bash", "--norc", "--noprofile", "-c", command)
	cmd.Dir = framework.Root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+framework.C.Kubeconfig,
		"PATH="+framework.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run()
	return out.String()
}
