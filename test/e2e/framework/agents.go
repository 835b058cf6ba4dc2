package framework

import (
	"context"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runwhere-ai/litepool/internal/localwebhook"
)

// PodEnd is how a pod an agent completes ends: exit 0 succeeds (Completed), any other
// fails (Error) with Message as the container's.
type PodEnd struct {
	Exit    int32
	Message string
}

// Terminate writes p's end into its status (not stored): the phase and one terminated
// container, what a kubelet reports.
func Terminate(p *corev1.Pod, end PodEnd) {
	term := &corev1.ContainerStateTerminated{ExitCode: end.Exit, Reason: "Completed", StartedAt: metav1.Now(), FinishedAt: metav1.Now()}
	p.Status.Phase = corev1.PodSucceeded
	if end.Exit != 0 {
		p.Status.Phase, term.Reason, term.Message = corev1.PodFailed, "Error", end.Message
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
		State: corev1.ContainerState{Terminated: term}}}
}

// CompletePods plays the kubelet for pods nothing runs (kwok's nodes run no container):
// every 100 ms it lists namespace's pods matching selector and ends each unfinished one
// that end claims (ok), as end says. It runs until the returned stop, or the test's end.
func CompletePods(t testing.TB, namespace, selector string, end func(p *corev1.Pod) (e PodEnd, ok bool)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			pods, err := C.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				continue
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
					continue
				}
				e, ok := end(p)
				if !ok {
					continue
				}
				Terminate(p, e)
				_, _ = C.Kube.CoreV1().Pods(namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// Scrape reads the Prometheus text of a litepool process's plain-HTTP metrics address.
func Scrape(t testing.TB, addr string) string {
	t.Helper()
	code, body := localwebhook.Get("http://" + addr + "/metrics")
	require.Equal(t, http.StatusOK, code, body)
	return body
}

var sampleLine = regexp.MustCompile(`(?m)^([a-z_:]+)(?:\{([^}]*)\})? (\S+)$`)

// Sample is the value of the first series of name in body whose labels contain every
// one of labels (each as written, e.g. `pool="p"`); false when there is none.
func Sample(t testing.TB, body, name string, labels ...string) (float64, bool) {
	t.Helper()
	for _, m := range sampleLine.FindAllStringSubmatch(body, -1) {
		if m[1] != name || !containsAll(m[2], labels) {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		require.NoError(t, err)
		return v, true
	}
	return 0, false
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// Litepool is one litepool-webhook process a test launched, and its log.
type Litepool struct {
	*localwebhook.Process
	Logs *localwebhook.LogBuffer
}

// LaunchLitepool runs litepool-webhook against the cluster with files certificates from
// certDir and flags, in litepool's namespace (made if missing), and waits until it is
// ready (caches synced). The test's end stops it (SIGTERM: a leader gives its Lease back
// for the next test's replica) and, if the test failed, prints its log.
func LaunchLitepool(t testing.TB, certDir string, flags ...string) *Litepool {
	t.Helper()
	logs := &localwebhook.LogBuffer{}
	require.NoError(t, localwebhook.EnsureNamespace(context.Background(), C.Kube, localwebhook.Namespace))
	p, err := localwebhook.Launch(localwebhook.Options{Binary: filepath.Join(BinDir, "litepool-webhook"),
		Kubeconfig: C.Kubeconfig, Namespace: localwebhook.Namespace, Output: logs,
		Flags: append([]string{"--cert-mode=files", "--cert-dir=" + certDir}, flags...)})
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("litepool-webhook %s log:\n%s", p.Addr, logs.String())
		}
	})
	require.NoError(t, p.WaitReady(context.Background(), 60*time.Second), logs.String())
	return &Litepool{Process: p, Logs: logs}
}

// WaitLeader waits until the process says it holds the controllers' Lease.
func (l *Litepool) WaitLeader(t testing.TB, timeout time.Duration) {
	t.Helper()
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return strings.Contains(strings.ToLower(l.Logs.String()), "successfully acquired lease"), nil
	}), "litepool-webhook %s never became leader:\n%s", l.Addr, l.Logs.String())
}
