package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// goFiles checks every exec.Command, exec.CommandContext and exec.LookPath of the
// module's Go files, tests included. A Go package that runs a program outside the base
// image must install it first: the first statement of its TestMain calls a Go installer
// of the table. Anywhere else, such a program is a problem.
func (c *checker) goFiles() error {
	pkgs := map[string][]*goFile{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(c.root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "_output" || d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(c.root, p)
		pkgs[filepath.Dir(rel)] = append(pkgs[filepath.Dir(rel)], &goFile{rel: rel, ast: f})
		return nil
	})
	if err != nil {
		return err
	}
	dirs := make([]string, 0, len(pkgs))
	for d := range pkgs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		c.goPackage(fset, pkgs[d])
	}
	return nil
}

type goFile struct {
	rel string
	ast *ast.File
}

func (c *checker) goPackage(fset *token.FileSet, files []*goFile) {
	have := installed{}
	for _, f := range files {
		c.noteGoInstallers(f.ast)
		if pkgs, ok := c.testMainInstalls(f.ast); ok {
			have = have.with(pkgs...)
		}
	}
	for _, f := range files {
		ast.Inspect(f.ast, func(n ast.Node) bool {
			fn, ok := n.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				return true
			}
			for _, site := range execSites(fn) {
				pos := fset.Position(site.pos)
				where := fmt.Sprintf("%s:%d", f.rel, pos.Line)
				if len(site.programs) == 0 {
					c.report = append(c.report, where+": not resolved (a program named at run time, or the project's own)")
				}
				for _, p := range site.programs {
					if strings.Contains(p, "/") && !filepath.IsAbs(p) {
						continue // hack/dist.sh: the project's own
					}
					c.use(where, p, have)
				}
			}
			return false
		})
	}
}

// testMainInstalls returns the packages installed by the first statement of the file's
// TestMain, when that statement calls a Go installer of the table.
func (c *checker) testMainInstalls(f *ast.File) ([]string, bool) {
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "TestMain" || fn.Body == nil || len(fn.Body.List) == 0 {
			continue
		}
		var pkgs []string
		ast.Inspect(fn.Body.List[0], func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if script, ok := c.table.goInstallers[callee(call)]; ok {
					pkgs = append(pkgs, c.table.installers[script]...)
				}
			}
			return true
		})
		return pkgs, len(pkgs) > 0
	}
	return nil, false
}

// noteGoInstallers records the Go installers of the table that the file defines and
// that name their shell installer (its script's file name and its function, as string
// literals), so that the table cannot name one that runs nothing.
func (c *checker) noteGoInstallers(f *ast.File) {
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		name := f.Name.Name + "." + fn.Name.Name
		script, ok := c.table.goInstallers[name]
		if !ok {
			continue
		}
		file, function, _ := strings.Cut(script, ":")
		lits := map[string]bool{}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if s, ok := n.(ast.Expr); ok {
				if v, ok := stringLit(s); ok {
					lits[v] = true
				}
			}
			return true
		})
		if lits[function] && anySuffix(lits, filepath.Base(file)) {
			c.installersFound[name] = true
		}
	}
}

// callee spells a call's function as its caller does: "pkg.Func" or "Func".
func callee(call *ast.CallExpr) string {
	switch fn := call.Fun.(type) {
	case *ast.SelectorExpr:
		if x, ok := fn.X.(*ast.Ident); ok {
			return x.Name + "." + fn.Sel.Name
		}
	case *ast.Ident:
		return fn.Name
	}
	return ""
}

type execSite struct {
	pos      token.Pos
	programs []string // empty when the name is built at run time
}

// execSites finds the exec calls of a function and what each may run: a string literal,
// or a variable given string literals in the same function (ranged over or assigned).
func execSites(fn *ast.FuncDecl) []execSite {
	var sites []execSite
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		arg := -1
		switch callee(call) {
		case "exec.Command", "exec.LookPath":
			arg = 0
		case "exec.CommandContext":
			arg = 1
		}
		if arg < 0 || len(call.Args) <= arg {
			return true
		}
		sites = append(sites, execSite{pos: call.Pos(), programs: stringValues(fn, call.Args[arg])})
		return true
	})
	return sites
}

func stringValues(fn *ast.FuncDecl, e ast.Expr) []string {
	if s, ok := stringLit(e); ok {
		return []string{s}
	}
	id, ok := e.(*ast.Ident)
	if !ok {
		return nil
	}
	var out []string
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.RangeStmt:
			if v, ok := n.Value.(*ast.Ident); ok && v.Name == id.Name {
				if lit, ok := n.X.(*ast.CompositeLit); ok {
					for _, el := range lit.Elts {
						if s, ok := stringLit(el); ok {
							out = append(out, s)
						}
					}
				}
			}
		case *ast.AssignStmt:
			for i, l := range n.Lhs {
				if v, ok := l.(*ast.Ident); ok && v.Name == id.Name && i < len(n.Rhs) {
					if s, ok := stringLit(n.Rhs[i]); ok {
						out = append(out, s)
					}
				}
			}
		}
		return true
	})
	return out
}

func stringLit(e ast.Expr) (string, bool) {
	b, ok := e.(*ast.BasicLit)
	if !ok || b.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(b.Value)
	return s, err == nil
}

func anySuffix(lits map[string]bool, suffix string) bool {
	for l := range lits {
		if strings.HasSuffix(l, suffix) {
			return true
		}
	}
	return false
}
