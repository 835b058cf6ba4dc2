package plugin

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/runwhere-ai/litepool"

// TestImportLayers reads the import lines of every Go file of the module (tests too) and
// holds them to two rules: a command package (pkg/plugin/<verb>) imports no other
// command package, only what they share below them (pkg/plugin/kit,
// pkg/plugin/internal/...); and nothing outside test/ imports test/.
func TestImportLayers(t *testing.T) {
	root := moduleRoot(t)
	var problems []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		from := filepath.ToSlash(rel)
		for _, spec := range f.Imports {
			imp, _ := strconv.Unquote(spec.Path.Value)
			to, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			problem := layerProblem(from, to)
			if problem == "" {
				continue
			}
			problems = append(problems, filepath.Base(path)+": "+from+" -> "+to+": "+problem)
		}
		return nil
	})
	require.NoError(t, err)
	slices.Sort(problems)
	for _, p := range slices.Compact(problems) {
		t.Error(p)
	}
}

// layerProblem says what is wrong with package from importing package to (both paths
// inside the module); "" when nothing is.
func layerProblem(from, to string) string {
	if verb := commandOf(from); verb != "" {
		if other := commandOf(to); other != "" && other != verb {
			return "a command imports a sibling command; move what they share into pkg/plugin/kit or pkg/plugin/internal"
		}
	}
	if under(to, "test") && !under(from, "test") {
		return "only test/ may import test/"
	}
	return ""
}

// commandOf is the verb of a command package (pkg/plugin/<verb>, or a package below
// it); "" for anything else, kit and internal included.
func commandOf(pkg string) string {
	rest, ok := strings.CutPrefix(pkg, "pkg/plugin/")
	if !ok {
		return ""
	}
	verb, _, _ := strings.Cut(rest, "/")
	if verb == "kit" || verb == "internal" {
		return ""
	}
	return verb
}

func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// TestLayerProblem keeps the rules able to fail.
func TestLayerProblem(t *testing.T) {
	assert.NotEmpty(t, layerProblem("pkg/plugin/describe", "pkg/plugin/get"))
	assert.NotEmpty(t, layerProblem("pkg/plugin/stress", "pkg/plugin/upgrade/sub"))
	assert.NotEmpty(t, layerProblem("hack/localwebhook", "test/e2e/framework"))
	assert.NotEmpty(t, layerProblem("bench/controller", "test"))
	assert.Empty(t, layerProblem("pkg/plugin/describe", "pkg/plugin/kit"))
	assert.Empty(t, layerProblem("pkg/plugin/get", "pkg/plugin/internal/fixtures"))
	assert.Empty(t, layerProblem("pkg/plugin", "pkg/plugin/get"), "the root assembles the commands")
	assert.Empty(t, layerProblem("pkg/plugin/get", "pkg/plugin/get/sub"))
	assert.Empty(t, layerProblem("test/e2e/pools", "test/e2e/framework"))
	assert.Empty(t, layerProblem("pkg/plugin/kit", "pkg/policy"))
}

// moduleRoot is the directory of go.mod above this package.
func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test")
		dir = parent
	}
}
