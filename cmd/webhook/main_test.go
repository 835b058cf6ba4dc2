package main

import (
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/runwhere-ai/litepool/pkg/nodejob"
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
		{name: "agent namespaces, repeated and comma-separated", args: []string{"--agent-namespace=gpu-operator", "--agent-namespace=monitoring,nvidia-network-operator"}},
		{name: "agent namespace that is no name", args: []string{"--agent-namespace=gpu-operator,GPU_Operator"}, err: `--agent-namespace: "GPU_Operator" is not a namespace name`},
		{name: "empty agent namespace", args: []string{"--agent-namespace=gpu-operator,"}, err: `--agent-namespace: "" is not a namespace name`},
		{name: "the default namespace as agent namespace", args: []string{"--agent-namespace=default"}, err: `--agent-namespace: "default" is the namespace every user's pods land in`},
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
func TestAgentNamespaces(t *testing.T) {
	o := parse(t, "--agent-namespace=gpu-operator", "--agent-namespace=monitoring,gpu-operator")
	assert.Equal(t, []string{"kube-system", "litepool-system", "gpu-operator", "monitoring"}, policy.TrustedAgentNamespaces(o.namespace, o.agentNamespaces))
}

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
// the node trim is widened for the inventory. Neither caches pods: podindex keeps them.
func TestCacheOptions(t *testing.T) {
	accel, err := policy.ParseAccelerators("")
	require.NoError(t, err)
	webhookOnly := parse(t, "--controllers=false").cacheOptions(accel)
	assert.True(t, webhookOnly.ReaderFailOnMissingInformer)
	withControllers := parse(t, "--webhook=false", "--controllers=true").cacheOptions(accel)
	assert.False(t, withControllers.ReaderFailOnMissingInformer)

	node := &corev1.Node{Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"nvidia.com/gpu": mustQuantity(t, "8")}}}
	// Both keep the accelerators: N2 compares a joining node's with its super node's,
	// and the inventory counts them.
	for name, opts := range map[string]int{"webhook only": 1, "with controllers": 1} {
		by := webhookOnly.ByObject
		if opts == 1 {
			by = withControllers.ByObject
		}
		require.Len(t, by, 1, name)
		for obj, o := range by {
			require.IsType(t, &corev1.Node{}, obj, name)
			out, err := o.Transform(node.DeepCopy())
			require.NoError(t, err)
			assert.Len(t, out.(*corev1.Node).Status.Allocatable, opts, "%s: allocatable accelerators are kept", name)
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

// --node-work-image-pull-secret names the Secrets every node-work pod pulls with,
// repeatable and comma-separated; a name that is no Secret name is refused at start.
func TestNodeWorkImagePullSecret(t *testing.T) {
	t.Cleanup(func() { nodejob.PullSecrets = nil })
	parse(t, "--node-work-image-pull-secret=regcred", "--node-work-image-pull-secret=mirror, other")
	assert.Equal(t, []string{"regcred", "mirror", "other"}, nodejob.PullSecrets)

	nodejob.PullSecrets = nil
	var o options
	fs := flag.NewFlagSet("litepool-webhook", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.bind(fs)
	err := fs.Parse([]string{"--node-work-image-pull-secret=regcred,Reg_Cred"})
	assert.ErrorContains(t, err, `"Reg_Cred" is not a Secret name`)
}
