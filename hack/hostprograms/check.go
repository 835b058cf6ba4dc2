package main

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// checker holds what the scans found.
type checker struct {
	root     string
	base     map[string]bool
	table    *table
	problems []string
	report   []string
	// installersFound are the shell installers of the table that exist, by "SCRIPT:FUNCTION".
	installersFound map[string]bool
	// shellFuncs are the functions every script defines.
	shellFuncs map[string]bool
}

// installed is the set of Debian packages installed on one path through a script, on
// top of the base image.
type installed map[string]bool

func (s installed) with(pkgs ...string) installed {
	out := make(installed, len(s)+len(pkgs))
	for p := range s {
		out[p] = true
	}
	for _, p := range pkgs {
		out[p] = true
	}
	return out
}

// both is what two paths that join again have in common.
func both(a, b installed) installed {
	out := installed{}
	for p := range a {
		if b[p] {
			out[p] = true
		}
	}
	return out
}

// use checks one call of program at site with the packages the path has installed.
func (c *checker) use(site, program string, have installed) {
	program = path.Base(program)
	src, ok := c.table.from[program]
	c.report = append(c.report, fmt.Sprintf("%s: %s (%s)", site, program, orUnknown(src)))
	switch {
	case !ok:
		c.problems = append(c.problems, fmt.Sprintf("%s: runs %q, which hack/host-programs.txt does not list: add 'program %s apt PACKAGE' with the Debian package that ships it (dpkg -S $(command -v %s))",
			site, program, program, program))
	case src == "go":
	default:
		pkg := strings.TrimPrefix(src, "apt:")
		if c.base[pkg] || have[pkg] {
			return
		}
		c.problems = append(c.problems, fmt.Sprintf("%s: runs %s (Debian package %s), which the base image lacks and no installer of the project has installed on this path before it%s",
			site, program, pkg, c.installersOf(pkg)))
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "not in hack/host-programs.txt"
	}
	return s
}

// installersOf names the installers that install pkg, for the problem's message.
func (c *checker) installersOf(pkg string) string {
	var names []string
	for name, pkgs := range c.table.installers {
		for _, p := range pkgs {
			if p == pkg {
				names = append(names, name)
			}
		}
	}
	if len(names) == 0 {
		return fmt.Sprintf(" (no installer of the project installs %s: add one, and an 'installer' line to hack/host-programs.txt)", pkg)
	}
	sort.Strings(names)
	return fmt.Sprintf(" (call %s first)", strings.Join(names, " or "))
}

// checkInstallers reports installers in the table that no scan found, so that the table
// cannot name an installer that does not exist or installs nothing.
func (c *checker) checkInstallers() {
	for name := range c.table.installers {
		if !c.installersFound[name] {
			c.problems = append(c.problems, fmt.Sprintf("hack/host-programs.txt: installer %s is not a function that runs apt-get install", name))
		}
	}
	for name, script := range c.table.goInstallers {
		if !c.installersFound[name] {
			c.problems = append(c.problems, fmt.Sprintf("hack/host-programs.txt: goinstaller %s is not a Go function that runs %s", name, script))
		}
	}
}
