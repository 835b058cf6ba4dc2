//go:build tools

// Package tools pins Kueue's controller-manager, which the e2e tests of queueing run
// against the local control plane. Its own module, so that Kueue's integrations stay out of
// the main module's go.sum; go.mod says which versions it builds with, and why.
package tools

import (
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
