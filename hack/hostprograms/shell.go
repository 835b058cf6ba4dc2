package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// builtins are bash's builtins and keywords: no program is run.
var builtins = set("echo", "printf", "cd", "set", "local", "export", "declare", "readonly", "unset",
	"return", "exit", "source", ".", "read", "shift", "trap", "wait", "kill", "true", "false",
	"test", "[", "eval", "type", "hash", "getopts", "pushd", "popd", "let", "mapfile", "readarray",
	"break", "continue", "ulimit", "umask", "builtin", "jobs", "disown", ":", "shopt", "caller", "pwd", "times")

// wrappers run the program named by their first argument that is not an option.
// builtinWrappers are the wrappers bash runs itself (`exec 9>file` alone runs nothing).
var builtinWrappers = set("exec", "command")

var wrappers = set("exec", "command", "env", "nohup", "sudo", "nice", "xargs", "timeout", "setsid")

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// scripts checks every shell script of the repository: *.sh and .ci/run.
func (c *checker) scripts() error {
	var files []string
	err := filepath.WalkDir(c.root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "_output" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".sh") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	files = append(files, filepath.Join(c.root, ".ci", "run"))
	sort.Strings(files)
	if err := c.collectFuncs(files); err != nil {
		return err
	}
	for _, f := range files {
		if err := c.script(f); err != nil {
			return err
		}
	}
	return nil
}

func (c *checker) parseScript(file string) (*syntax.File, string, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, "", err
	}
	rel, _ := filepath.Rel(c.root, file)
	prog, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(string(src)), rel)
	return prog, rel, err
}

// collectFuncs notes every function the scripts define: a script may call one that
// another (bench/lib.sh) defines and it sources.
func (c *checker) collectFuncs(files []string) error {
	c.shellFuncs = map[string]bool{}
	for _, f := range files {
		prog, _, err := c.parseScript(f)
		if err != nil {
			return err
		}
		syntax.Walk(prog, func(n syntax.Node) bool {
			if fn, ok := n.(*syntax.FuncDecl); ok {
				c.shellFuncs[fn.Name.Value] = true
			}
			return true
		})
	}
	return nil
}

func (c *checker) script(file string) error {
	prog, rel, err := c.parseScript(file)
	if err != nil {
		return err
	}
	w := newShellWalker(c, rel, prog)
	w.stmts(prog.Stmts, installed{})
	// A function no path reached may be called by a name built at run time (hack/verify.sh:
	// "verify_$1") or by a script that sources this one: it starts with the base image.
	for _, name := range w.funcNames() {
		if !w.reached[name] {
			w.call(name, installed{})
		}
	}
	return nil
}

// shellWalker follows one script's statements in order, with the packages installed on
// the path so far.
type shellWalker struct {
	c       *checker
	file    string
	funcs   map[string]*syntax.FuncDecl
	reached map[string]bool
	active  map[string]bool
	// vars are the literal first words a variable was ever given ("go" for
	// cg="go run ...", "iptables" for "for ipt in iptables ip6tables").
	vars map[string][]string
	// fixedSite names every call's site (a Makefile recipe line) when set.
	fixedSite string
}

func newShellWalker(c *checker, file string, prog *syntax.File) *shellWalker {
	w := &shellWalker{c: c, file: file, funcs: map[string]*syntax.FuncDecl{}, reached: map[string]bool{},
		active: map[string]bool{}, vars: map[string][]string{}}
	syntax.Walk(prog, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.FuncDecl:
			w.funcs[n.Name.Value] = n
			w.noteInstaller(n)
		case *syntax.Assign:
			w.assign(n)
		case *syntax.ForClause:
			if it, ok := n.Loop.(*syntax.WordIter); ok {
				for _, item := range it.Items {
					if s, ok := literal(item); ok {
						w.vars[it.Name.Value] = append(w.vars[it.Name.Value], strings.Fields(s)...)
					}
				}
			}
		}
		return true
	})
	return w
}

func (w *shellWalker) funcNames() []string {
	names := make([]string, 0, len(w.funcs))
	for n := range w.funcs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// noteInstaller records that an installer the table names exists and runs apt-get install.
func (w *shellWalker) noteInstaller(f *syntax.FuncDecl) {
	key := w.file + ":" + f.Name.Value
	if _, ok := w.c.table.installers[key]; !ok {
		return
	}
	syntax.Walk(f.Body, func(n syntax.Node) bool {
		if call, ok := n.(*syntax.CallExpr); ok && len(call.Args) > 1 {
			if a, _ := literal(call.Args[0]); a == "apt-get" {
				for _, arg := range call.Args[1:] {
					if s, _ := literal(arg); s == "install" {
						w.c.installersFound[key] = true
					}
				}
			}
		}
		return true
	})
}

func (w *shellWalker) assign(a *syntax.Assign) {
	if a.Name == nil {
		return
	}
	switch {
	case a.Value != nil:
		if s, ok := literal(a.Value); ok && len(strings.Fields(s)) > 0 {
			w.vars[a.Name.Value] = append(w.vars[a.Name.Value], strings.Fields(s)[0])
		}
	case a.Array != nil && len(a.Array.Elems) > 0 && a.Array.Elems[0].Value != nil:
		if s, ok := literal(a.Array.Elems[0].Value); ok {
			w.vars[a.Name.Value] = append(w.vars[a.Name.Value], s)
		}
	}
}

func (w *shellWalker) site(n syntax.Node) string {
	if w.fixedSite != "" {
		return w.fixedSite
	}
	return fmt.Sprintf("%s:%d", w.file, n.Pos().Line())
}

func (w *shellWalker) stmts(list []*syntax.Stmt, have installed) installed {
	for _, s := range list {
		have = w.stmt(s, have)
	}
	return have
}

func (w *shellWalker) stmt(s *syntax.Stmt, have installed) installed {
	for _, r := range s.Redirs {
		w.substitutions(r, have)
	}
	if s.Cmd == nil {
		return have
	}
	return w.command(s.Cmd, have)
}

func (w *shellWalker) command(cmd syntax.Command, have installed) installed {
	switch c := cmd.(type) {
	case *syntax.CallExpr:
		return w.callExpr(c, have)
	case *syntax.BinaryCmd:
		// The left side always runs; what the right side installs may not have happened.
		after := w.stmt(c.X, have)
		w.stmt(c.Y, after)
		return after
	case *syntax.IfClause:
		return w.ifClause(c, have)
	case *syntax.CaseClause:
		return w.caseClause(c, have)
	case *syntax.Block:
		return w.stmts(c.Stmts, have)
	case *syntax.Subshell:
		return w.stmts(c.Stmts, have)
	case *syntax.ForClause:
		w.substitutions(c.Loop, have)
		w.stmts(c.Do, have)
	case *syntax.WhileClause:
		w.stmts(c.Do, w.stmts(c.Cond, have))
	case *syntax.DeclClause, *syntax.TestClause, *syntax.ArithmCmd, *syntax.LetClause:
		w.substitutions(c, have)
	case *syntax.TimeClause:
		return w.stmt(c.Stmt, have)
	}
	return have
}

// substitutions walks the commands inside $(...) and <(...) of a node.
func (w *shellWalker) substitutions(n syntax.Node, have installed) {
	syntax.Walk(n, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CmdSubst:
			w.stmts(n.Stmts, have)
			return false
		case *syntax.ProcSubst:
			w.stmts(n.Stmts, have)
			return false
		}
		return true
	})
}

func (w *shellWalker) ifClause(c *syntax.IfClause, have installed) installed {
	if c == nil {
		return have
	}
	if len(c.Cond) == 0 { // else
		return w.stmts(c.Then, have)
	}
	cond := w.stmts(c.Cond, have)
	then := w.stmts(c.Then, cond)
	otherwise := cond
	// "if ! command -v X; then (install X); fi": past the if, X is there either way.
	if prog := missingCheck(c.Cond); prog != "" {
		if src := w.c.table.from[prog]; strings.HasPrefix(src, "apt:") {
			otherwise = cond.with(strings.TrimPrefix(src, "apt:"))
		}
	}
	if c.Else != nil {
		otherwise = w.ifClause(c.Else, otherwise)
	}
	return both(then, otherwise)
}

// missingCheck returns X for a condition "! command -v X".
func missingCheck(cond []*syntax.Stmt) string {
	if len(cond) != 1 || !cond[0].Negated {
		return ""
	}
	call, ok := cond[0].Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) < 3 {
		return ""
	}
	a, _ := literal(call.Args[0])
	b, _ := literal(call.Args[1])
	x, _ := literal(call.Args[2])
	if a == "command" && b == "-v" {
		return x
	}
	return ""
}

func (w *shellWalker) caseClause(c *syntax.CaseClause, have installed) installed {
	w.substitutions(c.Word, have)
	var out installed
	fallsThrough := true
	for _, item := range c.Items {
		after := w.stmts(item.Stmts, have)
		if out == nil {
			out = after
		} else {
			out = both(out, after)
		}
		for _, p := range item.Patterns {
			if s, _ := literal(p); s == "*" {
				fallsThrough = false
			}
		}
	}
	if out == nil || fallsThrough {
		if out == nil {
			return have
		}
		return both(out, have)
	}
	return out
}

func (w *shellWalker) callExpr(c *syntax.CallExpr, have installed) installed {
	w.substitutions(c, have)
	args := c.Args
	for len(args) > 0 {
		names, resolved := w.resolve(args[0])
		if !resolved {
			w.c.report = append(w.c.report, fmt.Sprintf("%s: not resolved (a program named at run time, or the project's own)", w.site(c)))
			return have
		}
		if len(names) == 0 { // a path of the project's
			return have
		}
		name := names[0]
		switch {
		case name == "command" && len(args) > 1 && isFlag(args[1], "-v"):
			return have // asks whether a program is there; runs nothing
		case wrappers[name]:
			if !builtinWrappers[name] {
				w.c.use(w.site(c), name, have)
			}
			args = skipOptions(args[1:], name)
			continue
		case builtins[name]:
			return have
		case w.funcs[name] != nil:
			return w.call(name, have)
		case w.c.shellFuncs[name]:
			return have // a function of a script this one sources, checked with that script
		}
		for _, n := range names {
			w.c.use(w.site(c), n, have)
		}
		if name == "apt-get" {
			return have.with(aptInstalls(args[1:])...)
		}
		return have
	}
	return have
}

// call follows a call of the script's function name; a call of an installer of the
// table installs its packages.
func (w *shellWalker) call(name string, have installed) installed {
	w.reached[name] = true
	if !w.active[name] {
		w.active[name] = true
		have = w.stmt(w.funcs[name].Body, have)
		w.active[name] = false
	}
	return have.with(w.c.table.installers[w.file+":"+name]...)
}

// resolve returns the programs a command word may name: nil and true for a path of the
// project's, false when it cannot be told.
func (w *shellWalker) resolve(word *syntax.Word) ([]string, bool) {
	if s, ok := literal(word); ok {
		if strings.Contains(s, "/") && !strings.HasPrefix(s, "/") {
			return nil, true // hack/cluster.sh, ./bin/x: the project's own
		}
		return []string{s}, true
	}
	// "$ipt" or "${ctr_[@]}": the first word the variable was given, unless it names a
	// path under the project's root or output ("$root/hack/x.sh", "$bin/kubelet").
	if pe, ok := firstParam(word); ok {
		if len(word.Parts) > 1 || w.vars[pe] == nil {
			return nil, len(word.Parts) > 1
		}
		return w.vars[pe], true
	}
	return nil, false
}

func firstParam(word *syntax.Word) (string, bool) {
	part := word.Parts[0]
	if dq, ok := part.(*syntax.DblQuoted); ok && len(dq.Parts) > 0 {
		if len(dq.Parts) > 1 {
			return "", false
		}
		part = dq.Parts[0]
	}
	pe, ok := part.(*syntax.ParamExp)
	if !ok || pe.Param == nil {
		return "", false
	}
	return pe.Param.Value, true
}

// literal is a word's text when it has no expansion.
func literal(word *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, p := range word.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(lit.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

func isFlag(word *syntax.Word, flag string) bool {
	s, _ := literal(word)
	return s == flag
}

// skipOptions drops a wrapper's options (and timeout's duration, env's assignments).
func skipOptions(args []*syntax.Word, wrapper string) []*syntax.Word {
	for len(args) > 0 {
		s, ok := literal(args[0])
		if !ok || !isOption(s, wrapper) {
			break
		}
		args = args[1:]
	}
	return args
}

func isOption(s, wrapper string) bool {
	duration := wrapper == "timeout" && s != "" && s[0] >= '0' && s[0] <= '9'
	return strings.HasPrefix(s, "-") || strings.Contains(s, "=") || duration
}

// aptInstalls returns the literal packages of "apt-get install ...".
func aptInstalls(args []*syntax.Word) []string {
	var pkgs []string
	install := false
	for _, a := range args {
		s, ok := literal(a)
		switch {
		case !ok:
		case s == "install":
			install = true
		case install && !strings.HasPrefix(s, "-"):
			pkgs = append(pkgs, s)
		}
	}
	return pkgs
}
