// Package krew reads, renders and checks litepool's krew plugin manifest
// (krew/litepool.yaml) by the rules krew's own validator applies before it installs a
// plugin, and checks the release archives the manifest points at.
//
// krew keeps its validator in an internal package (and its module is not on the Go
// module proxy this project builds from), so the rules are written out here, one
// function each, with messages that name the field and say what would be accepted.
package krew

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"
)

// APIVersion and Kind are the only ones krew accepts.
const (
	APIVersion = "krew.googlecontainertools.github.com/v1alpha2"
	Kind       = "Plugin"
)

// Plugin is a krew plugin manifest.
type Plugin struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   Metadata   `json:"metadata"`
	Spec       PluginSpec `json:"spec"`
}

// Metadata is the manifest's metadata; krew reads only the name.
type Metadata struct {
	Name string `json:"name"`
}

// PluginSpec is what krew shows and installs.
type PluginSpec struct {
	Version          string     `json:"version"`
	Homepage         string     `json:"homepage,omitempty"`
	ShortDescription string     `json:"shortDescription"`
	Description      string     `json:"description,omitempty"`
	Caveats          string     `json:"caveats,omitempty"`
	Platforms        []Platform `json:"platforms"`
}

// Platform is one archive and the os/arch pairs it serves.
type Platform struct {
	Selector *metav1.LabelSelector `json:"selector"`
	URI      string                `json:"uri"`
	Sha256   string                `json:"sha256"`
	Files    []FileOperation       `json:"files,omitempty"`
	Bin      string                `json:"bin"`
}

// FileOperation copies files out of the unpacked archive (krew's `files`).
type FileOperation struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// OSArch is one platform krew runs on.
type OSArch struct{ OS, Arch string }

func (p OSArch) String() string { return p.OS + "/" + p.Arch }

// KnownPlatforms are the os/arch pairs krew is released for; a selector must match at
// least one of them and no pair may be matched by two platforms.
var KnownPlatforms = []OSArch{
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"linux", "386"}, {"linux", "amd64"}, {"linux", "arm"}, {"linux", "arm64"},
	{"linux", "ppc64le"}, {"linux", "s390x"},
	{"windows", "386"}, {"windows", "amd64"}, {"windows", "arm64"},
}

// ReleasePlatforms are the platforms litepool ships archives for.
var ReleasePlatforms = []OSArch{
	{"linux", "amd64"}, {"linux", "arm64"},
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"windows", "amd64"}, {"windows", "arm64"},
}

var (
	nameRegexp   = regexp.MustCompile(`^[\w-]+$`)
	sha256Regexp = regexp.MustCompile(`^[a-f0-9]{64}$`)
	// Names Windows reserves for devices: krew refuses them as plugin names.
	windowsReserved = []string{"CON", "PRN", "AUX", "NUL",
		"COM1", "COM2", "COM3", "COM4", "COM5", "COM6", "COM7", "COM8", "COM9",
		"LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6", "LPT7", "LPT8", "LPT9"}
)

// Load reads a manifest file. Unknown fields are errors: krew would ignore a misspelt
// field, and the plugin would then install without it.
func Load(path string) (*Plugin, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b)
}

// Parse decodes a manifest.
func Parse(b []byte) (*Plugin, error) {
	var p Plugin
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		return nil, fmt.Errorf("decoding the manifest: %w", err)
	}
	return &p, nil
}

// NameFromFile is the plugin name a manifest file must carry: its base name without
// ".yaml".
func NameFromFile(path string) string {
	return strings.TrimSuffix(filepath.Base(path), ".yaml")
}

// ValidateFile loads path and validates it under the name its file name gives.
func ValidateFile(path string) (*Plugin, error) {
	if filepath.Ext(path) != ".yaml" {
		return nil, fmt.Errorf("manifest %s: the file name must end in .yaml", path)
	}
	p, err := Load(path)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	if err := Validate(NameFromFile(path), p); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	return p, nil
}

// Validate applies every structural rule krew applies to a manifest named name.
func Validate(name string, p *Plugin) error {
	checks := []func() error{
		func() error { return validateType(p) },
		func() error { return validateName(name, p.Metadata.Name) },
		func() error { return validateVersion(p.Spec.Version) },
		func() error { return validateDescriptions(&p.Spec) },
		func() error { return validatePlatforms(p.Spec.Platforms) },
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func validateType(p *Plugin) error {
	if p.APIVersion != APIVersion {
		return fmt.Errorf("apiVersion is %q: krew accepts only %q", p.APIVersion, APIVersion)
	}
	if p.Kind != Kind {
		return fmt.Errorf("kind is %q: krew accepts only %q", p.Kind, Kind)
	}
	return nil
}

func validateName(fileName, name string) error {
	if !nameRegexp.MatchString(fileName) {
		return fmt.Errorf("plugin name %q from the file name is not allowed: it must match %s", fileName, nameRegexp)
	}
	for _, r := range windowsReserved {
		if strings.EqualFold(r, fileName) {
			return fmt.Errorf("plugin name %q is reserved on Windows", fileName)
		}
	}
	if name != fileName {
		return fmt.Errorf("metadata.name is %q but the file is %s.yaml: they must be the same", name, fileName)
	}
	return nil
}

// validateVersion: krew parses spec.version as a semantic version that starts with "v"
// (v1.2.3, v1.2.3-rc.1).
func validateVersion(v string) error {
	if v == "" {
		return fmt.Errorf("spec.version is empty: it must be a semantic version starting with v, e.g. v0.1.0")
	}
	if !strings.HasPrefix(v, "v") {
		return fmt.Errorf("spec.version %q must start with v, e.g. v%s", v, v)
	}
	_, err := version.ParseSemantic(v[1:])
	if err == nil && strings.HasPrefix(v[1:], "v") {
		err = fmt.Errorf("one leading v only")
	}
	if err != nil {
		return fmt.Errorf("spec.version %q is not a semantic version (e.g. v0.1.0, v0.1.0-rc.1): %v", v, err)
	}
	return nil
}

func validateDescriptions(s *PluginSpec) error {
	switch {
	case strings.TrimSpace(s.ShortDescription) == "":
		return fmt.Errorf("spec.shortDescription is empty: give one line that says what the plugin does")
	case strings.ContainsAny(s.ShortDescription, "\r\n"):
		return fmt.Errorf("spec.shortDescription %q has a line break: it must be one line", s.ShortDescription)
	case strings.TrimSpace(s.Description) == "":
		return fmt.Errorf("spec.description is empty: say what the plugin does")
	}
	return nil
}

func validatePlatforms(platforms []Platform) error {
	if len(platforms) == 0 {
		return fmt.Errorf("spec.platforms is empty: list at least one platform")
	}
	for i := range platforms {
		if err := validatePlatform(&platforms[i]); err != nil {
			return fmt.Errorf("spec.platforms[%d]: %w", i, err)
		}
		if len(Matches(&platforms[i])) == 0 {
			return fmt.Errorf("spec.platforms[%d]: the selector matches none of the platforms krew runs on (%v)", i, KnownPlatforms)
		}
	}
	return validateNoOverlap(platforms)
}

func validatePlatform(p *Platform) error {
	switch {
	case p.URI == "":
		return fmt.Errorf("uri is empty")
	case !strings.HasSuffix(p.URI, ".tar.gz") && !strings.HasSuffix(p.URI, ".zip"):
		return fmt.Errorf("uri %q must point to a .tar.gz or .zip archive", p.URI)
	case p.Sha256 == "":
		return fmt.Errorf("sha256 is empty")
	case !sha256Regexp.MatchString(p.Sha256):
		return fmt.Errorf("sha256 %q is not valid: it must be 64 lowercase hex digits (%s)", p.Sha256, sha256Regexp)
	case p.Bin == "":
		return fmt.Errorf("bin is empty: name the plugin's executable in the archive")
	}
	if err := validateFiles(p.Files); err != nil {
		return err
	}
	return validateSelector(p.Selector)
}

func validateFiles(files []FileOperation) error {
	if files != nil && len(files) == 0 {
		return fmt.Errorf("files is empty: leave it out or list files")
	}
	for i, f := range files {
		if f.From == "" || f.To == "" {
			return fmt.Errorf("files[%d] needs both from and to", i)
		}
	}
	return nil
}

// validateSelector: krew matches platforms on the labels os and arch only.
func validateSelector(sel *metav1.LabelSelector) error {
	if sel == nil {
		return fmt.Errorf("selector is missing: select os and arch")
	}
	if len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		return fmt.Errorf("selector is empty: select os and arch")
	}
	keys := make([]string, 0, len(sel.MatchLabels)+len(sel.MatchExpressions))
	for k := range sel.MatchLabels {
		keys = append(keys, k)
	}
	for _, e := range sel.MatchExpressions {
		keys = append(keys, e.Key)
	}
	for _, k := range keys {
		if k != "os" && k != "arch" {
			return fmt.Errorf("selector key %q is not supported: krew selects on os and arch only", k)
		}
	}
	if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
		return fmt.Errorf("selector: %v", err)
	}
	return nil
}

// Matches lists the known platforms a platform's selector selects.
func Matches(p *Platform) []OSArch {
	sel, err := metav1.LabelSelectorAsSelector(p.Selector)
	if err != nil {
		return nil
	}
	var out []OSArch
	for _, k := range KnownPlatforms {
		if sel.Matches(labels.Set{"os": k.OS, "arch": k.Arch}) {
			out = append(out, k)
		}
	}
	return out
}

// validateNoOverlap: krew installs the first platform that matches; two that match the
// same os/arch make the choice depend on the order.
func validateNoOverlap(platforms []Platform) error {
	seen := map[OSArch]int{}
	for i := range platforms {
		for _, k := range Matches(&platforms[i]) {
			if j, ok := seen[k]; ok {
				return fmt.Errorf("spec.platforms[%d] and spec.platforms[%d] both match %s: each os/arch must be matched by one platform only", j, i, k)
			}
			seen[k] = i
		}
	}
	return nil
}

// RequirePlatforms checks that every platform in want is served.
func RequirePlatforms(p *Plugin, want []OSArch) error {
	served := map[OSArch]bool{}
	for i := range p.Spec.Platforms {
		for _, k := range Matches(&p.Spec.Platforms[i]) {
			served[k] = true
		}
	}
	var missing []string
	for _, k := range want {
		if !served[k] {
			missing = append(missing, k.String())
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no platform serves %s", strings.Join(missing, ", "))
	}
	return nil
}

// PlatformFor is the platform that serves k, if any.
func PlatformFor(p *Plugin, k OSArch) *Platform {
	for i := range p.Spec.Platforms {
		for _, m := range Matches(&p.Spec.Platforms[i]) {
			if m == k {
				return &p.Spec.Platforms[i]
			}
		}
	}
	return nil
}

// Lint returns what krew's manifest check warns about: lines longer than krew shows
// well (70 characters in shortDescription, 80 in description and caveats). A longer
// line with no space in it (a URL) is fine.
func Lint(p *Plugin) []string {
	var out []string
	for _, f := range []struct {
		field, text string
		max         int
	}{
		{"shortDescription", p.Spec.ShortDescription, 70},
		{"description", p.Spec.Description, 80},
		{"caveats", p.Spec.Caveats, 80},
	} {
		for i, line := range strings.Split(f.text, "\n") {
			if len(line) > f.max && strings.Contains(strings.TrimSpace(line), " ") {
				out = append(out, fmt.Sprintf("spec.%s line %d is %d characters long (at most %d): %q", f.field, i+1, len(line), f.max, line))
			}
		}
	}
	return out
}
