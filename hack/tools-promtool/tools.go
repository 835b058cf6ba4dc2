//go:build tools

// Package tools pins Prometheus's promtool, which `make test-unit` runs to check and unit-test
// litepool's alerting rules (deploy/monitoring). Its own module: Prometheus pulls in a
// dependency tree (cloud service discovery, OpenTelemetry, k8s.io at its own version) the
// main module must not take on.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
