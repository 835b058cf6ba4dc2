// Command build writes litepool's images as archives that `ctr images import` and
// `docker load` read, without a container engine (make image):
//
//	litepool-webhook.tar  the litepool image, tagged for release
//	                      (ghcr.io/runwhere-ai/litepool-webhook:VERSION) and for the
//	                      real-node e2e tests (litepool.local/litepool-webhook:e2e): one
//	                      image, two names
//	test-images.tar       what the real-node tests run: the pod sandbox's pause image,
//	                      driver installers that succeed and fail, a failing stress test,
//	                      a workload that only SIGKILL stops
//
// The binaries come from --bin, built with CGO_ENABLED=0 by make image.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/runwhere-ai/litepool/hack/image"
)

// Names of the test images; test/e2e/realnode and hack/realnode.sh use them.
const (
	TestWebhook      = "litepool.local/litepool-webhook:e2e"
	Pause            = "litepool.local/pause:e2e"
	InstallerOK      = "litepool.local/driver-installer:ok"
	InstallerFailing = "litepool.local/driver-installer:fail"
	StressFailing    = "litepool.local/stress:fail"
	Linger           = "litepool.local/linger:e2e"
)

func main() {
	bin := flag.String("bin", "_output/image/bin", "directory of the static binaries")
	out := flag.String("out", "_output/images", "directory the archives are written to")
	root := flag.String("root", ".", "repository root (for LICENSE)")
	version := flag.String("version", "v0.1.0-dev", "litepool version: the release tag and the version label")
	repo := flag.String("repo", "ghcr.io/runwhere-ai/litepool-webhook", "release repository of the litepool image")
	flag.Parse()
	if err := run(*bin, *out, *root, *version, *repo); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(bin, out, root, version, repo string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	arch := runtime.GOARCH
	litepool, err := image.Build(image.Litepool(bin, root, version), arch)
	if err != nil {
		return err
	}
	if err := write(filepath.Join(out, "litepool-webhook.tar"), map[string]v1.Image{repo + ":" + version: litepool, TestWebhook: litepool}); err != nil {
		return err
	}

	testbin := image.File{Src: filepath.Join(bin, "litepool-testbin"), Dst: "/testbin", Mode: 0o755}
	tests := map[string]image.Spec{
		// The sandbox's process: the kubelet asks for no user, pause runs as nobody.
		Pause:            {Files: []image.File{testbin}, User: "65535:65535", Entrypoint: []string{"/testbin", "pause"}},
		InstallerOK:      {Files: []image.File{testbin}, Entrypoint: []string{"/testbin", "install"}},
		InstallerFailing: {Files: []image.File{testbin}, Entrypoint: []string{"/testbin", "exit", "3"}},
		StressFailing:    {Files: []image.File{testbin}, Entrypoint: []string{"/testbin", "exit", "1"}},
		Linger:           {Files: []image.File{testbin}, User: image.User, Entrypoint: []string{"/testbin", "linger"}},
	}
	imgs := map[string]v1.Image{}
	for tag, spec := range tests {
		spec.Env = []string{image.DefaultPath}
		if imgs[tag], err = image.Build(spec, arch); err != nil {
			return err
		}
	}
	return write(filepath.Join(out, "test-images.tar"), imgs)
}

func write(file string, imgs map[string]v1.Image) error {
	if err := image.Write(file, imgs); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for tag, img := range imgs {
		d, err := img.Digest()
		if err != nil {
			return err
		}
		fmt.Printf("%s  %s  %s\n", filepath.Base(file), tag, d)
	}
	return nil
}
