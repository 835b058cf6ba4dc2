package krew

import (
	"archive/tar"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stage writes files (name → content; a name ending in * is executable) into a new
// directory.
func stage(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, "*") {
			name, mode = strings.TrimSuffix(name, "*"), 0o755
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), mode))
	}
	return dir
}

func pack(t *testing.T, archive string, files map[string]string) string {
	t.Helper()
	require.NoError(t, Pack(archive, stage(t, files)))
	return archive
}

func TestPackIsReproducibleAndListable(t *testing.T) {
	out := t.TempDir()
	files := map[string]string{"kubectl-litepool*": "binary", "LICENSE": "Apache", "kubectl_complete-litepool*": "#!/bin/sh"}
	for _, ext := range []string{".tar.gz", ".zip"} {
		a := pack(t, filepath.Join(out, "a"+ext), files)
		b := pack(t, filepath.Join(out, "b"+ext), files)
		sa, err := Sum(a)
		require.NoError(t, err)
		sb, err := Sum(b)
		require.NoError(t, err)
		assert.Equal(t, sa, sb, "same files, same archive bytes (%s)", ext)

		entries, err := List(a)
		require.NoError(t, err)
		assert.Equal(t, map[string]Entry{
			"LICENSE":                   {Name: "LICENSE", Mode: 0o644},
			"kubectl-litepool":          {Name: "kubectl-litepool", Mode: 0o755},
			"kubectl_complete-litepool": {Name: "kubectl_complete-litepool", Mode: 0o755},
		}, entries, ext)
	}
}

func TestVerifyArchive(t *testing.T) {
	out := t.TempDir()
	good := pack(t, filepath.Join(out, "good.tar.gz"), map[string]string{"kubectl-litepool*": "bin", "LICENSE": "text", "kubectl_complete-litepool*": "sh"})
	noLicense := pack(t, filepath.Join(out, "nolicense.tar.gz"), map[string]string{"kubectl-litepool*": "bin"})
	notExec := pack(t, filepath.Join(out, "notexec.tar.gz"), map[string]string{"kubectl-litepool": "bin", "LICENSE": "text"})
	noScript := pack(t, filepath.Join(out, "noscript.tar.gz"), map[string]string{"kubectl-litepool*": "bin", "LICENSE": "text"})
	winNoLicense := pack(t, filepath.Join(out, "win.zip"), map[string]string{"kubectl-litepool.exe": "bin"})
	sum := func(f string) string { s, err := Sum(f); require.NoError(t, err); return s }

	cases := []struct {
		name, archive, sha, bin string
		also                    []string
		err                     string
	}{
		{name: "good", archive: good, sha: sum(good), bin: "kubectl-litepool", also: []string{"kubectl_complete-litepool"}},
		{name: "sha256 of another archive", archive: good, sha: sum(noLicense), bin: "kubectl-litepool",
			err: "good.tar.gz: sha256 is " + sum(good) + " but the manifest says " + sum(noLicense)},
		{name: "missing LICENSE", archive: noLicense, sha: sum(noLicense), bin: "kubectl-litepool",
			err: "nolicense.tar.gz: LICENSE is not in the archive (it has kubectl-litepool)"},
		{name: "missing LICENSE in a zip", archive: winNoLicense, sha: sum(winNoLicense), bin: "kubectl-litepool.exe",
			err: "win.zip: LICENSE is not in the archive (it has kubectl-litepool.exe)"},
		{name: "bin missing", archive: good, sha: sum(good), bin: "kubectl-pools",
			err: `good.tar.gz: bin "kubectl-pools" is not in the archive (it has LICENSE, kubectl-litepool, kubectl_complete-litepool)`},
		{name: "bin not executable", archive: notExec, sha: sum(notExec), bin: "kubectl-litepool",
			err: `notexec.tar.gz: bin "kubectl-litepool" is not executable (mode -rw-r--r--)`},
		{name: "completion script missing", archive: noScript, sha: sum(noScript), bin: "kubectl-litepool", also: []string{"kubectl_complete-litepool"},
			err: "noscript.tar.gz: kubectl_complete-litepool is not in the archive (it has LICENSE, kubectl-litepool)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := VerifyArchive(&Platform{Sha256: tc.sha, Bin: tc.bin}, tc.archive, tc.also...)
			if tc.err == "" {
				assert.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tc.err)
		})
	}
}

func TestListRefusesEntriesOutsideTheInstallDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "evil.tar.gz")
	f, err := os.Create(file)
	require.NoError(t, err)
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "../kubectl-litepool", Mode: 0o755, Size: 1, Typeflag: tar.TypeReg}))
	_, err = tw.Write([]byte("x"))
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	require.NoError(t, f.Close())
	_, err = List(file)
	assert.EqualError(t, err, file+`: entry "../kubectl-litepool" would be written outside the install directory`)
}

func TestInstalledAppliesFileOperations(t *testing.T) {
	entries := map[string]Entry{"dist/kubectl-litepool": {Name: "dist/kubectl-litepool"}, "LICENSE": {Name: "LICENSE"}, "README.md": {Name: "README.md"}}
	got := Installed(&Platform{Files: []FileOperation{{From: "dist/*", To: "."}, {From: "LICENSE", To: "."}}}, entries)
	assert.Equal(t, map[string]Entry{"kubectl-litepool": {Name: "kubectl-litepool"}, "LICENSE": {Name: "LICENSE"}}, got)
	assert.Equal(t, entries, Installed(&Platform{}, entries), "no files: everything is installed")
}

// TestRenderTheTemplate renders krew/litepool.yaml from archives of every release
// platform and checks the result by every rule, against the archives.
func TestRenderTheTemplate(t *testing.T) {
	template, err := os.ReadFile("litepool.yaml")
	require.NoError(t, err)
	dir := t.TempDir()
	for _, k := range ReleasePlatforms {
		bin, ext := "kubectl-litepool", ".tar.gz"
		if k.OS == "windows" {
			bin, ext = "kubectl-litepool.exe", ".zip"
		}
		pack(t, filepath.Join(dir, "kubectl-litepool_v1.2.3_"+k.OS+"_"+k.Arch+ext),
			map[string]string{bin + "*": "binary for " + k.String(), "LICENSE": "Apache"})
	}
	r, err := Render(template, "v1.2.3", dir, false)
	require.NoError(t, err)
	assert.Empty(t, r.Omitted)
	assert.True(t, strings.HasPrefix(string(r.Manifest), "# krew plugin manifest for litepool v1.2.3, rendered by hack/dist.sh from krew/litepool.yaml.\n"))
	assert.NotContains(t, string(r.Manifest), "@VERSION@")

	file := filepath.Join(t.TempDir(), "litepool.yaml")
	require.NoError(t, os.WriteFile(file, r.Manifest, 0o644))
	p, err := ValidateFile(file)
	require.NoError(t, err)
	assert.Equal(t, "v1.2.3", p.Spec.Version)
	assert.NoError(t, RequirePlatforms(p, ReleasePlatforms))
	assert.Len(t, p.Spec.Platforms, len(ReleasePlatforms))
	assert.Empty(t, Lint(p))
	assert.NoError(t, VerifyArchives(p, dir, nil))
	assert.Equal(t, "https://github.com/runwhere-ai/litepool/releases/download/v1.2.3/kubectl-litepool_v1.2.3_darwin_arm64.tar.gz",
		PlatformFor(p, OSArch{"darwin", "arm64"}).URI)
	assert.Contains(t, p.Spec.Caveats, `ln -sf "$d/store/litepool/v1.2.3/kubectl_complete-litepool" "$d/bin/"`)

	// Without an archive a full render fails; a partial one leaves the platform out.
	require.NoError(t, os.Remove(filepath.Join(dir, "kubectl-litepool_v1.2.3_windows_arm64.zip")))
	_, err = Render(template, "v1.2.3", dir, false)
	assert.ErrorContains(t, err, "platform [windows/arm64]: open "+filepath.Join(dir, "kubectl-litepool_v1.2.3_windows_arm64.zip")+": no such file or directory")
	r, err = Render(template, "v1.2.3", dir, true)
	require.NoError(t, err)
	assert.Equal(t, []OSArch{{"windows", "arm64"}}, r.Omitted)
	assert.Len(t, r.Plugin.Spec.Platforms, len(ReleasePlatforms)-1)

	_, err = Render(template, "0.1.0-dev", dir, true)
	assert.EqualError(t, err, `spec.version "0.1.0-dev" must start with v, e.g. v0.1.0-dev`)
}
