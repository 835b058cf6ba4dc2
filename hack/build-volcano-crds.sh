#!/usr/bin/env bash
# Makes Volcano's CRDs (Queue and PodGroup of scheduling.volcano.sh, Job of batch.volcano.sh,
# HyperNode of topology.volcano.sh) into _output/volcano-crds, the way Volcano makes its own
# (its Makefile's `manifests`: controller-gen crd:crdVersions=v1,generateEmbeddedObjectMeta=true
# over its API packages), from the versions hack/tools-volcano pins. test/e2e/volcano and the
# docs e2e install them, so that the API server validates every Volcano object litepool
# writes. The scheduler itself is not built here (the module proxy does not serve it).
#
# Rebuilt only when missing or made from other inputs (a stamp, as build-kueue.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/hack/tools-volcano"
out="$root/_output/volcano-crds"

inputs=$(cat "$tools/go.mod" "$tools/go.sum" "$0" <(go env GOVERSION) | sha256sum | cut -c1-16)
if [ "$(cat "$out/.stamp" 2>/dev/null)" = "$inputs" ]; then
  exit 0
fi

cd "$tools"
version=$(go list -m -f '{{.Version}}' volcano.sh/apis)
echo "making Volcano's CRDs (volcano.sh/apis $version) into $out"
rm -rf "$out.tmp"
mkdir -p "$out.tmp"
go run sigs.k8s.io/controller-tools/cmd/controller-gen \
  crd:crdVersions=v1,generateEmbeddedObjectMeta=true \
  paths=volcano.sh/apis/pkg/apis/scheduling/v1beta1 \
  paths=volcano.sh/apis/pkg/apis/batch/v1alpha1 \
  paths=volcano.sh/apis/pkg/apis/topology/v1alpha1 \
  output:crd:dir="$out.tmp"
echo "$inputs" >"$out.tmp/.stamp"
rm -rf "$out"
mv "$out.tmp" "$out"
