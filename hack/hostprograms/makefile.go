package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

var (
	makeVar   = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\s*(?:\?|:|\+)?=\s*(.*)$`)
	makeRef   = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	makeShell = regexp.MustCompile(`\$\(shell ([^)]*)\)`)
	makeAuto  = regexp.MustCompile(`\$[@<^*?]`)
	// makeFunc is a call of one of GNU make's text functions, holding no other call: its
	// text is make's, not the shell's, and becomes a word of the recipe.
	makeFunc   = regexp.MustCompile(`\$\((?:addprefix|addsuffix|filter|filter-out|patsubst|subst|sort|strip|wildcard|word|words|firstword|lastword|dir|notdir|basename|suffix|join) [^()]*\)`)
	lineEscape = strings.NewReplacer("\\\n", " ")
)

// makefile checks the Makefile's recipes and $(shell ...) calls. Each recipe line runs in
// a shell of its own, so each starts with the base image.
func (c *checker) makefile() error {
	b, err := os.ReadFile(filepath.Join(c.root, "Makefile"))
	if err != nil {
		return err
	}
	lines := strings.Split(lineEscape.Replace(string(b)), "\n")
	vars := map[string]string{}
	for _, l := range lines {
		if m := makeVar.FindStringSubmatch(l); m != nil && !strings.HasPrefix(l, "\t") {
			vars[m[1]] = m[2]
		}
	}
	for i, l := range lines {
		site := fmt.Sprintf("Makefile:%d", i+1)
		for _, m := range makeShell.FindAllStringSubmatch(l, -1) {
			c.shellLine(site, m[1])
		}
		if strings.HasPrefix(l, "\t") {
			c.shellLine(site, expandMake(strings.TrimLeft(l, "\t@-"), vars))
		}
	}
	return nil
}

// expandMake replaces $(VAR) with the Makefile's value (three levels deep), other make
// references, $(shell ...) and make's text functions with a placeholder, and $$ with $.
func expandMake(s string, vars map[string]string) string {
	for i := 0; i < 3; i++ {
		s = makeRef.ReplaceAllStringFunc(s, func(ref string) string {
			if v, ok := vars[makeRef.FindStringSubmatch(ref)[1]]; ok {
				return v
			}
			return "MAKEVAR"
		})
	}
	s = makeShell.ReplaceAllString(s, "MAKEVAR")
	for makeFunc.MatchString(s) { // the innermost calls first
		s = makeFunc.ReplaceAllString(s, "MAKEVAR")
	}
	s = makeAuto.ReplaceAllString(s, "MAKEVAR")
	return strings.ReplaceAll(s, "$$", "$")
}

func (c *checker) shellLine(site, line string) {
	prog, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(line), site)
	if err != nil {
		c.problems = append(c.problems, fmt.Sprintf("%s: cannot read the recipe as shell: %v", site, err))
		return
	}
	w := newShellWalker(c, site, prog)
	w.fixedSite = site
	w.stmts(prog.Stmts, installed{})
}
