//go:build tools

// Package tools pins controller-gen, which generates litepool's own deep-copy functions and
// CRDs (hack/update-codegen.sh), and what makes Volcano's CRDs for the e2e tests
// (hack/build-volcano-crds.sh): Volcano's API types (volcano.sh/apis), over which
// controller-gen makes them as Volcano does. Its own module: volcano.sh/apis and
// controller-gen ask for newer k8s.io versions than the main module's, and the main
// module never imports Volcano's Go types (the adapter writes unstructured objects).
package tools

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
	_ "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	_ "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	_ "volcano.sh/apis/pkg/apis/topology/v1alpha1"
)
