package krew

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	sumA = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	sumB = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

// valid is a correct two-platform manifest; the cases below break one rule each.
const valid = `apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: litepool
spec:
  version: v0.1.0
  shortDescription: Resource pools for clusters of GPU and NPU machines
  description: |
    Pools for GPU and NPU nodes.
  platforms:
  - selector:
      matchLabels:
        os: linux
        arch: amd64
    uri: https://example.com/kubectl-litepool_v0.1.0_linux_amd64.tar.gz
    sha256: ` + sumA + `
    bin: kubectl-litepool
  - selector:
      matchLabels:
        os: windows
        arch: amd64
    uri: https://example.com/kubectl-litepool_v0.1.0_windows_amd64.zip
    sha256: ` + sumB + `
    bin: kubectl-litepool.exe
`

func TestValidate(t *testing.T) {
	upper := strings.ToUpper(sumA)
	cases := []struct {
		name, file, from, to, err string
	}{
		{name: "valid", file: "litepool"},
		{name: "apiVersion", file: "litepool", from: "krew.googlecontainertools.github.com/v1alpha2", to: "krew.googlecontainertools.github.com/v1alpha1",
			err: `apiVersion is "krew.googlecontainertools.github.com/v1alpha1": krew accepts only "krew.googlecontainertools.github.com/v1alpha2"`},
		{name: "kind", file: "litepool", from: "kind: Plugin", to: "kind: Plugins",
			err: `kind is "Plugins": krew accepts only "Plugin"`},
		{name: "name differs from the file", file: "lite-pool",
			err: `metadata.name is "litepool" but the file is lite-pool.yaml: they must be the same`},
		{name: "file name with a dot", file: "lite.pool", from: "name: litepool", to: "name: lite.pool",
			err: `plugin name "lite.pool" from the file name is not allowed: it must match ^[\w-]+$`},
		{name: "windows device name", file: "con", from: "name: litepool", to: "name: con",
			err: `plugin name "con" is reserved on Windows`},
		{name: "version without v", file: "litepool", from: "version: v0.1.0", to: "version: 0.1.0",
			err: `spec.version "0.1.0" must start with v, e.g. v0.1.0`},
		{name: "version not semver", file: "litepool", from: "version: v0.1.0", to: "version: v0.1",
			err: `spec.version "v0.1" is not a semantic version (e.g. v0.1.0, v0.1.0-rc.1): illegal version string "0.1"`},
		{name: "git describe is not semver", file: "litepool", from: "version: v0.1.0", to: "version: 6ef844c-dirty",
			err: `spec.version "6ef844c-dirty" must start with v, e.g. v6ef844c-dirty`},
		{name: "short description on two lines", file: "litepool", from: "shortDescription: Resource pools for clusters of GPU and NPU machines",
			to:  "shortDescription: \"Resource pools\\nfor GPU machines\"",
			err: `spec.shortDescription "Resource pools\nfor GPU machines" has a line break: it must be one line`},
		{name: "no short description", file: "litepool", from: "shortDescription: Resource pools for clusters of GPU and NPU machines", to: "shortDescription: ''",
			err: `spec.shortDescription is empty: give one line that says what the plugin does`},
		{name: "no description", file: "litepool", from: "  description: |\n    Pools for GPU and NPU nodes.\n", to: "",
			err: `spec.description is empty: say what the plugin does`},
		{name: "uppercase sha256", file: "litepool", from: sumA, to: upper,
			err: `spec.platforms[0]: sha256 "` + upper + `" is not valid: it must be 64 lowercase hex digits (^[a-f0-9]{64}$)`},
		{name: "short sha256", file: "litepool", from: sumA, to: sumA[:63],
			err: `spec.platforms[0]: sha256 "` + sumA[:63] + `" is not valid: it must be 64 lowercase hex digits (^[a-f0-9]{64}$)`},
		{name: "uri not an archive", file: "litepool", from: "linux_amd64.tar.gz", to: "linux_amd64",
			err: `spec.platforms[0]: uri "https://example.com/kubectl-litepool_v0.1.0_linux_amd64" must point to a .tar.gz or .zip archive`},
		{name: "no bin", file: "litepool", from: "bin: kubectl-litepool.exe", to: "bin: ''",
			err: `spec.platforms[1]: bin is empty: name the plugin's executable in the archive`},
		{name: "selector on another key", file: "litepool", from: "        arch: amd64\n    uri: https://example.com/kubectl-litepool_v0.1.0_linux",
			to:  "        arch: amd64\n        distro: ubuntu\n    uri: https://example.com/kubectl-litepool_v0.1.0_linux",
			err: `spec.platforms[0]: selector key "distro" is not supported: krew selects on os and arch only`},
		{name: "selector matching nothing", file: "litepool", from: "os: linux", to: "os: plan9",
			err: `spec.platforms[0]: the selector matches none of the platforms krew runs on ([darwin/amd64 darwin/arm64 linux/386 linux/amd64 linux/arm linux/arm64 linux/ppc64le linux/s390x windows/386 windows/amd64 windows/arm64])`},
		{name: "duplicate platform", file: "litepool", from: "os: windows", to: "os: linux",
			err: `spec.platforms[0] and spec.platforms[1] both match linux/amd64: each os/arch must be matched by one platform only`},
		{name: "overlap through an expression", file: "litepool",
			from: "      matchLabels:\n        os: windows\n        arch: amd64",
			to:   "      matchExpressions:\n      - {key: os, operator: In, values: [linux, windows]}",
			err:  `spec.platforms[0] and spec.platforms[1] both match linux/amd64: each os/arch must be matched by one platform only`},
		{name: "unknown field", file: "litepool", from: "bin: kubectl-litepool.exe", to: "bin: kubectl-litepool.exe\n    binary: x",
			err: `decoding the manifest: error unmarshaling JSON: while decoding JSON: json: unknown field "binary"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text := valid
			if tc.from != "" {
				require.Contains(t, text, tc.from, "the case must change the manifest")
				text = strings.Replace(text, tc.from, tc.to, 1)
			}
			p, err := Parse([]byte(text))
			if err == nil {
				err = Validate(tc.file, p)
			}
			if tc.err == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.err, err.Error())
		})
	}
}

func TestValidateFileTakesTheNameFromTheFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "litepool.yaml")
	require.NoError(t, os.WriteFile(good, []byte(valid), 0o644))
	_, err := ValidateFile(good)
	assert.NoError(t, err)

	other := filepath.Join(dir, "pools.yaml")
	require.NoError(t, os.WriteFile(other, []byte(valid), 0o644))
	_, err = ValidateFile(other)
	assert.EqualError(t, err, "manifest "+other+`: metadata.name is "litepool" but the file is pools.yaml: they must be the same`)

	yml := filepath.Join(dir, "litepool.yml")
	require.NoError(t, os.WriteFile(yml, []byte(valid), 0o644))
	_, err = ValidateFile(yml)
	assert.EqualError(t, err, "manifest "+yml+": the file name must end in .yaml")
}

func TestRequirePlatforms(t *testing.T) {
	p, err := Parse([]byte(valid))
	require.NoError(t, err)
	assert.NoError(t, RequirePlatforms(p, []OSArch{{"linux", "amd64"}, {"windows", "amd64"}}))
	assert.EqualError(t, RequirePlatforms(p, ReleasePlatforms), "no platform serves linux/arm64, darwin/amd64, darwin/arm64, windows/arm64")
	assert.Equal(t, "kubectl-litepool.exe", PlatformFor(p, OSArch{"windows", "amd64"}).Bin)
	assert.Nil(t, PlatformFor(p, OSArch{"darwin", "arm64"}))
}

func TestLint(t *testing.T) {
	p, err := Parse([]byte(valid))
	require.NoError(t, err)
	assert.Empty(t, Lint(p))
	p.Spec.Caveats = "short line\n" + strings.Repeat("word ", 17) + "\n" + "https://example.com/" + strings.Repeat("x", 90)
	assert.Equal(t, []string{`spec.caveats line 2 is 85 characters long (at most 80): "` + strings.Repeat("word ", 17) + `"`}, Lint(p))
}
