package framework

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Warnings collects the warnings the API server relays from the webhook (a
// rest.WarningHandler).
type Warnings struct {
	mu   sync.Mutex
	msgs []string
}

// HandleWarningHeader keeps the warning's text.
func (w *Warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

// Take returns the warnings collected since the last Take, and forgets them.
func (w *Warnings) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// WarningClient is a clientset on the package's cluster whose warnings land in w.
func WarningClient(t *testing.T, w *Warnings) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(C.Config)
	cfg.WarningHandler = w
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return kube
}
