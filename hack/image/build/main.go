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
//
// The images are reproducible, so the archives are written only when an input changed:
// make test-e2e runs make image before every e2e run, and writing both archives costs
// about 7 s and 11 s of CPU each time (compressing the layers). The inputs are the files
// the images hold, the flags, and this program itself (any change to the image code is a
// new executable); their digest is kept beside the archives with the lines printed.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
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

// Files kept beside the archives: the inputs' digest, and the lines the last write printed.
const (
	inputsFile  = "inputs.sha256"
	printedFile = "archives.txt"
)

// The two archives the command writes.
const (
	litepoolArchive = "litepool-webhook.tar"
	testArchive     = "test-images.tar"
)

func run(bin, out, root, version, repo string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	key, err := inputsDigest(bin, root, version, repo)
	if err != nil {
		return err
	}
	if printed, ok := upToDate(out, key); ok {
		fmt.Print(printed)
		return nil
	}
	// A write cut short leaves no digest, so the next run writes again.
	if err := os.Remove(filepath.Join(out, inputsFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var printed bytes.Buffer
	if err := build(bin, out, root, version, repo, io.MultiWriter(os.Stdout, &printed)); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, printedFile), printed.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, inputsFile), []byte(key+"\n"), 0o644)
}

// inputsDigest is the digest of everything the archives are made from.
func inputsDigest(bin, root, version, repo string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "version=%s\nrepo=%s\narch=%s\n", version, repo, runtime.GOARCH)
	files := []string{self, filepath.Join(root, "LICENSE")}
	for _, name := range []string{"litepool-webhook", "kubectl-litepool", "litepool-testbin"} {
		files = append(files, filepath.Join(bin, name))
	}
	for _, f := range files {
		if err := hashFile(h, f); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashFile(h io.Writer, name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(h, "%s\n", filepath.Base(name))
	_, err = io.Copy(h, f)
	return err
}

// upToDate returns what the last write printed when it was made from the same inputs
// and both archives are still there.
func upToDate(out, key string) (string, bool) {
	stored, err := os.ReadFile(filepath.Join(out, inputsFile))
	if err != nil || string(bytes.TrimSpace(stored)) != key {
		return "", false
	}
	for _, archive := range []string{litepoolArchive, testArchive} {
		if _, err := os.Stat(filepath.Join(out, archive)); err != nil {
			return "", false
		}
	}
	printed, err := os.ReadFile(filepath.Join(out, printedFile))
	if err != nil {
		return "", false
	}
	return string(printed), true
}

func build(bin, out, root, version, repo string, w io.Writer) error {
	arch := runtime.GOARCH
	litepool, err := image.Build(image.Litepool(bin, root, version), arch)
	if err != nil {
		return err
	}
	if err := write(w, filepath.Join(out, litepoolArchive), map[string]v1.Image{repo + ":" + version: litepool, TestWebhook: litepool}); err != nil {
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
	return write(w, filepath.Join(out, testArchive), imgs)
}

func write(w io.Writer, file string, imgs map[string]v1.Image) error {
	if err := image.Write(file, imgs); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for tag, img := range imgs {
		d, err := img.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s  %s  %s\n", filepath.Base(file), tag, d)
	}
	return nil
}
