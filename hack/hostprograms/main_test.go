package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testTable = `
program apt-get   apt apt
program dpkg-query apt dpkg
program kubectl   apt kubectl
program make      apt make
program go        go
program iptables-save apt iptables
program shellcheck apt shellcheck
installer hack/node.sh:packages iptables
goinstaller framework.InstallNodePackages hack/node.sh:packages
`

const testBase = "apt\tapt\t2.6.1\napt\tdpkg\t1.21\napt\tkubectl\t1:528\napt\tmake\t4.3\n"

const nodeScript = `#!/usr/bin/env bash
packages() {
  dpkg-query -W iptables || apt-get install -y iptables
}
snapshot() { iptables-save; }
cmd=$1
case "$cmd" in
  packages) packages ;;
  up) packages; snapshot ;;
  %s
esac
`

const framework = `package framework

import "os/exec"

func InstallNodePackages() error { return exec.Command("hack/node.sh", "packages").Run() }
`

// tree writes a repository with the given files (and the table, the base list, an empty
// Makefile and .ci/run) and returns its root and the base list's path.
func tree(t *testing.T, files map[string]string) (string, string) {
	t.Helper()
	root := t.TempDir()
	files["hack/host-programs.txt"] = testTable
	files["Makefile"] = "test:\n\tgo test ./...\n\tkubectl version --client\n"
	files[".ci/run"] = "#!/usr/bin/env bash\nmake test\n"
	if _, ok := files["test/framework/framework.go"]; !ok {
		files["test/framework/framework.go"] = framework
	}
	if _, ok := files["hack/node.sh"]; !ok {
		files["hack/node.sh"] = strings.Replace(nodeScript, "%s", "", 1)
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	base := filepath.Join(t.TempDir(), "base.txt")
	require.NoError(t, os.WriteFile(base, []byte(testBase), 0o644))
	return root, base
}

func check(t *testing.T, files map[string]string) []string {
	t.Helper()
	root, base := tree(t, files)
	problems, _, err := run(root, base)
	require.NoError(t, err)
	return problems
}

func TestScriptInstallsBeforeUse(t *testing.T) {
	ok := map[string]string{"hack/node.sh": strings.Replace(nodeScript, "%s", "", 1)}
	assert.Empty(t, check(t, ok), "every path installs iptables before iptables-save")

	// A new path that reads the host first, as test/e2e/realnode's TestMain did.
	early := map[string]string{"hack/node.sh": strings.Replace(nodeScript, "%s", "before) snapshot; packages ;;", 1)}
	problems := check(t, early)
	require.Len(t, problems, 1)
	assert.Contains(t, problems[0], "hack/node.sh:5: runs iptables-save (Debian package iptables)")
	assert.Contains(t, problems[0], "call hack/node.sh:packages first")
}

func TestPresenceCheckCountsAsInstall(t *testing.T) {
	script := `#!/usr/bin/env bash
lint() {
  if ! command -v shellcheck >/dev/null; then
    apt-get install -y shellcheck
  fi
  shellcheck -x a.sh
}
lint
`
	assert.Empty(t, check(t, map[string]string{"hack/lint.sh": script}))
	bare := "#!/usr/bin/env bash\nshellcheck -x a.sh\n"
	problems := check(t, map[string]string{"hack/lint.sh": bare})
	require.Len(t, problems, 1)
	assert.Contains(t, problems[0], "hack/lint.sh:2: runs shellcheck")
	assert.Contains(t, problems[0], "no installer of the project installs shellcheck")
}

func TestGoTestMainInstallsFirst(t *testing.T) {
	node := strings.Replace(nodeScript, "%s", "", 1)
	test := `package node

import (
	"os"
	"os/exec"
	"testing"

	"example/test/framework"
)

func TestMain(m *testing.M) {
	%s
	for _, save := range []string{"iptables-save"} {
		_ = exec.Command(save).Run()
	}
	os.Exit(m.Run())
}
`
	installed := map[string]string{"hack/node.sh": node,
		"test/node/main_test.go": strings.Replace(test, "%s", "_ = framework.InstallNodePackages()", 1)}
	assert.Empty(t, check(t, installed))

	late := map[string]string{"hack/node.sh": node,
		"test/node/main_test.go": strings.Replace(test, "%s", "_ = os.Getenv(\"X\")\n\t_ = framework.InstallNodePackages()", 1)}
	problems := check(t, late)
	require.Len(t, problems, 1, "the installer must be TestMain's first statement")
	assert.Contains(t, problems[0], "test/node/main_test.go:15: runs iptables-save")
}

func TestUnknownProgramAndMissingInstaller(t *testing.T) {
	files := map[string]string{"hack/x.sh": "#!/usr/bin/env bash\nfrobnicate --all\n", "hack/node.sh": "#!/usr/bin/env bash\n",
		"test/framework/framework.go": "package framework\n"}
	problems := check(t, files)
	require.Len(t, problems, 3)
	assert.Contains(t, problems[0], `hack/host-programs.txt: goinstaller framework.InstallNodePackages is not a Go function that runs hack/node.sh:packages`)
	assert.Contains(t, problems[1], `hack/host-programs.txt: installer hack/node.sh:packages is not a function that runs apt-get install`)
	assert.Contains(t, problems[2], `hack/x.sh:2: runs "frobnicate", which hack/host-programs.txt does not list`)
}

func TestMakefileRecipes(t *testing.T) {
	files := map[string]string{"hack/node.sh": strings.Replace(nodeScript, "%s", "", 1)}
	root, base := tree(t, files)
	// make's text functions are make's, nested too; the program they feed is checked.
	mk := "SNAP := iptables-save -c\nPKGS = $(addprefix a/,b c) $(filter-out $(addprefix a/,b),$(shell true))\nsnap:\n\t@$(SNAP) > x\n\tfrob $(PKGS)\n"
	require.NoError(t, os.WriteFile(filepath.Join(root, "Makefile"), []byte(mk), 0o644))
	problems, _, err := run(root, base)
	require.NoError(t, err)
	require.Len(t, problems, 2, "%q", problems)
	assert.Contains(t, problems[0], "Makefile:4: runs iptables-save")
	assert.Contains(t, problems[1], `Makefile:5: runs "frob"`)
}

// The repository itself passes: what make verify runs.
func TestRepository(t *testing.T) {
	problems, report, err := run(filepath.Join("..", ".."), filepath.Join("..", "base-image-packages.txt"))
	require.NoError(t, err)
	assert.Empty(t, problems)
	assert.Greater(t, len(report), 100, "the scan saw the scripts, the Makefile and the tests")
}

// The repository's copy of the base image's list is the one the workplace publishes
// beside it, when it is there (CI's clean clone may sit elsewhere, so the copy is kept).
func TestBaseListMatchesPublished(t *testing.T) {
	published := filepath.Join("..", "..", "..", "shared", "base-image-packages.txt")
	want, err := os.ReadFile(published)
	if err != nil {
		t.Skipf("the published list is not beside this clone (%v): nothing to compare the copy with", err)
	}
	got, err := os.ReadFile(filepath.Join("..", "base-image-packages.txt"))
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "copy ../shared/base-image-packages.txt to hack/base-image-packages.txt")
}
