package krew

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// License is the file every archive must carry: krew's index refuses plugins that do
// not install a license.
const License = "LICENSE"

// CompletionScripts is what each litepool archive carries besides the plugin and
// LICENSE: the script kubectl (1.26+) runs to complete `kubectl litepool ...`. Windows
// gets a .cmd, which kubectl finds through PATHEXT.
func CompletionScripts(goos string) []string {
	if goos == "windows" {
		return []string{"kubectl_complete-litepool.cmd"}
	}
	return []string{"kubectl_complete-litepool"}
}

// Sum is the lowercase hex sha256 of a file, as krew compares it.
func Sum(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Entry is a regular file in an archive.
type Entry struct {
	Name string
	Mode fs.FileMode
}

// List returns the regular files of a .tar.gz or .zip archive by path. Paths that would
// escape the install directory are errors, as they are for krew.
func List(archive string) (map[string]Entry, error) {
	var entries []Entry
	var err error
	switch {
	case strings.HasSuffix(archive, ".tar.gz"):
		entries, err = listTarGz(archive)
	case strings.HasSuffix(archive, ".zip"):
		entries, err = listZip(archive)
	default:
		return nil, fmt.Errorf("%s: not a .tar.gz or .zip archive", archive)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", archive, err)
	}
	out := map[string]Entry{}
	for _, e := range entries {
		clean := path.Clean(strings.TrimPrefix(e.Name, "./"))
		if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return nil, fmt.Errorf("%s: entry %q would be written outside the install directory", archive, e.Name)
		}
		e.Name = clean
		out[clean] = e
	}
	return out, nil
}

func listTarGz(file string) ([]Entry, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(gz)
	var out []Entry
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			out = append(out, Entry{Name: h.Name, Mode: h.FileInfo().Mode()})
		}
	}
}

func listZip(file string) ([]Entry, error) {
	r, err := zip.OpenReader(file)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []Entry
	for _, f := range r.File {
		if f.Mode().IsRegular() {
			out = append(out, Entry{Name: f.Name, Mode: f.Mode()})
		}
	}
	return out, nil
}

// Installed is what krew would put in the plugin's directory: everything when the
// platform has no `files`, else what each from-glob matches, moved under its `to`.
func Installed(p *Platform, entries map[string]Entry) map[string]Entry {
	if p.Files == nil {
		return entries
	}
	out := map[string]Entry{}
	for _, op := range p.Files {
		from := path.Clean(strings.TrimPrefix(op.From, "./"))
		for name, e := range entries {
			if ok, _ := path.Match(from, name); ok {
				dest := path.Clean(path.Join(op.To, path.Base(name)))
				e.Name = dest
				out[dest] = e
			}
		}
	}
	return out
}

// VerifyArchive checks one platform against its archive: the sha256 in the manifest is
// the archive's, and the installed files include the bin (executable, outside Windows
// zips, which carry no mode bits krew uses), LICENSE and every name in also.
func VerifyArchive(p *Platform, archive string, also ...string) error {
	sum, err := Sum(archive)
	if err != nil {
		return err
	}
	if sum != p.Sha256 {
		return fmt.Errorf("%s: sha256 is %s but the manifest says %s", filepath.Base(archive), sum, p.Sha256)
	}
	entries, err := List(archive)
	if err != nil {
		return err
	}
	installed := Installed(p, entries)
	bin := path.Clean(strings.TrimPrefix(p.Bin, "./"))
	e, ok := installed[bin]
	if !ok {
		return fmt.Errorf("%s: bin %q is not in the archive (it has %s)", filepath.Base(archive), p.Bin, names(installed))
	}
	if strings.HasSuffix(archive, ".tar.gz") && e.Mode&0o111 == 0 {
		return fmt.Errorf("%s: bin %q is not executable (mode %v)", filepath.Base(archive), p.Bin, e.Mode)
	}
	for _, want := range append([]string{License}, also...) {
		if _, ok := installed[want]; !ok {
			return fmt.Errorf("%s: %s is not in the archive (it has %s)", filepath.Base(archive), want, names(installed))
		}
	}
	return nil
}

// VerifyArchives checks every platform of p against the archive its uri names, found in
// dir by file name. extra gives, per os, more files each archive must carry.
func VerifyArchives(p *Plugin, dir string, extra func(os string) []string) error {
	for i := range p.Spec.Platforms {
		pl := &p.Spec.Platforms[i]
		archive := filepath.Join(dir, path.Base(pl.URI))
		var also []string
		if extra != nil {
			if m := Matches(pl); len(m) > 0 {
				also = extra(m[0].OS)
			}
		}
		if err := VerifyArchive(pl, archive, also...); err != nil {
			return fmt.Errorf("spec.platforms[%d]: %w", i, err)
		}
	}
	return nil
}

func names(m map[string]Entry) string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
