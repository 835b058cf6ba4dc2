// Package release checks that the release has one version: the file VERSION. `make
// release` builds the archives and the image at it; deploy/webhook's image tag and the
// docs' install lines must name the same one, or `kubectl apply -k` of a new release
// would run the old image (issue 29).
package release

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/runwhere-ai/litepool/internal/repo"
)

var root = repo.Root()

// releaseRef finds the places a doc names a release: download URLs, kustomize refs, the
// krew store path, image tags and overlay tags.
var releaseRef = regexp.MustCompile(`(?:releases/download/|\?ref=|store/litepool/|litepool-webhook:|newTag: |\$v = "|VERSION=)(v[0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+-]*)`)

// mismatches names every release reference in docs that is not version.
func mismatches(version string, docs map[string]string) []string {
	var out []string
	for name, text := range docs {
		for i, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, "ARG ") {
				continue // the Dockerfile's default for a build without --build-arg: not a release
			}
			for _, m := range releaseRef.FindAllStringSubmatch(line, -1) {
				if m[1] != version {
					out = append(out, fmt.Sprintf("%s:%d names %s", name, i+1, m[1]))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	require.NoError(t, err)
	return string(b)
}

func version(t *testing.T) string {
	v := strings.TrimSpace(read(t, "VERSION"))
	require.Regexp(t, `^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`, v,
		"VERSION must be a semantic version starting with v (krew's rule)")
	return v
}

func TestKustomizationImageTagIsVersion(t *testing.T) {
	var k struct {
		Images []struct{ Name, NewName, NewTag string } `json:"images"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(read(t, "deploy/webhook/kustomization.yaml")), &k))
	require.Len(t, k.Images, 1)
	assert.Equal(t, version(t), k.Images[0].NewTag,
		"deploy/webhook/kustomization.yaml's newTag must be VERSION's: make release builds the image at VERSION")
}

func TestDocsNameVersion(t *testing.T) {
	docs := map[string]string{"README.md": read(t, "README.md"), "Dockerfile": read(t, "Dockerfile")}
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		docs[rel] = read(t, rel)
	}
	v := version(t)
	refs := 0
	for _, text := range docs {
		refs += len(releaseRef.FindAllString(text, -1))
	}
	require.Greater(t, refs, 10, "the docs' release references were not found: has releaseRef gone stale?")
	assert.Empty(t, mismatches(v, docs), "every install line names the release in VERSION (%s)", v)
}

// The check can fail: a doc left at the last release is named with its line.
func TestMismatchesFindsAStaleDoc(t *testing.T) {
	docs := map[string]string{
		"install.md": "kubectl apply -k \"https://github.com/runwhere-ai/litepool//deploy/webhook?ref=v0.2.0\"\n" +
			"kubectl krew install --manifest-url=https://github.com/runwhere-ai/litepool/releases/download/v0.1.0/litepool.yaml\n" +
			"make image VERSION=v0.2.0-rc.1\n",
	}
	assert.Equal(t, []string{"install.md:2 names v0.1.0", "install.md:3 names v0.2.0-rc.1"}, mismatches("v0.2.0", docs))
}
