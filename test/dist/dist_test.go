// Package dist checks what `make dist` produces: it runs hack/dist.sh (for linux/amd64
// only, to spare five cross-compiles; the krew package's tests render all six platforms
// from stand-in archives) into a temporary directory, then checks the rendered krew
// manifest and the archive by krew's rules, and that broken copies of them fail.
package dist

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runwhere-ai/litepool/internal/repo"
	"github.com/runwhere-ai/litepool/krew"
)

const version = "v0.1.0-test.1"

var (
	root = repo.Root()
	// out holds hack/dist.sh's output for the whole package.
	out     string
	archive string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "litepool-dist-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out = filepath.Join(dir, "dist")
	archive = filepath.Join(out, "kubectl-litepool_"+version+"_linux_amd64.tar.gz")
	cmd := exec.Command(filepath.Join(root, "hack", "dist.sh"), version, out)
	cmd.Env = append(os.Environ(), "DIST_PLATFORMS=linux/amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "FATAL: hack/dist.sh: %v\n%s", err, b)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func TestRenderedManifestIsValidForKrew(t *testing.T) {
	p, err := krew.ValidateFile(filepath.Join(out, "litepool.yaml"))
	require.NoError(t, err)
	assert.Equal(t, "litepool", p.Metadata.Name)
	assert.Equal(t, version, p.Spec.Version)
	assert.Empty(t, krew.Lint(p))
	require.Len(t, p.Spec.Platforms, 1)
	pl := p.Spec.Platforms[0]
	assert.Equal(t, []krew.OSArch{{OS: "linux", Arch: "amd64"}}, krew.Matches(&pl))
	assert.Equal(t, "https://github.com/runwhere-ai/litepool/releases/download/"+version+"/kubectl-litepool_"+version+"_linux_amd64.tar.gz", pl.URI)
	assert.Equal(t, "kubectl-litepool", pl.Bin)
	assert.NoError(t, krew.VerifyArchives(p, out, krew.CompletionScripts))
}

func TestChecksumsFile(t *testing.T) {
	sum, err := krew.Sum(archive)
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(out, "checksums.txt"))
	require.NoError(t, err)
	assert.Equal(t, sum+"  "+filepath.Base(archive)+"\n", string(b))
}

// The archive holds exactly the plugin, the completion script and the license, with
// the modes krew keeps; the plugin reports the version it was built as.
func TestArchiveContents(t *testing.T) {
	entries, err := krew.List(archive)
	require.NoError(t, err)
	assert.Equal(t, map[string]krew.Entry{
		"LICENSE":                   {Name: "LICENSE", Mode: 0o644},
		"kubectl-litepool":          {Name: "kubectl-litepool", Mode: 0o755},
		"kubectl_complete-litepool": {Name: "kubectl_complete-litepool", Mode: 0o755},
	}, entries)
	files := unpack(t, archive)
	license, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	require.NoError(t, err)
	assert.Equal(t, string(license), files["LICENSE"])
	assert.Contains(t, files["LICENSE"], "Apache License\n                           Version 2.0, January 2004")
	script, err := os.ReadFile(filepath.Join(root, "cmd", "kubectl-litepool", "kubectl_complete-litepool"))
	require.NoError(t, err)
	assert.Equal(t, string(script), files["kubectl_complete-litepool"])

	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
		dir := t.TempDir()
		bin := filepath.Join(dir, "kubectl-litepool")
		require.NoError(t, os.WriteFile(bin, []byte(files["kubectl-litepool"]), 0o755))
		got, err := exec.Command(bin, "version", "-o", "json").Output()
		require.NoError(t, err)
		assert.Contains(t, string(got), `"version": "`+version+`"`)
		assert.Contains(t, string(got), `"platform": "linux/amd64"`)
	}
}

// The template lists the six release platforms, each pointing at the archive
// hack/dist.sh writes for it, with the right bin.
func TestTemplateMatchesWhatDistBuilds(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(root, "krew", "litepool.yaml"))
	require.NoError(t, err)
	p, err := krew.Parse(bytes.ReplaceAll(text, []byte(krew.VersionToken), []byte(version)))
	require.NoError(t, err)
	require.NoError(t, krew.RequirePlatforms(p, krew.ReleasePlatforms))
	assert.Len(t, p.Spec.Platforms, len(krew.ReleasePlatforms))
	for _, k := range krew.ReleasePlatforms {
		pl := krew.PlatformFor(p, k)
		bin, ext := "kubectl-litepool", "tar.gz"
		if k.OS == "windows" {
			bin, ext = "kubectl-litepool.exe", "zip"
		}
		assert.Equal(t, fmt.Sprintf("kubectl-litepool_%s_%s_%s.%s", version, k.OS, k.Arch, ext), filepath.Base(pl.URI), k.String())
		assert.Equal(t, bin, pl.Bin, k.String())
		assert.Equal(t, []krew.OSArch{k}, krew.Matches(pl), "one platform per selector")
	}
}

// Broken copies of the real manifest and archive fail, each with the rule it breaks,
// both through the krew package and through the command make dist runs.
func TestBrokenCopiesFail(t *testing.T) {
	manifest, err := os.ReadFile(filepath.Join(out, "litepool.yaml"))
	require.NoError(t, err)
	sum, err := krew.Sum(archive)
	require.NoError(t, err)

	t.Run("uppercase sha256", func(t *testing.T) {
		dir := copyDist(t, strings.Replace(string(manifest), sum, strings.ToUpper(sum), 1))
		err := verify(dir)
		assert.ErrorContains(t, err, `spec.platforms[0]: sha256 "`+strings.ToUpper(sum)+`" is not valid: it must be 64 lowercase hex digits`)
		assert.ErrorContains(t, disttoolVerify(t, dir), "is not valid: it must be 64 lowercase hex digits")
	})

	t.Run("duplicate platform", func(t *testing.T) {
		i := strings.Index(string(manifest), "    - selector:")
		require.Positive(t, i)
		dup := string(manifest) + string(manifest[i:])
		dir := copyDist(t, dup)
		err := verify(dir)
		assert.EqualError(t, err, "manifest "+filepath.Join(dir, "litepool.yaml")+": spec.platforms[0] and spec.platforms[1] both match linux/amd64: each os/arch must be matched by one platform only")
		assert.ErrorContains(t, disttoolVerify(t, dir), "both match linux/amd64")
	})

	t.Run("missing LICENSE", func(t *testing.T) {
		// The archive is repacked without LICENSE and the manifest carries its true
		// sha256, so only the missing file is wrong.
		dir := copyDist(t, "")
		stage := t.TempDir()
		for name, content := range unpack(t, archive) {
			if name != "LICENSE" {
				require.NoError(t, os.WriteFile(filepath.Join(stage, name), []byte(content), 0o755))
			}
		}
		repacked := filepath.Join(dir, filepath.Base(archive))
		require.NoError(t, krew.Pack(repacked, stage))
		newSum, err := krew.Sum(repacked)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "litepool.yaml"), []byte(strings.Replace(string(manifest), sum, newSum, 1)), 0o644))
		err = verify(dir)
		assert.EqualError(t, err, "spec.platforms[0]: "+filepath.Base(archive)+": LICENSE is not in the archive (it has kubectl-litepool, kubectl_complete-litepool)")
		assert.ErrorContains(t, disttoolVerify(t, dir), "LICENSE is not in the archive")
	})

	t.Run("sha256 of another build", func(t *testing.T) {
		other := strings.Repeat("ab", 32)
		dir := copyDist(t, strings.Replace(string(manifest), sum, other, 1))
		assert.EqualError(t, verify(dir), "spec.platforms[0]: "+filepath.Base(archive)+": sha256 is "+sum+" but the manifest says "+other)
	})

	t.Run("the real one passes", func(t *testing.T) {
		dir := copyDist(t, "")
		assert.NoError(t, verify(dir))
		assert.NoError(t, disttoolVerify(t, dir))
	})
}

func TestDistRefusesAVersionKrewCannotParse(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "hack", "dist.sh"), "6ef844c-dirty", dir)
	b, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Equal(t, "dist.sh: VERSION 6ef844c-dirty is not a semantic version starting with v (krew needs one): tag the release vX.Y.Z or run make dist VERSION=v0.1.0\n", string(b))
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, left, "nothing built")
}

// verify checks a dist directory as hack/dist.sh does.
func verify(dir string) error {
	p, err := krew.ValidateFile(filepath.Join(dir, "litepool.yaml"))
	if err != nil {
		return err
	}
	return krew.VerifyArchives(p, dir, krew.CompletionScripts)
}

// disttoolVerify runs the check make dist runs, and returns its failure with what it
// printed.
func disttoolVerify(t *testing.T, dir string) error {
	t.Helper()
	cmd := exec.Command("go", "run", "./hack/disttool", "verify", "-manifest", filepath.Join(dir, "litepool.yaml"), "-dir", dir)
	cmd.Dir = root
	b, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, b)
	}
	return nil
}

// copyDist copies the dist output into a new directory, with manifest as litepool.yaml
// when given.
func copyDist(t *testing.T, manifest string) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(out, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644))
	}
	if manifest != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "litepool.yaml"), []byte(manifest), 0o644))
	}
	return dir
}

// unpack reads a .tar.gz into memory: name → content.
func unpack(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		out[h.Name] = string(b)
	}
}

// The same sources give the same archive, byte for byte (fixed order, owner and times
// in the archive, -trimpath in the build), so a release can be rebuilt and checked
// against its published sha256.
func TestArchivesAreReproducible(t *testing.T) {
	again := filepath.Join(t.TempDir(), "dist")
	cmd := exec.Command(filepath.Join(root, "hack", "dist.sh"), version, again)
	cmd.Env = append(os.Environ(), "DIST_PLATFORMS=linux/amd64")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, string(b))
	first, err := os.ReadFile(filepath.Join(out, "checksums.txt"))
	require.NoError(t, err)
	second, err := os.ReadFile(filepath.Join(again, "checksums.txt"))
	require.NoError(t, err)
	assert.Equal(t, string(first), string(second))
}
