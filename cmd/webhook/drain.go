package main

import (
	"context"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// The API server keeps connections to a webhook pod alive and sends an admission
// request, a POST it never retries, on whichever it has. A pod that closed its
// listener the moment SIGTERM came lost the request in flight on such a connection
// ("write: broken pipe", seen in test/e2e/realnode while a webhook pod was deleted).
// So a terminating webhook goes on serving for a drain period and answers every request
// with "Connection: close": each kept-alive connection is closed by its next answer, and
// the API server dials again, reaching a pod that stays.

// drainingSignalHandler returns a context cancelled drain after the first SIGTERM or
// SIGINT, and closing, set at once; a second signal exits at once.
func drainingSignalHandler(drain time.Duration) (context.Context, *atomic.Bool) {
	ctx, cancel := context.WithCancel(context.Background())
	closing := &atomic.Bool{}
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		closing.Store(true)
		ctrl.Log.Info("terminating: closing kept-alive connections before the server stops", "drain", drain.String())
		select {
		case <-time.After(drain):
		case <-signals:
			os.Exit(1)
		}
		cancel()
		<-signals
		os.Exit(1)
	}()
	return ctx, closing
}

// drainingServer registers every handler behind closeWhenDraining.
type drainingServer struct {
	webhook.Server
	closing *atomic.Bool
}

func (s drainingServer) Register(path string, h http.Handler) {
	s.Server.Register(path, closeWhenDraining(h, s.closing))
}

// closeWhenDraining answers with "Connection: close" once the process is terminating:
// Go's server then closes the connection after the answer.
func closeWhenDraining(h http.Handler, closing *atomic.Bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if closing != nil && closing.Load() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}
