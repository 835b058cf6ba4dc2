// Command hostprograms fails when a script, the Makefile or a Go file of litepool runs a
// program that a fresh machine does not have at that point: a program must come from a
// package of the base image (hack/base-image-packages.txt, a copy of ../shared/'s), from the Go toolchain, or
// from a package the project's own installer put there earlier on the same path.
//
// A fresh machine is where a green run on our own machines lies: a program installed by
// hand long ago hides a missing install step until a new contributor (or a new CI machine)
// meets it. hack/host-programs.txt says which package ships each program and which
// installers the project has; this command reads every script and test and checks each
// call against it, in order.
//
//	go run ./hack/hostprograms [-root DIR] [-base FILE] [-v]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	base := flag.String("base", "", "the base image's package list (default ROOT/hack/base-image-packages.txt)")
	verbose := flag.Bool("v", false, "also list every call site checked and the ones that could not be resolved")
	flag.Parse()
	if *base == "" {
		*base = filepath.Join(*root, "hack", "base-image-packages.txt")
	}
	problems, report, err := run(*root, *base)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostprograms:", err)
		os.Exit(2)
	}
	if *verbose {
		for _, l := range report {
			fmt.Println(l)
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, p)
		}
		fmt.Fprintf(os.Stderr, "hostprograms: %d program(s) a fresh machine would not have (base image: %s; table: hack/host-programs.txt)\n", len(problems), *base)
		os.Exit(1)
	}
	fmt.Println("hostprograms: every program run by the scripts, the Makefile and the tests is in the base image or installed by the project before its use")
}

// run checks the tree at root and returns the problems found and, for -v, every site.
func run(root, basePath string) (problems, report []string, err error) {
	base, err := readBase(basePath)
	if err != nil {
		return nil, nil, err
	}
	table, err := readTable(filepath.Join(root, "hack", "host-programs.txt"))
	if err != nil {
		return nil, nil, err
	}
	c := &checker{root: root, base: base, table: table, installersFound: map[string]bool{}}
	if err := c.scripts(); err != nil {
		return nil, nil, err
	}
	if err := c.makefile(); err != nil {
		return nil, nil, err
	}
	if err := c.goFiles(); err != nil {
		return nil, nil, err
	}
	c.checkInstallers()
	// A site walked on several paths is reported once.
	return unique(c.problems), unique(c.report), nil
}

func unique(lines []string) []string {
	sort.Strings(lines)
	return slices.Compact(lines)
}
