package image

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The litepool image as make image writes it, read back from its archive: the files
// with their modes and owner, the user, entrypoint, ports, labels, and a reproducible
// digest.
func TestLitepoolImage(t *testing.T) {
	bin, root := t.TempDir(), t.TempDir()
	for name, body := range map[string]string{"litepool-webhook": "webhook", "kubectl-litepool": "plugin"} {
		require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "LICENSE"), []byte("Apache"), 0o644))

	img, err := Build(Litepool(bin, root, "v1.2.3"), "amd64")
	require.NoError(t, err)
	archive := filepath.Join(t.TempDir(), "img.tar")
	require.NoError(t, Write(archive, map[string]v1Image{"ghcr.io/runwhere-ai/litepool-webhook:v1.2.3": img, "litepool.local/litepool-webhook:e2e": img}))

	for _, tag := range []string{"ghcr.io/runwhere-ai/litepool-webhook:v1.2.3", "litepool.local/litepool-webhook:e2e"} {
		ref := mustTag(t, tag)
		got, err := tarball.ImageFromPath(archive, &ref)
		require.NoError(t, err, tag)
		d1, _ := got.Digest()
		d2, _ := img.Digest()
		assert.Equal(t, d2, d1, "one image, two names")
	}
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "linux", cf.OS)
	assert.Equal(t, "65532:65532", cf.Config.User)
	assert.Equal(t, []string{"/usr/local/bin/litepool-webhook"}, cf.Config.Entrypoint)
	assert.Equal(t, map[string]struct{}{"8081/tcp": {}, "8443/tcp": {}, "9443/tcp": {}}, cf.Config.ExposedPorts)
	assert.Equal(t, "v1.2.3", cf.Config.Labels["org.opencontainers.image.version"])

	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	files := map[string]int64{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		assert.Zero(t, h.Uid, h.Name)
		files[h.Name] = h.Mode
	}
	assert.Equal(t, map[string]int64{"licenses/": 0o755, "licenses/LICENSE": 0o644, "usr/": 0o755, "usr/local/": 0o755, "usr/local/bin/": 0o755,
		"usr/local/bin/kubectl-litepool": 0o755, "usr/local/bin/litepool-webhook": 0o755}, files)

	again, err := Build(Litepool(bin, root, "v1.2.3"), "amd64")
	require.NoError(t, err)
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	assert.Equal(t, d1, d2, "reproducible: same inputs, same digest")
}

func TestMissingFile(t *testing.T) {
	_, err := Build(Litepool(t.TempDir(), t.TempDir(), "v1"), "amd64")
	require.ErrorContains(t, err, "image file /usr/local/bin/litepool-webhook")
}

type v1Image = v1.Image

func mustTag(t *testing.T, s string) name.Tag {
	tag, err := name.NewTag(s)
	require.NoError(t, err)
	return tag
}
