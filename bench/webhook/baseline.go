package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	_ "net/http/pprof" //nolint:gosec // served only with --baseline-pprof, on loopback
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	jsonpatch "gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runwhere-ai/litepool/pkg/policy"
)

// baselinePID is the process serving the baseline webhooks (the allow-all one and the
// trivial one), whose CPU time the pod-create rounds report beside litepool-webhook's.
var baselinePID int

// startBaseline runs this program again as the baseline server (serveBaseline) in a
// process of its own, so that the trivial webhook's CPU per create is read from /proc
// as litepool-webhook's is, apart from the bench's clients; pprof, when not "", is the
// address its /debug/pprof endpoints listen on.
func startBaseline(ctx context.Context, dir, pprof string) (string, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	port := freePort()
	log, err := os.Create(filepath.Join(dir, "baseline.log"))
	if err != nil {
		return "", nil, err
	}
	cmd := exec.CommandContext(ctx, self, fmt.Sprintf("--serve-baseline=%d", port), "--baseline-cert-dir="+dir, "--baseline-pprof="+pprof)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives the bench
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for i := 0; i < 100; i++ {
		if conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}); err == nil { //nolint:gosec // readiness probe only
			conn.Close()
			baselinePID = cmd.Process.Pid
			return addr, stop, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	out, _ := os.ReadFile(log.Name())
	return "", nil, fmt.Errorf("the baseline server did not start:\n%s", out)
}

// serveBaseline serves, from controller-runtime's server (the same TLS and HTTP stack
// as the webhook), an allow-all webhook and a trivial one on the webhook's own paths,
// until the process is killed.
func serveBaseline(port int, dir, pprof string) error {
	ctrllog.SetLogger(logr.Discard()) // as litepool-webhook at --zap-log-level=error: nothing to log
	if pprof != "" {
		go func() { _ = http.ListenAndServe(pprof, nil) }() //nolint:gosec // loopback, a bench
	}
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir})
	allow := &admission.Webhook{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("")
	})}
	srv.Register("/allow", allow)
	srv.Register("/validate-nodes", allow)
	srv.Register("/validate-pools", allow)
	srv.Register("/validate-pod-placement", allow)
	// The trivial mutating webhook: pins the pod to the pool it names, nothing else.
	srv.Register("/mutate-pods", &admission.Webhook{Handler: admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		var pod corev1.Pod
		if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		return admission.Patched("", jsonpatch.NewOperation("add", "/spec/nodeSelector", map[string]string{policy.LabelPool: pod.Labels[policy.LabelPool]}))
	})})
	return srv.Start(context.Background()) // until the bench kills the process
}
