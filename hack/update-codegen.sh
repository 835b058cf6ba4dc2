#!/usr/bin/env bash
# Regenerates the Pool deep-copy functions and the CRD manifest from pkg/apis with
# controller-gen. Run after changing pkg/apis; commit the result.
set -euo pipefail
cd "$(dirname "$0")/.."
cg="go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0"
$cg object paths=./pkg/apis/...
$cg crd paths=./pkg/apis/... output:crd:artifacts:config=deploy/webhook/crd
