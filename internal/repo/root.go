// Package repo finds the repository's root from a test's working directory.
//
// Tests are built with -trimpath (make test sets it, so that a clone in a new directory
// reuses the build cache), which leaves runtime.Caller no directory to start from. A
// test runs in its package's directory, so the root is the nearest directory above it
// holding this module's go.mod.
package repo

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const module = "module github.com/runwhere-ai/litepool"

// Root is the repository root above the working directory; it panics outside the
// repository, where no test of this module runs.
func Root() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	root, err := rootAbove(dir)
	if err != nil {
		panic(err)
	}
	return root
}

func rootAbove(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if isModuleRoot(d) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of %s above %s", strings.TrimPrefix(module, "module "), dir)
		}
	}
}

func isModuleRoot(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(data), "\n")
	return strings.TrimSpace(first) == module
}
