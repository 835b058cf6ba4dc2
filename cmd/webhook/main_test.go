package main

import (
	"flag"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

func parse(t *testing.T, args ...string) *options {
	t.Helper()
	var o options
	fs := flag.NewFlagSet("litepool-webhook", flag.ContinueOnError)
	o.bind(fs)
	require.NoError(t, fs.Parse(append([]string{"--namespace=litepool-system"}, args...)))
	return &o
}

// The two Deployments' flag sets, and the local single-process run, are valid; what
// would run nothing, or elect a leader for nothing, is refused with the reason.
func TestModes(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{name: "webhook Deployment", args: []string{"--controllers=false"}},
		{name: "controller Deployment", args: []string{"--webhook=false", "--controllers=true", "--leader-elect"}},
		{name: "local single process", args: []string{"--controllers=true", "--leader-elect=true"}},
		{name: "nothing to run", args: []string{"--webhook=false"}, err: "nothing to run"},
		{name: "leader election without controllers", args: []string{"--leader-elect"}, err: "--leader-elect needs --controllers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := parse(t, tc.args...).validate()
			if tc.err == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tc.err)
			}
		})
	}
}

// Metrics are served over HTTPS behind authentication and authorization unless a local
// run asks for plain HTTP.
func TestMetricsSecureByDefault(t *testing.T) {
	m := parse(t).metricsOptions(nil)
	assert.True(t, m.SecureServing)
	assert.NotNil(t, m.FilterProvider, "authentication and authorization filter")
	assert.Equal(t, ":8443", m.BindAddress)

	m = parse(t, "--metrics-secure=false", "--metrics-bind-address=127.0.0.1:9090").metricsOptions(nil)
	assert.False(t, m.SecureServing)
	assert.Nil(t, m.FilterProvider)
}

// A webhook alone cannot grow informers beyond what the rules read; with controllers
// the pod and node trims are widened for the inventory.
func TestCacheOptions(t *testing.T) {
	accel, err := policy.ParseAccelerators("")
	require.NoError(t, err)
	webhookOnly := parse(t, "--controllers=false").cacheOptions(accel)
	assert.True(t, webhookOnly.ReaderFailOnMissingInformer)
	assert.Len(t, webhookOnly.ByObject, 2)

	withControllers := parse(t, "--webhook=false", "--controllers=true").cacheOptions(accel)
	assert.False(t, withControllers.ReaderFailOnMissingInformer)

	pod := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": mustQuantity(t, "2")}}}}}}
	for obj, by := range withControllers.ByObject {
		if _, ok := obj.(*corev1.Pod); ok {
			out, err := by.Transform(pod.DeepCopy())
			require.NoError(t, err)
			assert.Equal(t, int64(2), out.(*corev1.Pod).Spec.Overhead.Name("nvidia.com/gpu", "").Value(), "the controllers' inventory keeps accelerator requests")
		}
	}
	for obj, by := range webhookOnly.ByObject {
		if _, ok := obj.(*corev1.Pod); ok {
			out, err := by.Transform(pod.DeepCopy())
			require.NoError(t, err)
			assert.Empty(t, out.(*corev1.Pod).Spec.Overhead, "the webhook keeps no resources")
			assert.Empty(t, out.(*corev1.Pod).Spec.Containers)
		}
	}
}

// The rotator's list and watch calls are narrowed to its three objects, so that RBAC
// can grant them by resourceNames; gets by name and other collections pass unchanged.
func TestByNameTransport(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
	}))
	defer srv.Close()
	o := parse(t)
	mgr := newByNameManager(fakeManager{cfg: &rest.Config{Host: srv.URL}}, rotatorNames(*o))
	client, err := rest.HTTPClientFor(mgr.GetConfig())
	require.NoError(t, err)
	for _, p := range []string{
		"/api/v1/namespaces/litepool-system/secrets?watch=true",
		"/api/v1/namespaces/litepool-system/secrets/litepool-webhook-cert",
		"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations?limit=500",
		"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
		"/api/v1/namespaces/kube-system/secrets",
	} {
		resp, err := client.Get(srv.URL + p)
		require.NoError(t, err)
		_ = resp.Body.Close()
	}
	assert.Equal(t, []string{
		"GET /api/v1/namespaces/litepool-system/secrets?fieldSelector=metadata.name%3Dlitepool-webhook-cert&watch=true",
		"GET /api/v1/namespaces/litepool-system/secrets/litepool-webhook-cert?",
		"GET /apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations?fieldSelector=metadata.name%3Dlitepool-webhook&limit=500",
		"GET /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations?fieldSelector=metadata.name%3Dlitepool-webhook",
		"GET /api/v1/namespaces/kube-system/secrets?",
	}, seen)
}

type fakeManager struct {
	manager.Manager
	cfg *rest.Config
}

func (m fakeManager) GetConfig() *rest.Config { return m.cfg }

func mustQuantity(t *testing.T, s string) resource.Quantity {
	t.Helper()
	q, err := resource.ParseQuantity(s)
	require.NoError(t, err)
	return q
}
