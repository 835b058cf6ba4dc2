// Package compat checks version chains (hardware → driver → firmware → CANN →
// torch_npu → image; GPU → driver → CUDA → PyTorch → image) against the compatibility
// matrix (Check, rule C1), and loads that matrix: the one embedded in the plugin (a copy
// of the project's compat-matrix.yaml, every row with its source), or an operator's own
// from a file or a ConfigMap, for sites that qualify versions of their own. The checks
// are pure functions of the matrix and the chain; only Source.Load reads anything.
package compat

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

//go:embed compat-matrix.yaml
var embedded []byte

// ConfigMapKey is the key of a ConfigMap that holds a matrix.
const ConfigMapKey = "compat-matrix.yaml"

// Embedded returns the matrix shipped in the binary.
func Embedded() (*Matrix, error) { return Parse(embedded, "embedded matrix") }

// EmbeddedYAML is the embedded matrix as shipped.
func EmbeddedYAML() []byte { return embedded }

// Parse decodes a matrix. origin names where it came from, for errors.
func Parse(data []byte, origin string) (*Matrix, error) {
	var m Matrix
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("compatibility matrix %s: %w", origin, err)
	}
	if m.SchemaVersion != 1 {
		return nil, fmt.Errorf("compatibility matrix %s: schema_version %d: this litepool reads schema_version 1", origin, m.SchemaVersion)
	}
	if len(m.Vendors.Ascend.Hardware) == 0 && len(m.Vendors.NVIDIA.GPUProducts) == 0 {
		return nil, fmt.Errorf("compatibility matrix %s: no vendors.huawei-ascend.hardware and no vendors.nvidia.gpu_products: nothing to check against", origin)
	}
	return &m, nil
}

// Source says where to load the matrix from: File, else ConfigMap ("namespace/name"),
// else the embedded one.
type Source struct {
	File      string
	ConfigMap string
}

// Describe names the source for output.
func (s Source) Describe() string {
	switch {
	case s.File != "":
		return "file " + s.File
	case s.ConfigMap != "":
		return "configmap " + s.ConfigMap
	}
	return "embedded"
}

// Validate checks the source flags.
func (s Source) Validate() error {
	if s.File != "" && s.ConfigMap != "" {
		return fmt.Errorf("--compat-file and --compat-configmap are alternatives: give one")
	}
	if s.ConfigMap != "" {
		if _, _, err := splitRef(s.ConfigMap); err != nil {
			return err
		}
	}
	return nil
}

func splitRef(ref string) (ns, name string, err error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("invalid --compat-configmap %q: want NAMESPACE/NAME", ref)
	}
	return ns, name, nil
}

// Load reads the matrix from the source.
func (s Source) Load(ctx context.Context, kube kubernetes.Interface) (*Matrix, error) {
	switch {
	case s.File != "":
		data, err := os.ReadFile(s.File)
		if err != nil {
			return nil, fmt.Errorf("reading --compat-file: %w", err)
		}
		return Parse(data, s.File)
	case s.ConfigMap != "":
		ns, name, err := splitRef(s.ConfigMap)
		if err != nil {
			return nil, err
		}
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading --compat-configmap %s: %w", s.ConfigMap, err)
		}
		data, ok := cm.Data[ConfigMapKey]
		if !ok {
			return nil, fmt.Errorf("configmap %s has no key %q holding the matrix", s.ConfigMap, ConfigMapKey)
		}
		return Parse([]byte(data), "configmap "+s.ConfigMap)
	}
	return Embedded()
}
