// Package image defines litepool's container images and builds them without a container
// engine, with go-containerregistry (the library ko is built on): no base image, one
// layer of static binaries, a non-root user. The same definition builds the release
// image and the image the real-node e2e tests install, and test/dist checks that the
// Dockerfile builds the same image (files, user, entrypoint, ports, labels).
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// File is one file of an image: Src on the build machine, Dst in the image.
type File struct {
	Src, Dst string
	Mode     int64
}

// Spec is everything an image holds.
type Spec struct {
	Files      []File
	User       string
	Entrypoint []string
	Cmd        []string
	Ports      []string // "9443/tcp"
	Labels     map[string]string
	Env        []string
}

// Users of the images: distroless's nonroot uid and gid, which deploy/webhook's
// runAsUser names.
const User = "65532:65532"

// DefaultPath is the PATH BuildKit gives an image built FROM scratch; set here too so
// both builds carry the same environment.
const DefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Litepool is the litepool image: litepool-webhook (the entrypoint) and kubectl-litepool
// (for Jobs that run the plugin in the cluster), built into binDir with CGO_ENABLED=0,
// and the licence.
func Litepool(binDir, root, version string) Spec {
	return Spec{
		Files: []File{
			{Src: path.Join(binDir, "litepool-webhook"), Dst: "/usr/local/bin/litepool-webhook", Mode: 0o755},
			{Src: path.Join(binDir, "kubectl-litepool"), Dst: "/usr/local/bin/kubectl-litepool", Mode: 0o755},
			{Src: path.Join(root, "LICENSE"), Dst: "/licenses/LICENSE", Mode: 0o644},
		},
		User:       User,
		Entrypoint: []string{"/usr/local/bin/litepool-webhook"},
		// webhook (HTTPS), metrics, health probes: the flags' defaults in cmd/webhook.
		Ports: []string{"8081/tcp", "8443/tcp", "9443/tcp"},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "litepool",
			"org.opencontainers.image.description": "litepool admission webhook and kubectl plugin",
			"org.opencontainers.image.source":      "https://github.com/runwhere-ai/litepool",
			"org.opencontainers.image.licenses":    "Apache-2.0",
			"org.opencontainers.image.version":     version,
		},
		Env: []string{DefaultPath},
	}
}

// Build makes the image of a spec: one layer, no base, reproducible (every time stamp
// is the epoch), for linux/GOARCH of the binaries.
func Build(s Spec, arch string) (v1.Image, error) {
	layerTar, err := layerOf(s.Files)
	if err != nil {
		return nil, err
	}
	// WithCompressedCaching: gzip the layer once. Without it the layer is compressed once
	// for its digest and again when the archive is written, most of this program's CPU.
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config.User = s.User
	cf.Config.Entrypoint = s.Entrypoint
	cf.Config.Cmd = s.Cmd
	cf.Config.Env = s.Env
	cf.Config.Labels = s.Labels
	if len(s.Ports) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range s.Ports {
			cf.Config.ExposedPorts[p] = struct{}{}
		}
	}
	return mutate.ConfigFile(img, cf)
}

// layerOf writes the files, and the directories above them, into one tar: owned by
// root, as a Dockerfile's COPY leaves them.
func layerOf(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0).UTC()
	dirs := map[string]bool{}
	var dirList []string
	for _, f := range files {
		for d := path.Dir(f.Dst); d != "/" && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			dirList = append(dirList, d)
		}
	}
	sort.Strings(dirList)
	for _, d := range dirList {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f.Src)
		if err != nil {
			return nil, fmt.Errorf("image file %s: %w", f.Dst, err)
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.Dst, "/"), Mode: f.Mode, Size: int64(len(b)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Write saves images as one docker/OCI archive that `ctr images import` and `docker
// load` read; an image may carry several tags.
func Write(file string, tagged map[string]v1.Image) error {
	refs := map[name.Reference]v1.Image{}
	for tag, img := range tagged {
		ref, err := name.NewTag(tag)
		if err != nil {
			return err
		}
		refs[ref] = img
	}
	tmp := file + ".tmp"
	if err := tarball.MultiRefWriteToFile(tmp, refs); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}
