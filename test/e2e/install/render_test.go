package install

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/runwhere-ai/litepool/test/e2e/framework"
)

// rendered is deploy/webhook as `kubectl kustomize` renders it, by kind and name.
type rendered struct {
	deployments  map[string]appsv1.Deployment
	pdbs         map[string]policyv1.PodDisruptionBudget
	services     map[string]corev1.Service
	accounts     map[string]bool
	clusterRoles map[string]rbacv1.ClusterRole
}

func render(t *testing.T) rendered {
	t.Helper()
	res := framework.C.Kubectl(t, "", "kustomize", filepath.Join(framework.Root, "deploy", "webhook"))
	require.Zero(t, res.ExitCode, res.Stderr)
	r := rendered{deployments: map[string]appsv1.Deployment{}, pdbs: map[string]policyv1.PodDisruptionBudget{},
		services: map[string]corev1.Service{}, accounts: map[string]bool{}, clusterRoles: map[string]rbacv1.ClusterRole{}}
	for _, doc := range strings.Split(res.Stdout, "\n---\n") {
		var meta metav1.TypeMeta
		require.NoError(t, yaml.Unmarshal([]byte(doc), &meta))
		switch meta.Kind {
		case "Deployment":
			var d appsv1.Deployment
			require.NoError(t, yaml.Unmarshal([]byte(doc), &d))
			r.deployments[d.Name] = d
		case "PodDisruptionBudget":
			var p policyv1.PodDisruptionBudget
			require.NoError(t, yaml.Unmarshal([]byte(doc), &p))
			r.pdbs[p.Name] = p
		case "Service":
			var s corev1.Service
			require.NoError(t, yaml.Unmarshal([]byte(doc), &s))
			r.services[s.Name] = s
		case "ServiceAccount":
			var sa corev1.ServiceAccount
			require.NoError(t, yaml.Unmarshal([]byte(doc), &sa))
			r.accounts[sa.Namespace+"/"+sa.Name] = true
		case "ClusterRole":
			var cr rbacv1.ClusterRole
			require.NoError(t, yaml.Unmarshal([]byte(doc), &cr))
			r.clusterRoles[cr.Name] = cr
		}
	}
	return r
}

// The two Deployments run the one image as two identities, each with its own
// ServiceAccount, its own PDB, resources, non-root and seccomp, and flags that match
// its role: the webhook runs no controllers and elects nobody; the controller serves
// no webhook and mounts no certificate. Both serve /metrics over HTTPS only.
func TestRendered(t *testing.T) {
	r := render(t)
	for _, tc := range []struct {
		name, account string
		replicas      int32
		args, notArgs []string
	}{
		{name: "litepool-webhook", account: "litepool-webhook", replicas: 3,
			args:    []string{"--webhook=true", "--controllers=false", "--cert-mode=self", "--metrics-secure=true"},
			notArgs: []string{"--leader-elect=true", "--controllers=true", "--metrics-secure=false"}},
		{name: "litepool-controller", account: "litepool-controller", replicas: 2,
			args:    []string{"--webhook=false", "--controllers=true", "--leader-elect=true", "--metrics-secure=true"},
			notArgs: []string{"--webhook=true", "--metrics-secure=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := r.deployments[tc.name]
			require.True(t, ok, "Deployment %s rendered", tc.name)
			assert.Equal(t, defaultNamespace, d.Namespace)
			require.NotNil(t, d.Spec.Replicas)
			assert.Equal(t, tc.replicas, *d.Spec.Replicas)
			pod := d.Spec.Template.Spec
			assert.Equal(t, tc.account, pod.ServiceAccountName)
			assert.True(t, r.accounts[defaultNamespace+"/"+tc.account], "ServiceAccount %s rendered", tc.account)
			if sc := pod.SecurityContext; assert.NotNil(t, sc) {
				assert.Equal(t, true, deref(sc.RunAsNonRoot), "runAsNonRoot")
				if assert.NotNil(t, sc.SeccompProfile) {
					assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type)
				}
			}
			require.Len(t, pod.Containers, 1)
			c := pod.Containers[0]
			for _, a := range tc.args {
				assert.Contains(t, c.Args, a)
			}
			for _, a := range tc.notArgs {
				assert.NotContains(t, c.Args, a)
			}
			assert.False(t, c.Resources.Requests.Cpu().IsZero(), "cpu request")
			assert.False(t, c.Resources.Requests.Memory().IsZero(), "memory request")
			assert.False(t, c.Resources.Limits.Memory().IsZero(), "memory limit")
			if sc := c.SecurityContext; assert.NotNil(t, sc) {
				assert.Equal(t, false, deref(sc.AllowPrivilegeEscalation))
				assert.Equal(t, true, deref(sc.ReadOnlyRootFilesystem))
			}
			if tc.name == "litepool-controller" {
				assert.Empty(t, pod.Volumes, "the controller mounts no certificate")
				assert.False(t, slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "webhook" }))
			}

			// Its own PDB: selects its pods and not the other Deployment's.
			pdb, ok := r.pdbs[tc.name]
			require.True(t, ok, "PodDisruptionBudget %s rendered", tc.name)
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			require.NoError(t, err)
			for name, other := range r.deployments {
				assert.Equal(t, name == tc.name, sel.Matches(labels.Set(other.Spec.Template.Labels)),
					"PDB %s selects the pods of %s", pdb.Name, name)
			}
		})
	}
	assert.Len(t, r.deployments, 2)
	assert.Len(t, r.pdbs, 2)

	// The API server calls litepool-webhook's Service: only webhook pods behind it.
	svc := r.services["litepool-webhook"]
	assert.True(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(r.deployments["litepool-webhook"].Spec.Template.Labels)))
	assert.False(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(r.deployments["litepool-controller"].Spec.Template.Labels)))

	reader := r.clusterRoles["litepool-metrics-reader"]
	assert.Equal(t, []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}, reader.Rules,
		"scrapers get /metrics and nothing else")
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// deploy/monitoring scrapes both identities' Services over HTTPS with Prometheus's
// token, verifying their certificates (a CA and a server name, never
// insecureSkipVerify), and binds Prometheus to litepool-metrics-reader.
func TestMonitoringRendered(t *testing.T) {
	services := render(t).services
	res := framework.C.Kubectl(t, "", "kustomize", filepath.Join(framework.Root, "deploy", "monitoring"))
	require.Zero(t, res.ExitCode, res.Stderr)
	scraped := map[string]bool{}
	var bound bool
	for _, doc := range strings.Split(res.Stdout, "\n---\n") {
		var obj struct {
			Kind     string             `json:"kind"`
			Metadata metav1.ObjectMeta  `json:"metadata"`
			RoleRef  rbacv1.RoleRef     `json:"roleRef"`
			Spec     serviceMonitorSpec `json:"spec"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
		switch obj.Kind {
		case "ServiceMonitor":
			require.Len(t, obj.Spec.Endpoints, 1, obj.Metadata.Name)
			ep := obj.Spec.Endpoints[0]
			assert.Equal(t, "https", ep.Scheme, obj.Metadata.Name)
			assert.Equal(t, "/var/run/secrets/kubernetes.io/serviceaccount/token", ep.BearerTokenFile, obj.Metadata.Name)
			assert.False(t, ep.TLSConfig.InsecureSkipVerify, "%s verifies the certificate", obj.Metadata.Name)
			assert.Equal(t, "litepool-metrics-cert", ep.TLSConfig.CA.Secret.Name, "%s: the CA", obj.Metadata.Name)
			assert.Equal(t, "ca.crt", ep.TLSConfig.CA.Secret.Key, "%s: the CA", obj.Metadata.Name)
			assert.NotEmpty(t, ep.TLSConfig.ServerName, "%s: the name checked", obj.Metadata.Name)
			for name, svc := range services {
				if labels.SelectorFromSet(obj.Spec.Selector.MatchLabels).Matches(labels.Set(svc.Labels)) &&
					slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
					scraped[name] = true
				}
			}
		case "ClusterRoleBinding":
			bound = bound || obj.RoleRef.Name == "litepool-metrics-reader"
		}
	}
	assert.Equal(t, map[string]bool{"litepool-webhook": true, "litepool-controller-metrics": true}, scraped, "every Service with metrics is scraped")
	assert.True(t, bound, "Prometheus is bound to litepool-metrics-reader")
}

type serviceMonitorSpec struct {
	Selector  metav1.LabelSelector `json:"selector"`
	Endpoints []struct {
		Port            string `json:"port"`
		Scheme          string `json:"scheme"`
		BearerTokenFile string `json:"bearerTokenFile"`
		TLSConfig       struct {
			InsecureSkipVerify bool   `json:"insecureSkipVerify"`
			ServerName         string `json:"serverName"`
			CA                 struct {
				Secret struct {
					Name string `json:"name"`
					Key  string `json:"key"`
				} `json:"secret"`
			} `json:"ca"`
		} `json:"tlsConfig"`
	} `json:"endpoints"`
}
