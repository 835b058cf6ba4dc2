package poolcreate

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/runwhere-ai/litepool/pkg/apis/v1alpha1"
	"github.com/runwhere-ai/litepool/pkg/policy"
	"sigs.k8s.io/yaml"
)

// Document is one pool (or gpuctl quota file) to create, from one document.
type Document struct {
	Source string // "file" or "file: document N"
	Pool   *v1alpha1.Pool
	Nodes  []policy.GpuctlNode // gpuctl files only
	Quota  []byte              // a gpuctl quota file (then Pool is nil)
}

// ReadDocuments reads and parses every document of the files (a directory: its
// .yaml, .yml and .json files; "-": in).
func ReadDocuments(filenames []string, recursive bool, in io.Reader) ([]Document, error) {
	var docs []Document
	for _, name := range filenames {
		files, err := expandFile(name, recursive)
		if err != nil {
			return nil, err
		}
		for _, file := range files {
			raw, err := readDocuments(file, in)
			if err != nil {
				return nil, err
			}
			for i, doc := range raw {
				source := file
				if len(raw) > 1 {
					source = fmt.Sprintf("%s: document %d", file, i+1)
				}
				d, err := parseDocument(doc)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", source, err)
				}
				d.Source = source
				docs = append(docs, d)
			}
		}
	}
	return docs, nil
}

func expandFile(name string, recursive bool) ([]string, error) {
	if name == "-" {
		return []string{"-"}, nil
	}
	info, err := os.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("the path %q does not exist", name)
	}
	if !info.IsDir() {
		return []string{name}, nil
	}
	var files []string
	err = filepath.WalkDir(name, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != name && !recursive {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml", ".json":
			files = append(files, path)
		}
		return nil
	})
	return files, err
}

// readDocuments splits a file into its non-empty YAML documents.
func readDocuments(file string, in io.Reader) ([][]byte, error) {
	r := in
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	} else if in == nil {
		return nil, fmt.Errorf("-f -: no standard input")
	}
	yr := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var docs [][]byte
	for {
		doc, err := yr.Read()
		if err == io.EOF {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if isEmptyDocument(doc) {
			continue
		}
		docs = append(docs, doc)
	}
}

func isEmptyDocument(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		l := strings.TrimSpace(string(line))
		if l != "" && !strings.HasPrefix(l, "#") && l != "---" {
			return false
		}
	}
	return true
}

// parseDocument tells a Pool object from a gpuctl pool file and parses it strictly.
func parseDocument(doc []byte) (Document, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return Document{}, fmt.Errorf("not valid YAML: %s", strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "))
	}
	switch {
	case head.APIVersion == "" && head.Kind == policy.GpuctlQuotaKind:
		return Document{Quota: doc}, nil
	case policy.IsGpuctlDocument(head.Kind, head.APIVersion):
		g, err := policy.ParseGpuctlPool(doc)
		if err != nil {
			return Document{}, err
		}
		return Document{Pool: g.Pool, Nodes: g.Nodes}, nil
	case head.APIVersion == v1alpha1.GroupVersion.String() && head.Kind == "Pool":
		var p v1alpha1.Pool
		if err := yaml.UnmarshalStrict(doc, &p); err != nil {
			return Document{}, fmt.Errorf("not a valid Pool: %s", policy.DecodeErrorMessage(err))
		}
		p.Status = v1alpha1.PoolStatus{}
		p.ResourceVersion, p.UID = "", ""
		return Document{Pool: &p}, nil
	}
	return Document{}, fmt.Errorf("unsupported document (apiVersion %q, kind %q): create -f takes Pool objects (apiVersion: %s, kind: Pool), gpuctl pool files (kind: pool, version: %s) and gpuctl quota files (kind: quota)",
		head.APIVersion, head.Kind, v1alpha1.GroupVersion.String(), policy.GpuctlVersion)
}
