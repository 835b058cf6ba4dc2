package krew

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"

	yaml "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

// VersionToken in the template becomes the release version. Each platform's sha256 in
// the template is a placeholder: Render replaces it with the sum of the archive the
// platform's uri names.
const VersionToken = "@VERSION@"

// Rendered is a rendered manifest and the platforms left out of it.
type Rendered struct {
	Manifest []byte
	Plugin   *Plugin
	Omitted  []OSArch
}

// Render fills the template for version from the archives in dir, keeping the
// template's layout (field order, block text) so that the manifest reads as written.
// With partial, a platform whose archive is not in dir is left out (a build of some
// platforms only, as tests make); without, it is an error.
func Render(template []byte, version, dir string, partial bool) (*Rendered, error) {
	if err := validateVersion(version); err != nil {
		return nil, err
	}
	text := bytes.ReplaceAll(template, []byte(VersionToken), []byte(version))
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, fmt.Errorf("decoding the template: %w", err)
	}
	platforms := lookup(lookup(doc.Content[0], "spec"), "platforms")
	if platforms == nil || platforms.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("the template has no spec.platforms list")
	}
	out := &Rendered{}
	kept := platforms.Content[:0]
	for _, item := range platforms.Content {
		pl, err := decodePlatform(item)
		if err != nil {
			return nil, fmt.Errorf("decoding a platform of the template: %w", err)
		}
		sum, err := Sum(filepath.Join(dir, path.Base(pl.URI)))
		if os.IsNotExist(err) && partial {
			out.Omitted = append(out.Omitted, Matches(pl)...)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("platform %v: %w", Matches(pl), err)
		}
		sha := lookup(item, "sha256")
		if sha == nil {
			return nil, fmt.Errorf("platform %v of the template has no sha256 field", Matches(pl))
		}
		sha.Value, sha.Style = sum, 0
		kept = append(kept, item)
	}
	platforms.Content = kept
	doc.HeadComment = fmt.Sprintf("krew plugin manifest for litepool %s, rendered by hack/dist.sh from krew/litepool.yaml.", version)
	// The template's own head comment (it explains the template) goes.
	doc.Content[0].HeadComment = ""
	if len(doc.Content[0].Content) > 0 {
		doc.Content[0].Content[0].HeadComment = ""
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	out.Manifest = buf.Bytes()
	p, err := Parse(out.Manifest)
	if err != nil {
		return nil, err
	}
	out.Plugin = p
	return out, nil
}

// decodePlatform decodes through JSON field names (matchLabels), as Parse does.
func decodePlatform(n *yaml.Node) (*Platform, error) {
	b, err := yaml.Marshal(n)
	if err != nil {
		return nil, err
	}
	var pl Platform
	if err := sigsyaml.UnmarshalStrict(b, &pl); err != nil {
		return nil, err
	}
	return &pl, nil
}

// lookup returns the value of key in a mapping node, or nil.
func lookup(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
