package localwebhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Options say how to run the webhook.
type Options struct {
	// Binary is the litepool-webhook executable.
	Binary string
	// Kubeconfig is the cluster the webhook reads pools, nodes and pods from.
	Kubeconfig string
	// Namespace is the webhook's namespace (--namespace): node departures are reserved
	// in ConfigMaps there (EnsureNamespace creates it).
	Namespace string
	// Port is the webhook server's port; 0 picks a free one.
	Port int
	// Flags are added after the address flags (--cert-mode, --cert-dir, ...).
	Flags []string
	// Output receives the webhook's log. For Detach it must be an *os.File, so that
	// the process keeps writing after its parent exits.
	Output io.Writer
	// Detach runs the webhook in a session of its own, to outlive the caller and any
	// signal sent to the caller's terminal or process group.
	Detach bool
}

// Process is a running litepool-webhook.
type Process struct {
	Cmd *exec.Cmd
	// Addr is the webhook server (HTTPS), Metrics and Probe the HTTP endpoints, all
	// host:port on 127.0.0.1.
	Addr, Metrics, Probe string
	done                 chan struct{}
}

// FreePort is a TCP port free on 127.0.0.1 at the time of the call.
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts is n distinct TCP ports free on 127.0.0.1 at the time of the call, none of
// them in avoid. Each is held open until all are chosen: a port closed at once can be
// the kernel's next pick, and the webhook then got the same port for its server and its
// metrics (e2e install once failed with "bind: address already in use"). A port in
// avoid (one a stopped process will take again) is held too and picked past.
func FreePorts(n int, avoid ...int) ([]int, error) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for len(ports) < n {
		if len(held) > n+len(avoid)+16 {
			return nil, fmt.Errorf("no %d free ports on 127.0.0.1 outside %v", n, avoid)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		held = append(held, l)
		if port := l.Addr().(*net.TCPAddr).Port; !slices.Contains(avoid, port) {
			ports = append(ports, port)
		}
	}
	return ports, nil
}

// Launch starts the webhook on free loopback ports; it does not wait for it to be
// ready (WaitReady).
func Launch(o Options) (*Process, error) {
	if _, err := os.Stat(o.Binary); err != nil {
		return nil, fmt.Errorf("%w (build the webhook first: make build)", err)
	}
	// The webhook server's port (o.Port when given), then metrics and probe.
	fixed := []int{}
	if o.Port != 0 {
		fixed = append(fixed, o.Port)
	}
	free, err := FreePorts(3-len(fixed), fixed...)
	if err != nil {
		return nil, err
	}
	ports := append(fixed, free...)
	loop := func(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
	p := &Process{Addr: loop(ports[0]), Metrics: loop(ports[1]), Probe: loop(ports[2]), done: make(chan struct{})}
	// Plain HTTP metrics unless Flags say --metrics-secure (the later flag wins): local
	// runs scrape them without a token.
	args := append([]string{"--host=127.0.0.1", "--port=" + strconv.Itoa(ports[0]),
		"--metrics-bind-address=" + p.Metrics, "--metrics-secure=false", "--health-probe-bind-address=" + p.Probe, "--kubeconfig=" + o.Kubeconfig}, o.Flags...)
	if o.Namespace != "" {
		args = append(args, "--namespace="+o.Namespace)
	}
	p.Cmd = exec.Command(o.Binary, args...)
	p.Cmd.Stdout, p.Cmd.Stderr = o.Output, o.Output
	if o.Detach {
		if _, ok := o.Output.(*os.File); !ok && o.Output != nil {
			return nil, errors.New("a detached webhook logs to a file: Output must be an *os.File")
		}
		p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := p.Cmd.Start(); err != nil {
		return nil, err
	}
	// Reap it while we are its parent; a detached process is reaped by whoever
	// inherits it once we exit.
	go func() { _ = p.Cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *Process) port() int {
	_, port, _ := net.SplitHostPort(p.Addr)
	n, _ := strconv.Atoi(port)
	return n
}

// Namespace is the webhook's namespace in local runs, as in deploy/webhook.
const Namespace = "litepool-system"

// EnsureNamespace creates the webhook's namespace unless it exists.
func EnsureNamespace(ctx context.Context, kube kubernetes.Interface, name string) error {
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// Done is closed when the process has exited (while the caller is its parent).
func (p *Process) Done() <-chan struct{} { return p.done }

// WaitReady waits until /readyz says the informer caches have synced and the
// certificate serves, and the metrics server accepts connections, or fails when the
// process exits or the timeout passes. The manager starts its metrics server on its own
// schedule, after readiness can already answer: on a busy machine a scrape made as soon
// as /readyz says 200 (or the Lease is held) finds nothing listening.
func (p *Process) WaitReady(ctx context.Context, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		select {
		case <-p.done:
			return false, fmt.Errorf("the webhook exited: %v", p.Cmd.ProcessState)
		default:
		}
		return Ready(p.Probe) && Listening(p.Metrics), nil
	})
	if err != nil {
		return fmt.Errorf("webhook never became ready: %w", err)
	}
	return nil
}

// Ready says whether the webhook with the probe address probe answers /readyz with 200.
func Ready(probe string) bool {
	code, _ := Get("http://" + probe + "/readyz")
	return code == http.StatusOK
}

// Listening says whether something accepts TCP connections at addr.
func Listening(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// Stop asks the process to end (SIGTERM) and waits until it has, killing it after
// grace. Unlike Kill it lets a leader give its Lease back (the controllers run with
// LeaderElectionReleaseOnCancel), so the next replica a test starts leads at once
// instead of waiting out the Lease.
func (p *Process) Stop(grace time.Duration) {
	if p.Cmd.Process == nil {
		return
	}
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err == nil {
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
	}
	p.Kill()
}

// Kill kills the process and waits until it has exited.
func (p *Process) Kill() {
	if p.Cmd.Process != nil {
		_ = p.Cmd.Process.Kill()
		<-p.done
	}
}

// Get fetches url; the code is 0 (and the body the error) when nothing answered.
func Get(url string) (int, string) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
