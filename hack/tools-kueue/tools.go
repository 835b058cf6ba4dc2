//go:build tools

// Package tools pins Kueue's controller-manager, which the e2e tests of queueing run
// against the local control plane. Its own module: Kueue v0.17.0 builds with k8s.io v0.35
// and controller-runtime v0.23, which would fight the main module's v0.36.
package tools

import (
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
