package policy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nonKeys are runwhere.ai/ strings in the source that are not label or annotation keys.
var nonKeys = map[string]string{
	"runwhere.ai/v1alpha1": "the API group and version",
	"runwhere.ai/rule":     "the status cause type that carries a rule id",
	"runwhere.ai/reason":   "the status cause type that carries a violation's reason",
	"runwhere.ai/litepool": "the reporting controller of litepool's Events",
}

// TestEveryKeyInTheSourceIsRegistered reads every non-test Go file of the module and
// fails on a runwhere.ai/ key the registry lacks: a string literal under the prefix, or
// Prefix + "name". A literal that ends in "-" is a key prefix (was-cordoned-by-) and
// must start some registered key.
func TestEveryKeyInTheSourceIsRegistered(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	seen := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "_output" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		for _, k := range keysIn(t, path) {
			seen++
			rel, _ := filepath.Rel(root, path)
			assert.Truef(t, registered(k.key), "%s:%d uses %q, which is not in policy.Registry (pkg/policy/labels.go)", rel, k.line, k.key)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, seen, 10, "the walk found too few keys to be reading the source")
}

func TestEveryCordonHolderIsRegistered(t *testing.T) {
	for _, h := range CordonHolders {
		assert.Contains(t, Registry, h.Annotation())
	}
}

type keyUse struct {
	key  string
	line int
}

// keysIn returns the runwhere.ai/ keys a Go file spells out.
func keysIn(t *testing.T, path string) []keyUse {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	require.NoError(t, err, path)
	var uses []keyUse
	add := func(lit *ast.BasicLit, prefix string) {
		s, err := strconv.Unquote(lit.Value)
		if err != nil || !strings.HasPrefix(prefix+s, Prefix) || prefix+s == Prefix {
			return
		}
		if _, ok := nonKeys[prefix+s]; !ok {
			uses = append(uses, keyUse{prefix + s, fset.Position(lit.Pos()).Line})
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if lit, ok := n.Y.(*ast.BasicLit); ok && n.Op == token.ADD && isPrefix(n.X) {
				add(lit, Prefix)
				return false
			}
		case *ast.BasicLit:
			if n.Kind == token.STRING {
				add(n, "")
			}
		}
		return true
	})
	return uses
}

// isPrefix reports whether e names the Prefix constant (Prefix or policy.Prefix).
func isPrefix(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "Prefix"
	case *ast.SelectorExpr:
		return e.Sel.Name == "Prefix"
	}
	return false
}

func registered(key string) bool {
	if _, ok := Registry[key]; ok {
		return true
	}
	if strings.HasSuffix(key, "-") {
		for k := range Registry {
			if strings.HasPrefix(k, key) {
				return true
			}
		}
	}
	return false
}
