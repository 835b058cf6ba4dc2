// Command localwebhook runs litepool-webhook in the background against a local cluster
// and registers deploy/webhook's webhook configurations with the API server by URL, the
// way the webhook e2e tests do (internal/localwebhook). `make demo` starts it
// and `make cluster-down` stops it.
//
//	go run ./hack/localwebhook start --kubeconfig K --dir _output/dev/webhook
//	go run ./hack/localwebhook stop  --kubeconfig K --dir _output/dev/webhook
//
// start issues a self-signed certificate into DIR/certs, starts the webhook in a session
// of its own (log DIR/webhook.log, pid DIR/webhook.pid), waits for /readyz, registers
// the configurations and waits until the API server calls the webhook. A webhook
// already running from DIR and ready is kept: start then only makes sure the
// configurations point at it. stop deletes the configurations first (pool pods and
// pools fail closed: with the configurations left, they could not be created), then
// stops every litepool-webhook serving from DIR. Both are idempotent.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
)

type options struct {
	kubeconfig, dir, binary, webhooks, namespace string
}

// state is what start leaves in DIR/webhook.json for the next start and for stop.
type state struct {
	PID     int    `json:"pid"`
	Addr    string `json:"addr"`
	Probe   string `json:"probe"`
	Metrics string `json:"metrics"`
	// KubeconfigSHA256 is the hash of the kubeconfig the webhook was started with: a
	// cluster made afresh under the same file has other ports and certificates, and
	// the running webhook would still be reading the old one.
	KubeconfigSHA256 string `json:"kubeconfigSHA256"`
}

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "start" && os.Args[1] != "stop") {
		fmt.Fprintln(os.Stderr, "usage: localwebhook start|stop --kubeconfig FILE --dir DIR [--binary FILE] [--webhooks FILE]")
		os.Exit(2)
	}
	var o options
	fs := flag.NewFlagSet("localwebhook "+os.Args[1], flag.ExitOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "_output/dev/kubeconfig", "the cluster's kubeconfig")
	fs.StringVar(&o.dir, "dir", "_output/dev/webhook", "directory for the certificates, log, pid and state")
	fs.StringVar(&o.binary, "binary", "_output/bin/litepool-webhook", "the webhook binary (make build)")
	fs.StringVar(&o.webhooks, "webhooks", "deploy/webhook/webhooks.yaml", "the webhook configurations to register")
	fs.StringVar(&o.namespace, "probe-namespace", "default", "namespace of the dry-run pod that checks the webhook is called")
	_ = fs.Parse(os.Args[2:])
	run := start
	if os.Args[1] == "stop" {
		run = stop
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintf(os.Stderr, "localwebhook %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func start(ctx context.Context, o options) error {
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	kube, err := client(o.kubeconfig)
	if err != nil {
		return err
	}
	cfgs, err := localwebhook.LoadConfigurations(o.webhooks)
	if err != nil {
		return err
	}
	sum, err := fileSHA256(o.kubeconfig)
	if err != nil {
		return err
	}
	if st, ok := readState(dir); ok && st.KubeconfigSHA256 == sum && alive(dir, st.PID) && localwebhook.Ready(st.Probe) {
		ca, err := os.ReadFile(filepath.Join(certDir(dir), "ca.crt"))
		if err != nil {
			return err
		}
		if err := register(ctx, kube, cfgs, st.Addr, ca, o.namespace); err != nil {
			return err
		}
		fmt.Printf("litepool-webhook is already running (pid %d) at https://%s\n", st.PID, st.Addr)
		return nil
	}
	// Not running, or running but not answering: start afresh.
	if err := killAll(dir); err != nil {
		return err
	}
	return launch(ctx, o, dir, sum, kube, cfgs)
}

func launch(ctx context.Context, o options, dir, kubeconfigSum string, kube kubernetes.Interface, cfgs localwebhook.Configurations) error {
	kubeconfig, err := filepath.Abs(o.kubeconfig)
	if err != nil {
		return err
	}
	binary, err := filepath.Abs(o.binary)
	if err != nil {
		return err
	}
	certs, err := localwebhook.NewCerts(certDir(dir))
	if err != nil {
		return err
	}
	logPath := filepath.Join(dir, "webhook.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	if err := localwebhook.EnsureNamespace(ctx, kube, localwebhook.Namespace); err != nil {
		return err
	}
	p, err := localwebhook.Launch(localwebhook.Options{Binary: binary, Kubeconfig: kubeconfig, Output: logFile, Detach: true,
		Namespace: localwebhook.Namespace, Flags: []string{"--cert-mode=files", "--cert-dir=" + certs.Dir, "--controllers=true", "--leader-elect=true"}})
	if err != nil {
		return err
	}
	st := state{PID: p.Cmd.Process.Pid, Addr: p.Addr, Probe: p.Probe, Metrics: p.Metrics, KubeconfigSHA256: kubeconfigSum}
	if err := writeState(dir, st); err != nil {
		p.Kill()
		return err
	}
	fail := func(err error) error {
		_ = cfgs.Unregister(context.Background(), kube)
		p.Kill()
		removeState(dir)
		return fmt.Errorf("%w\n%s", err, tail(logPath, 20))
	}
	if err := p.WaitReady(ctx, 60*time.Second); err != nil {
		return fail(err)
	}
	if err := register(ctx, kube, cfgs, p.Addr, certs.CAPEM, o.namespace); err != nil {
		return fail(err)
	}
	fmt.Printf("litepool-webhook started (pid %d) at https://%s; log %s\n", st.PID, st.Addr, rel(logPath))
	return nil
}

// register points the configurations at addr and waits until the API server calls it.
func register(ctx context.Context, kube kubernetes.Interface, cfgs localwebhook.Configurations, addr string, ca []byte, namespace string) error {
	cfgs.ByURL(addr, ca)
	if err := cfgs.Register(ctx, kube); err != nil {
		return err
	}
	return localwebhook.WaitEffective(ctx, kube, namespace, 30*time.Second)
}

func stop(ctx context.Context, o options) error {
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	// The cluster may be gone already: then so are the configurations.
	if _, err := os.Stat(o.kubeconfig); err == nil {
		err := unregister(ctx, o)
		if errors.Is(err, syscall.ECONNREFUSED) {
			err = nil // the cluster is down, and its configurations with it
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "localwebhook stop: webhook configurations left in place: %v\n", err)
		}
	}
	pids, err := find(dir)
	if err != nil {
		return err
	}
	if err := killAll(dir); err != nil {
		return err
	}
	removeState(dir)
	if len(pids) == 0 {
		fmt.Println("litepool-webhook is not running")
		return nil
	}
	fmt.Printf("litepool-webhook stopped (pid %s)\n", strings.Trim(fmt.Sprint(pids), "[]"))
	return nil
}

// unregister deletes the configurations if they are a local registration (every webhook
// called by URL); an in-cluster deployment's, called through its Service, stays.
func unregister(ctx context.Context, o options) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	kube, err := client(o.kubeconfig)
	if err != nil {
		return err
	}
	cfgs, err := localwebhook.LoadConfigurations(o.webhooks)
	if err != nil {
		return err
	}
	mut, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, cfgs.Mutating.Name, metav1.GetOptions{})
	if err == nil {
		for _, w := range mut.Webhooks {
			if w.ClientConfig.URL == nil {
				return fmt.Errorf("MutatingWebhookConfiguration %s calls a Service (an in-cluster deployment's), not a local webhook", mut.Name)
			}
		}
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	return cfgs.Unregister(ctx, kube)
}

func client(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.Timeout = 10 * time.Second
	return kubernetes.NewForConfig(cfg)
}

func fileSHA256(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", sha256.Sum256(b)), nil
}

func certDir(dir string) string { return filepath.Join(dir, "certs") }

// find lists the litepool-webhook processes serving from dir, found by their
// --cert-dir argument: the pid file can be stale or lost, the command line cannot.
// Zombies (exited, not yet reaped) do not count.
func find(dir string) ([]int, error) {
	out, err := exec.Command("ps", "-A", "-ww", "-o", "pid=", "-o", "stat=", "-o", "args=").Output()
	if err != nil {
		return nil, fmt.Errorf("ps: %w", err)
	}
	var pids []int
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || strings.HasPrefix(f[1], "Z") || !matches(dir, f[2:]) {
			continue
		}
		if pid, err := strconv.Atoi(f[0]); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

func matches(dir string, args []string) bool {
	if filepath.Base(args[0]) != "litepool-webhook" {
		return false
	}
	for _, a := range args[1:] {
		if a == "--cert-dir="+certDir(dir) {
			return true
		}
	}
	return false
}

func alive(dir string, pid int) bool {
	pids, err := find(dir)
	if err != nil {
		return false
	}
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}

// killAll stops every webhook serving from dir: SIGTERM (a graceful shutdown), then
// SIGKILL for any still there after 10 seconds.
func killAll(dir string) error {
	pids, err := find(dir)
	if err != nil || len(pids) == 0 {
		return err
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if pids, err = find(dir); err != nil || len(pids) == 0 {
			return err
		}
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if pids, err = find(dir); err != nil || len(pids) == 0 {
			return err
		}
	}
	return fmt.Errorf("litepool-webhook still running after SIGKILL: pid %v", pids)
}

func readState(dir string) (state, bool) {
	var st state
	b, err := os.ReadFile(filepath.Join(dir, "webhook.json"))
	if err != nil || json.Unmarshal(b, &st) != nil {
		return state{}, false
	}
	return st, st.PID > 0
}

func writeState(dir string, st state) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return errors.Join(os.WriteFile(filepath.Join(dir, "webhook.json"), append(b, '\n'), 0o644),
		os.WriteFile(filepath.Join(dir, "webhook.pid"), []byte(strconv.Itoa(st.PID)+"\n"), 0o644))
}

func removeState(dir string) {
	_ = os.Remove(filepath.Join(dir, "webhook.json"))
	_ = os.Remove(filepath.Join(dir, "webhook.pid"))
}

// tail is the last n lines of the file at path, to show why the webhook failed.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "webhook log (" + path + "):\n" + strings.Join(lines, "\n")
}

// rel shortens path to one relative to the working directory when it is below it.
func rel(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if r, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}
