package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// table is hack/host-programs.txt: where each program comes from, and the project's
// installers.
type table struct {
	// from maps a program to its source: "apt:PKG" or "go" (the Go toolchain).
	from map[string]string
	// installers maps a shell function, "SCRIPT:FUNCTION", to the Debian packages it
	// installs.
	installers map[string][]string
	// goInstallers maps a Go function, "PKGNAME.FUNC" as its callers spell it, to the
	// shell installer it runs.
	goInstallers map[string]string
}

func readTable(path string) (*table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t := &table{from: map[string]string{}, installers: map[string][]string{}, goInstallers: map[string]string{}}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if err := t.add(f); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	return t, sc.Err()
}

func (t *table) add(f []string) error {
	switch {
	case f[0] == "program" && len(f) == 4 && f[2] == "apt":
		t.from[f[1]] = "apt:" + f[3]
	case f[0] == "program" && len(f) == 3 && f[2] == "go":
		t.from[f[1]] = "go"
	case f[0] == "installer" && len(f) >= 3 && strings.Contains(f[1], ":"):
		t.installers[f[1]] = f[2:]
	case f[0] == "goinstaller" && len(f) == 3 && strings.Contains(f[2], ":"):
		t.goInstallers[f[1]] = f[2]
	default:
		return fmt.Errorf("want 'program NAME apt PACKAGE', 'program NAME go', 'installer SCRIPT:FUNCTION PACKAGE...' or 'goinstaller PKG.FUNC SCRIPT:FUNCTION', got %q", strings.Join(f, " "))
	}
	return nil
}

// readBase reads the base image's list: "MANAGER<TAB>NAME<TAB>VERSION" a line; only
// Debian's packages (apt) count here.
func readBase(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the base image's package list: %w (it lives in shared/ beside the repository; -base names another)", err)
	}
	base := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == "apt" {
			base[f[1]] = true
		}
	}
	if len(base) == 0 {
		return nil, fmt.Errorf("%s lists no apt package", path)
	}
	return base, nil
}
