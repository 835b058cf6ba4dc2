#!/usr/bin/env bash
# Regenerates the Pool deep-copy functions and the CRD manifest from pkg/apis with
# controller-gen. Run after changing pkg/apis; commit the result.
#
# controller-gen is the one hack/tools-volcano pins, with which Volcano's CRDs are made too:
# one version in one place, and one build of it.
set -euo pipefail
cd "$(dirname "$0")/.."
cg="$PWD/_output/bin/controller-gen"
CGO_ENABLED=0 go build -C hack/tools-volcano -trimpath -o "$cg" sigs.k8s.io/controller-tools/cmd/controller-gen
"$cg" object paths=./pkg/apis/...
"$cg" crd paths=./pkg/apis/... output:crd:artifacts:config=deploy/webhook/crd
