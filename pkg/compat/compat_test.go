package compat

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestEmbeddedMatrixDecodes(t *testing.T) {
	m, err := Embedded()
	require.NoError(t, err)
	assert.Equal(t, "Snt9B", m.Vendors.Ascend.Hardware[0].Model)
	assert.Equal(t, "24.1.0.3", m.Vendors.Ascend.Hardware[0].Releases[0].Driver)
	assert.Equal(t, "7.5.0.5.220", m.Vendors.Ascend.Hardware[0].Releases[0].Firmware)
	assert.NotEmpty(t, m.Vendors.Ascend.TorchNPU)
	assert.NotEmpty(t, m.Vendors.NVIDIA.CUDAMinDriver)
	assert.Equal(t, "A100", m.Vendors.NVIDIA.GPUProducts[0].Product)
}

const tiny = `schema_version: 1
vendors:
  huawei-ascend:
    hardware:
    - model: Lab9
      releases:
      - driver: 1.0.0
        cann: [2.0.0]
`

func TestLoadFromFileAndConfigMap(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "m.yaml")
	require.NoError(t, os.WriteFile(file, []byte(tiny), 0o600))
	m, err := Source{File: file}.Load(context.Background(), nil)
	require.NoError(t, err)
	assert.Equal(t, "Lab9", m.Vendors.Ascend.Hardware[0].Model)

	kube := fake.NewSimpleClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "matrix"},
		Data:       map[string]string{ConfigMapKey: tiny},
	}, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "empty"}})
	m, err = Source{ConfigMap: "ops/matrix"}.Load(context.Background(), kube)
	require.NoError(t, err)
	assert.Equal(t, "1.0.0", m.Vendors.Ascend.Hardware[0].Releases[0].Driver)

	_, err = Source{ConfigMap: "ops/empty"}.Load(context.Background(), kube)
	assert.EqualError(t, err, `configmap ops/empty has no key "compat-matrix.yaml" holding the matrix`)
}

func TestBadSources(t *testing.T) {
	assert.EqualError(t, Source{ConfigMap: "matrix"}.Validate(), `invalid --compat-configmap "matrix": want NAMESPACE/NAME`)
	assert.EqualError(t, Source{File: "a", ConfigMap: "b/c"}.Validate(), "--compat-file and --compat-configmap are alternatives: give one")
	_, err := Parse([]byte("schema_version: 2\n"), "x.yaml")
	assert.EqualError(t, err, "compatibility matrix x.yaml: schema_version 2: this litepool reads schema_version 1")
	_, err = Parse([]byte("schema_version: 1\n"), "x.yaml")
	assert.EqualError(t, err, "compatibility matrix x.yaml: no vendors.huawei-ascend.hardware and no vendors.nvidia.gpu_products: nothing to check against")
}
