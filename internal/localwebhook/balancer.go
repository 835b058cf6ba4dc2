package localwebhook

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Balancer is a TCP load balancer on loopback in front of several webhook replicas, as
// a Service is in a cluster: each connection goes to the next backend in turn, skipping
// backends that refuse it (a killed replica). TLS passes through, so every replica
// serves the same certificate.
type Balancer struct {
	// Addr is host:port the API server calls.
	Addr     string
	backends []string
	next     atomic.Uint64
	l        net.Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	// Connections counts the connections sent to each backend, by index.
	Connections []atomic.Int64
	// Ready, when set, says whether backend i may take connections (a Service sends
	// them only to ready endpoints); a backend that is not is skipped like one that
	// refuses.
	Ready func(i int) bool
	// only, when not 0, is 1 + the one backend new connections go to (SendNewTo).
	only atomic.Int64
}

// SendNewTo sends every new connection to backend i, or to all in turn again when i is
// negative: a test that must see a client open a connection to one replica steers it
// there, whatever the turn.
func (b *Balancer) SendNewTo(i int) { b.only.Store(int64(i) + 1) }

// NewBalancer listens on a free loopback port and forwards to backends (host:port).
func NewBalancer(backends ...string) (*Balancer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Balancer{Addr: l.Addr().String(), backends: backends, l: l, conns: map[net.Conn]struct{}{},
		Connections: make([]atomic.Int64, len(backends))}
	b.wg.Go(b.accept)
	return b, nil
}

func (b *Balancer) accept() {
	for {
		in, err := b.l.Accept()
		if err != nil {
			return
		}
		b.wg.Go(func() { b.forward(in) })
	}
}

// forward connects in to the first backend, in turn, that accepts the connection.
func (b *Balancer) forward(in net.Conn) {
	defer in.Close()
	start := b.next.Add(1)
	var out net.Conn
	for i := range len(b.backends) {
		idx := int((start + uint64(i)) % uint64(len(b.backends)))
		if b.Ready != nil && !b.Ready(idx) {
			continue
		}
		if only := b.only.Load(); only > 0 && idx != int(only-1) {
			continue
		}
		c, err := net.DialTimeout("tcp", b.backends[idx], time.Second)
		if err == nil {
			out = c
			b.Connections[idx].Add(1)
			break
		}
	}
	if out == nil {
		return // every backend refused: the API server sees the call fail
	}
	defer out.Close()
	if !b.track(in, out) {
		return
	}
	defer b.untrack(in, out)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tcp, ok := dst.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	<-done
}

func (b *Balancer) track(conns ...net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conns == nil {
		return false
	}
	for _, c := range conns {
		b.conns[c] = struct{}{}
	}
	return true
}

func (b *Balancer) untrack(conns ...net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range conns {
		delete(b.conns, c)
	}
}

// Close stops accepting, closes every open connection and waits for the forwarders.
func (b *Balancer) Close() error {
	err := b.l.Close()
	b.mu.Lock()
	for c := range b.conns {
		_ = c.Close()
	}
	b.conns = nil
	b.mu.Unlock()
	b.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Replicas are several webhook processes serving the same certificate behind one
// Balancer.
type Replicas struct {
	Options  Options
	Procs    []*Process
	Balancer *Balancer
	mu       sync.Mutex // guards Procs against Restart while the Balancer reads
}

// LaunchReplicas starts n webhooks with the same options (the same --cert-dir) and a
// Balancer in front of them. Each is ready before the next starts: free ports are
// picked by binding and releasing them, so a replica that has not bound its ports yet
// could be handed the same ones as the next.
func LaunchReplicas(ctx context.Context, o Options, n int, timeout time.Duration) (*Replicas, error) {
	r := &Replicas{Options: o}
	var addrs []string
	for range n {
		p, err := Launch(o)
		if err == nil {
			r.Procs = append(r.Procs, p)
			err = p.WaitReady(ctx, timeout)
		}
		if err != nil {
			r.Stop()
			return nil, err
		}
		addrs = append(addrs, p.Addr)
	}
	b, err := NewBalancer(addrs...)
	if err != nil {
		r.Stop()
		return nil, err
	}
	b.Ready = func(i int) bool { return Ready(r.probe(i)) }
	r.Balancer = b
	return r, nil
}

func (r *Replicas) probe(i int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.Procs[i].Probe
}

// WaitReady waits until every replica is ready.
func (r *Replicas) WaitReady(ctx context.Context, timeout time.Duration) error {
	for _, p := range r.Procs {
		if err := p.WaitReady(ctx, timeout); err != nil {
			return err
		}
	}
	return nil
}

// Restart kills replica i and starts it again on the same webhook port, so that the
// Balancer sends it connections once it listens again; it does not wait for it to be
// ready.
func (r *Replicas) Restart(i int) error {
	r.Procs[i].Kill()
	o := r.Options
	o.Port = r.Procs[i].port()
	p, err := Launch(o)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.Procs[i] = p
	r.mu.Unlock()
	return nil
}

// Stop kills every replica and closes the Balancer.
func (r *Replicas) Stop() {
	if r.Balancer != nil {
		_ = r.Balancer.Close()
	}
	for _, p := range r.Procs {
		p.Kill()
	}
}
