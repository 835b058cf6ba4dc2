#!/usr/bin/env bash
# Builds the local control plane into _output/bin: kube-apiserver, kube-controller-manager,
# kube-scheduler (k8s.io/kubernetes v1.36.3), etcd (go.etcd.io/etcd/server/v3, same module
# graph) and kwok/kwokctl v0.8.0. A binary is rebuilt only when it is missing or was
# built from other inputs (a stamp holds the hash of the tools module and these flags),
# so repeated runs cost nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/_output/bin"
tools="$root/hack/tools"
mkdir -p "$bin"
# shellcheck source=hack/toolcache.sh
source "$root/hack/toolcache.sh"

# shellcheck source=hack/k8s-version.sh
source "$root/hack/k8s-version.sh"
ldflags=$k8s_ldflags

inputs=$(cat "$tools/go.mod" "$tools/go.sum" "$tools/etcd/main.go" <(echo "$ldflags" "$(go env GOVERSION)") | sha256sum | cut -c1-16)

build() { # build NAME PACKAGE
  local out="$bin/$1"
  if tool_ready "$bin" "$1" "$inputs"; then return 0; fi
  echo "building $1 ($2)"
  (cd "$tools" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out.tmp" "$2")
  mv "$out.tmp" "$out"
  tool_built "$bin" "$1" "$inputs"
}

build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
build etcd ./etcd
build kwok sigs.k8s.io/kwok/cmd/kwok
build kwokctl sigs.k8s.io/kwok/cmd/kwokctl
