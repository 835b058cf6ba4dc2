package krew

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// PackTime is the modification time written for every file, so that the same binaries
// always give the same archive and the same sha256.
var PackTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Pack writes the regular files of dir, flat and sorted by name, into archive (.tar.gz
// or .zip by its name). Files keep their executable bit; owner and time are fixed.
func Pack(archive, dir string) (err error) {
	files, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name() < files[j].Name() })
	out, err := os.Create(archive)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	switch {
	case strings.HasSuffix(archive, ".tar.gz"):
		return packTarGz(out, dir, files)
	case strings.HasSuffix(archive, ".zip"):
		return packZip(out, dir, files)
	}
	return fmt.Errorf("%s: the archive name must end in .tar.gz or .zip", archive)
}

func packTarGz(out io.Writer, dir string, files []os.DirEntry) error {
	gz := gzip.NewWriter(out)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		if !f.Type().IsRegular() {
			continue
		}
		info, err := f.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: f.Name(), Mode: int64(mode(info)), Size: info.Size(), ModTime: PackTime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if err := copyFile(tw, filepath.Join(dir, f.Name())); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func packZip(out io.Writer, dir string, files []os.DirEntry) error {
	zw := zip.NewWriter(out)
	for _, f := range files {
		if !f.Type().IsRegular() {
			continue
		}
		info, err := f.Info()
		if err != nil {
			return err
		}
		h := &zip.FileHeader{Name: f.Name(), Method: zip.Deflate, Modified: PackTime}
		h.SetMode(mode(info))
		w, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		if err := copyFile(w, filepath.Join(dir, f.Name())); err != nil {
			return err
		}
	}
	return zw.Close()
}

// mode is 0755 for executables and 0644 for the rest, whatever the umask made them.
func mode(info os.FileInfo) os.FileMode {
	if info.Mode()&0o111 != 0 {
		return 0o755
	}
	return 0o644
}

func copyFile(w io.Writer, file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
