package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// CAInjectorUser is cert-manager's CA injector as its chart installs it: ServiceAccount
// cert-manager-cainjector in namespace cert-manager, the identity
// deploy/webhook/components/cert-manager's guard holds to caBundle.
const CAInjectorUser = "system:serviceaccount:cert-manager:cert-manager-cainjector"

// CAInjectorGroups are the groups the API server gives CAInjectorUser.
var CAInjectorGroups = []string{"system:serviceaccounts", "system:serviceaccounts:cert-manager", "system:authenticated"}

// caInjectorRules are the chart's ClusterRole for the CA injector (v1.21.2,
// deploy/charts/cert-manager/templates/cainjector-rbac.yaml).
var caInjectorRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"cert-manager.io"}, Resources: []string{"certificates"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "create", "update", "patch"}},
	{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
	{APIGroups: []string{"apiregistration.k8s.io"}, Resources: []string{"apiservices"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
	{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
}

// caInjectorKubeconfig grants CAInjectorUser the chart's rights (the ClusterRole, and
// its leader-election Leases in kube-system) and writes a kubeconfig that acts as it.
func caInjectorKubeconfig(ctx context.Context, c *Cluster, work string) (string, error) {
	const name = "cert-manager-cainjector"
	sa := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "cert-manager", Name: name}}
	rbac := c.Kube.RbacV1()
	objects := []func() error{
		func() error {
			_, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: caInjectorRules}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: sa,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := rbac.Roles("kube-system").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name + ":leaderelection"}, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "update", "patch"},
					ResourceNames: []string{"cert-manager-cainjector-leader-election", "cert-manager-cainjector-leader-election-core"}},
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
			}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := rbac.RoleBindings("kube-system").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + ":leaderelection"}, Subjects: sa,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name + ":leaderelection"}}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objects {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("the CA injector's RBAC: %w", err)
		}
	}
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return "", err
	}
	for _, user := range cfg.AuthInfos {
		user.Impersonate, user.ImpersonateGroups = CAInjectorUser, CAInjectorGroups
	}
	path := filepath.Join(work, "cainjector.kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// CertManager is cert-manager's own controller and CA injector (built by
// hack/build-certmanager.sh from the github.com/cert-manager/cert-manager version
// hack/tools-certmanager pins) running as two local processes against a cluster, with
// the CRDs that module ships (deploy/crds). The CA injector runs as its chart's
// ServiceAccount (CAInjectorUser) with the chart's rights (impersonated): what
// litepool's guard lets that identity write is what the tests see it write.
type CertManager struct {
	Dir   string            // the module's directory in the Go module cache
	Logs  map[string]string // each component's log file
	procs []*exec.Cmd
	done  []chan struct{}
}

// StartCertManager installs cert-manager's CRDs in c and starts its controller and CA
// injector. Their readiness shows in what they do (a Certificate Ready, a CA bundle
// injected): the tests wait for that.
func StartCertManager(c *Cluster) (*CertManager, error) {
	ctx := context.Background()
	dir, err := moduleDir("hack/tools-certmanager", "github.com/cert-manager/cert-manager", "make certmanager")
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "deploy", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no cert-manager CRDs under %s/deploy/crds: %v", dir, err)
	}
	if err := InstallCRDFiles(ctx, c, files); err != nil {
		return nil, err
	}
	work := filepath.Join(Root, "_output", "e2e", c.Name, "certmanager")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	m := &CertManager{Dir: dir, Logs: map[string]string{}}
	injector, err := caInjectorKubeconfig(ctx, c, work)
	if err != nil {
		return nil, err
	}
	for component, kubeconfig := range map[string]string{"controller": c.Kubeconfig, "cainjector": injector} {
		if err := m.start(work, component, kubeconfig); err != nil {
			m.Stop()
			return nil, err
		}
	}
	return m, nil
}

func (m *CertManager) start(work, component, kubeconfig string) error {
	m.Logs[component] = filepath.Join(work, component+".log")
	logFile, err := os.Create(m.Logs[component])
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(BinDir, "certmanager"), component, "--kubeconfig="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("%w (build it first: make certmanager)", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(done) }()
	m.procs, m.done = append(m.procs, cmd), append(m.done, done)
	return nil
}

// Exited names a component that has exited (it should not), or is empty.
func (m *CertManager) Exited() string {
	for i, d := range m.done {
		select {
		case <-d:
			return m.procs[i].Args[1]
		default:
		}
	}
	return ""
}

// Stop ends both processes; the CRDs and cert-manager's objects stay.
func (m *CertManager) Stop() {
	for i, cmd := range m.procs {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
			<-m.done[i]
		}
	}
}

// moduleDir is where the Go module cache holds module at the version the tools module
// under tools (relative to Root) pins; build names the make target that downloads it.
func moduleDir(tools, module, build string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = filepath.Join(Root, tools)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("finding %s: %v: %s", module, err, stderr.String())
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", errors.New(module + " is not in the Go module cache: run " + build)
	}
	return dir, nil
}
