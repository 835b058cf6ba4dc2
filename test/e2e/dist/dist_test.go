package dist

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// The sample AI cluster's pools (hack/fixtures), as test/e2e/pools sees them too.
const fixturePools = `POOL NAME     STATUS     GPU TOTAL   GPU USED   GPU FREE   NODE COUNT
dev-sandbox   Empty      0           0          0          0
infer-a10     Degraded   8           2          2          2
train-a100    Running    24          12         12         3
train-snt9b   Degraded   24          8          8          3
default       Running    8           0          8          3
`

var poolsGVR = schema.GroupVersionResource{Group: "runwhere.ai", Version: "v1alpha1", Resource: "pools"}

func TestReleaseArchiveOnPathIsAWorkingPlugin(t *testing.T) {
	r := kubectl(t, installDir, "", "plugin", "list")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.Contains(t, r.Stdout, filepath.Join(installDir, "kubectl-litepool")+"\n")
	assert.NotContains(t, r.Stdout, framework.BinDir, "only the released plugin is on PATH")

	commit, err := exec.Command("git", "-C", framework.Root, "rev-parse", "--short", "HEAD").Output()
	require.NoError(t, err)
	r = kubectl(t, installDir, "", "litepool", "version")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.Equal(t, "litepool "+version+" (commit "+strings.TrimSpace(string(commit))+", "+runtime.Version()+", linux/amd64)\n", r.Stdout)

	r = kubectl(t, installDir, "", "litepool", "get", "pools")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.Equal(t, fixturePools, r.Stdout)
	assert.Empty(t, r.Stderr)
}

// Output conventions of the released binary: tables to stdout, errors to stderr with a
// non-zero exit, --no-headers.
func TestOutputConventions(t *testing.T) {
	r := kubectl(t, installDir, "", "litepool", "get", "pools", "no-such-pool")
	assert.Equal(t, 1, r.ExitCode)
	assert.Empty(t, r.Stdout)
	assert.Equal(t, "Error from server (NotFound): pools.runwhere.ai \"no-such-pool\" not found\n", r.Stderr)

	r = kubectl(t, installDir, "", "litepool", "get", "pools", "--no-headers")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.Equal(t, `dev-sandbox   Empty      0     0     0     0
infer-a10     Degraded   8     2     2     2
train-a100    Running    24    12    12    3
train-snt9b   Degraded   24    8     8     3
default       Running    8     0     8     3
`, r.Stdout)

	r = kubectl(t, installDir, "", "litepool", "get", "pools", "-o", "xml")
	assert.Equal(t, 1, r.ExitCode)
	assert.Empty(t, r.Stdout)
	assert.Contains(t, r.Stderr, `unable to match a printer suitable for the output format "xml"`)
}

// `kubectl litepool __complete ...` is what every completion script asks.
func TestPluginCompletesPoolNamesFromTheCluster(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"every pool", []string{"get", "pools", ""}, "default\ndev-sandbox\ninfer-a10\ntrain-a100\ntrain-snt9b\n:4\n"},
		{"by prefix", []string{"get", "pools", "train"}, "train-a100\ntrain-snt9b\n:4\n"},
		{"not twice", []string{"get", "pools", "train-a100", "train"}, "train-snt9b\n:4\n"},
		{"through the alias", []string{"get", "pool", "in"}, "infer-a10\n:4\n"},
		{"with --context", []string{"--context", currentContext(t), "get", "pools", "dev"}, "dev-sandbox\n:4\n"},
		{"wrong context completes nothing", []string{"--context", "no-such-context", "get", "pools", ""}, ":4\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := kubectl(t, installDir, "", append([]string{"litepool", "__complete"}, tc.args...)...)
			require.Equal(t, 0, r.ExitCode, r.Stderr)
			assert.Equal(t, tc.want, r.Stdout)
		})
	}
}

// kubectl's own completion (kubectl 1.26+; this machine's kubectl is 1.32) completes
// the plugin through kubectl_complete-litepool on PATH; without the script it cannot.
func TestKubectlCompletesThePluginThroughTheScript(t *testing.T) {
	r := kubectl(t, installDir, "", "__complete", "litepool", "get", "pools", "")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.Equal(t, "default\ndev-sandbox\ninfer-a10\ntrain-a100\ntrain-snt9b\n:4\n", r.Stdout)

	r = kubectl(t, installDir, "", "__complete", "litepool", "ver")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.Equal(t, "version\tPrint the litepool version\n:4\n", r.Stdout)

	r = kubectl(t, installDir, "", "__complete", "litepool", "completion", "")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.Equal(t, "bash\nzsh\nfish\npowershell\n:4\n", r.Stdout)

	// As `make build` leaves it in _output/bin, script included.
	r = framework.C.Kubectl(t, "", "__complete", "litepool", "get", "pools", "tr")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.Equal(t, "train-a100\ntrain-snt9b\n:4\n", r.Stdout)

	// As krew installs it: the plugin alone. kubectl finds the plugin but has nobody
	// to ask for its completions (the krew caveat tells users to link the script).
	r = kubectl(t, pluginOnlyDir, "", "__complete", "litepool", "get", "pools", "")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.Equal(t, ":0\n", r.Stdout)
	r = kubectl(t, pluginOnlyDir, "", "__complete", "lite")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.Contains(t, r.Stdout, "litepool\tThe command litepool is a plugin installed by the user\n")
}

// The whole chain in a real bash: kubectl's completion script, kubectl, the shipped
// script, the plugin, the cluster. And the plugin's own bash script for kubectl-litepool.
func TestBashCompletesPoolNames(t *testing.T) {
	bash, err := exec.LookPath("bash")
	require.NoError(t, err, "bash is needed to run the completion scripts")

	got := complete(t, bash, "source <(kubectl completion bash)", "__start_kubectl", "kubectl", "litepool", "get", "pools", "tr")
	assert.Equal(t, "train-a100\ntrain-snt9b\n", got)

	got = complete(t, bash, "source <(kubectl-litepool completion bash)", "__start_kubectl-litepool", "kubectl-litepool", "get", "pools", "inf")
	assert.Equal(t, "infer-a10\n", got)

	got = complete(t, bash, "source <(kubectl completion bash)", "__start_kubectl", "kubectl", "litepool", "get", "pools", "")
	assert.Equal(t, "default\ndev-sandbox\ninfer-a10\ntrain-a100\ntrain-snt9b\n", got)
}

// complete loads a completion script in bash, completes words (the last is the word
// under the cursor) with the script's start function, and returns COMPREPLY.
func complete(t *testing.T, bash, load, start string, words ...string) string {
	t.Helper()
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = "'" + w + "'"
	}
	script := load + `
# cobra's scripts split words with bash-completion's _get_comp_words_by_ref. This
# machine has no bash-completion package; the stand-in below does what it does for a
# line with no '=' or ':' in it.
if ! declare -F _get_comp_words_by_ref >/dev/null; then
  _get_comp_words_by_ref() {
    cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}
    words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD
  }
fi
COMP_WORDS=(` + strings.Join(quoted, " ") + `)
COMP_CWORD=$((${#COMP_WORDS[@]}-1))
COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}; COMP_TYPE=9
` + start + ` 2>/dev/null
printf '%s\n' "${COMPREPLY[@]}" | sort
`
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", script)
	cmd.Env = append(cmd.Environ(), pathWith(installDir), "KUBECONFIG="+framework.C.Kubeconfig)
	out, err := cmd.Output()
	require.NoError(t, err)
	return string(out)
}

// Node names complete for the commands that take nodes (cordon, wired with
// kit.CompleteNodeNames).
func TestNodeNamesComplete(t *testing.T) {
	r := kubectl(t, installDir, "", "__complete", "litepool", "cordon", "")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.Equal(t, "a10-node-1\na10-node-2\na100-node-1\na100-node-2\na100-node-3\na100-node-4\ncpu-node-1\ncpu-node-2\nsnt9b-node-1\nsnt9b-node-2\nsnt9b-node-3\n:4\n", r.Stdout)
	r = kubectl(t, installDir, "", "__complete", "litepool", "cordon", "snt9b-node-1", "snt")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	assert.Equal(t, "snt9b-node-2\nsnt9b-node-3\n:4\n", r.Stdout)
}

// A Pool printed with `get pool NAME -o yaml` can be fed back to kubectl apply: it is
// accepted and changes nothing but kubectl's own last-applied annotation (the spec
// and the generation stay; the printed status is ignored, status being a subresource).
func TestPoolYAMLCanBeAppliedBack(t *testing.T) {
	ctx := context.Background()
	pools := framework.C.Dynamic.Resource(poolsGVR)
	before, err := pools.Get(ctx, "train-a100", metav1.GetOptions{})
	require.NoError(t, err)

	r := kubectl(t, installDir, "", "litepool", "get", "pool", "train-a100", "-o", "yaml")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	var printed map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(r.Stdout), &printed))
	assert.Equal(t, "Pool", printed["kind"])
	assert.Equal(t, asYAML(t, before.Object["spec"]), asYAML(t, printed["spec"]), "the printed spec is the stored one, no more")

	applied := kubectl(t, installDir, r.Stdout, "apply", "--dry-run=server", "-f", "-")
	require.Equal(t, 0, applied.ExitCode, applied.Stderr)
	assert.Equal(t, "pool.runwhere.ai/train-a100 configured (server dry run)\n", applied.Stdout)

	applied = kubectl(t, installDir, r.Stdout, "apply", "-f", "-")
	require.Equal(t, 0, applied.ExitCode, applied.Stderr)
	assert.Equal(t, "pool.runwhere.ai/train-a100 configured\n", applied.Stdout)

	after, err := pools.Get(ctx, "train-a100", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, asYAML(t, before.Object["spec"]), asYAML(t, after.Object["spec"]))
	assert.Equal(t, before.GetGeneration(), after.GetGeneration(), "no spec change")
}

func asYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func currentContext(t *testing.T) string {
	t.Helper()
	r := framework.C.Kubectl(t, "", "config", "current-context")
	require.Equal(t, 0, r.ExitCode, r.Stderr)
	return strings.TrimSpace(r.Stdout)
}
