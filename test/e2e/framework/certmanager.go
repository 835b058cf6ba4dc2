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
)

// CertManager is cert-manager's own controller and CA injector (built by
// hack/build-certmanager.sh from the github.com/cert-manager/cert-manager version
// hack/tools-certmanager pins) running as two local processes against a cluster, with
// the CRDs that module ships (deploy/crds).
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
	for _, component := range []string{"controller", "cainjector"} {
		if err := m.start(c, work, component); err != nil {
			m.Stop()
			return nil, err
		}
	}
	return m, nil
}

func (m *CertManager) start(c *Cluster, work, component string) error {
	m.Logs[component] = filepath.Join(work, component+".log")
	logFile, err := os.Create(m.Logs[component])
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(BinDir, "certmanager"), component, "--kubeconfig="+c.Kubeconfig)
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
