package main

import (
	"net/http"
	"path"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// byNameTransport narrows collection reads (list and watch: a GET on a collection's
// path) to one object each, by the field selector metadata.name=<name>. The API server
// authorizes such a list or watch against RBAC's resourceNames, so the webhook's Role
// can grant its certificate Secret by name rather than every Secret of its namespace,
// and its ClusterRole the two webhook configurations by name rather than all of them.
type byNameTransport struct {
	next http.RoundTripper
	// names maps a collection's URL path to the one name read from it.
	names map[string]string
}

func (t byNameTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	name, ok := t.names[req.URL.Path]
	if !ok || req.Method != http.MethodGet || req.URL.Query().Has("fieldSelector") {
		return t.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	q := req.URL.Query()
	q.Set("fieldSelector", "metadata.name="+name)
	req.URL.RawQuery = q.Encode()
	return t.next.RoundTrip(req)
}

// rotatorNames are the collections cert-controller's rotator lists and watches (every
// Secret of the namespace, every mutating and validating webhook configuration of the
// cluster), each with the one object it manages there.
func rotatorNames(o options) map[string]string {
	const admissionV1 = "/apis/admissionregistration.k8s.io/v1"
	return map[string]string{
		path.Join("/api/v1/namespaces", o.namespace, "secrets"):   o.secret,
		path.Join(admissionV1, "mutatingwebhookconfigurations"):   o.mutatingConfig,
		path.Join(admissionV1, "validatingwebhookconfigurations"): o.validatingConfig,
	}
}

// byNameManager is the manager as cert-controller's rotator sees it: the cache it builds
// from GetConfig reads through byNameTransport. Its writes go through the manager's own
// client, by name already.
type byNameManager struct {
	manager.Manager
	cfg *rest.Config
}

func (m byNameManager) GetConfig() *rest.Config { return m.cfg }

func newByNameManager(mgr manager.Manager, names map[string]string) manager.Manager {
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return byNameTransport{next: rt, names: names} })
	return byNameManager{Manager: mgr, cfg: cfg}
}
