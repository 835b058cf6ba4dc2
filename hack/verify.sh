#!/usr/bin/env bash
# make verify: formatting, lint, shell scripts and generated code. Every tool comes from the
# Go module proxy or Debian's packages, so a fresh machine needs nothing installed by hand.
#
#   hack/verify.sh            all checks
#   hack/verify.sh gofmt|lint|shellcheck|samedeps|codegen|programs
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tools="$root/_output/tools"
# shellcheck source=hack/toolcache.sh
source "$root/hack/toolcache.sh"
golangci_version=v2.15.0

failed=()
check() { # check NAME: run verify_NAME, remember a failure, go on with the others
  echo "== verify $1"
  if "verify_$1"; then echo "ok: $1"; else failed+=("$1"); echo "FAILED: $1" >&2; fi
}

verify_gofmt() {
  local bad
  bad=$(git ls-files -z '*.go' | xargs -0 gofmt -l)
  [ -z "$bad" ] && return 0
  echo "gofmt would change these files (run: gofmt -w FILE):" >&2
  echo "$bad" >&2
  return 1
}

verify_lint() {
  local name="golangci-lint-$golangci_version" inputs
  local bin="$tools/$name"
  inputs=$(go env GOVERSION)
  if ! tool_ready "$tools" "$name" "$inputs"; then
    echo "installing golangci-lint $golangci_version into $tools"
    mkdir -p "$tools/gobin"
    GOBIN="$tools/gobin" go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$golangci_version"
    mv "$tools/gobin/golangci-lint" "$bin"
    tool_built "$tools" "$name" "$inputs"
  fi
  # Two clones linted at once (CI beside a developer's run) share golangci-lint's lock
  # file in /tmp: without this flag the second fails at once; with it, both run.
  "$bin" run --allow-parallel-runners ./...
  # hack/tools is a module of its own (the control plane); it has no code of ours to lint.
}

verify_shellcheck() {
  if ! command -v shellcheck >/dev/null; then
    echo "installing shellcheck from Debian's packages"
    { apt-get install -y -qq shellcheck || { apt-get update -qq && apt-get install -y -qq shellcheck; }; } >/dev/null \
      || { echo "shellcheck is missing and could not be installed (apt-get install shellcheck)" >&2; return 1; }
  fi
  shellcheck -x hack/*.sh .ci/run
}

# verify_codegen regenerates the deep-copy functions and the CRD and fails if they differ
# from the files in the tree, which are put back either way.
verify_codegen() {
  local saved rc=0
  saved=$(mktemp -d)
  cp -a pkg/apis deploy/webhook/crd "$saved/"
  hack/update-codegen.sh
  if ! diff -r "$saved/apis" pkg/apis >&2 || ! diff -r "$saved/crd" deploy/webhook/crd >&2; then
    echo "generated code is out of date: run make generate and commit the result" >&2
    rc=1
  fi
  rm -rf pkg/apis deploy/webhook/crd
  cp -a "$saved/apis" pkg/
  cp -a "$saved/crd" deploy/webhook/
  rm -rf "$saved"
  return $rc
}

# verify_samedeps fails when the modules make test builds compile a module they share at
# versions that could be one. With the same version (and the same flags: -trimpath, no
# cgo) two builds share the compiled package in Go's build cache; with -trimpath the
# cache keys on the version the build selected, so a replace directive to the same
# version does not make two builds share: the version compared is the selected one, with
# "=>VERSION" after it where a replacement brings another. Between the main module and
# hack/tools (the control plane and the kubelet) every shared module must be at one
# version: they share about 880 compiled packages (client-go, the API types, the API
# server library, gRPC, OpenTelemetry). hack/tools follows k8s.io/kubernetes's own
# versions: raise the main module's (go get MODULE@VERSION). A tools module (Kueue,
# cert-manager, promtool, controller-gen) must not build a shared module at an older
# version than those two do (go get MODULE@VERSION in it); a newer one its own release
# asks for stays, as Go's version selection never goes below what a module requires.
# shellcheck disable=SC2016 # $v is the template's variable, not the shell's
samedeps_format='{{with .Module}}{{if .Version}}{{$v := .Version}}{{.Path}} {{.Version}}{{with .Replace}}{{if ne .Version $v}}=>{{.Version}}{{end}}{{end}}{{end}}{{end}}'
# samedeps_list DIR [GO LIST FLAGS] PACKAGE...: "module version" of every module the
# packages' builds compile.
samedeps_list() {
  local dir=$1
  shift
  (cd "$dir" && go list -deps -f "$samedeps_format" "$@" | sort -u)
}
verify_samedeps() {
  local main tools differ rc=0 dir list
  main=$(samedeps_list . -test ./...) || return 1
  tools=$(samedeps_list hack/tools ./etcd k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubelet sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl) || return 1
  differ=$(join <(echo "$main") <(echo "$tools") | awk '$2 != $3 {print "  " $1 ": " $2 " in the main module, " $3 " in hack/tools"}')
  if [ -n "$differ" ]; then
    echo "the main module and hack/tools build these modules at different versions, so a new machine compiles them twice:" >&2
    echo "$differ" >&2
    rc=1
  fi
  for dir in hack/tools-kueue hack/tools-certmanager hack/tools-promtool hack/tools-volcano; do
    list=$(samedeps_tool "$dir") || { rc=1; continue; }
    differ=$(join <(sort -u <(echo "$main") <(echo "$tools")) <(echo "$list") | while read -r module ours theirs; do
      if semver_less "$theirs" "$ours"; then echo "  $module: $theirs (go get $module@$ours)"; fi
    done)
    [ -z "$differ" ] && continue
    echo "$dir builds these modules at older versions than the main module and hack/tools, so a new machine compiles them again:" >&2
    echo "$differ" >&2
    rc=1
  done
  return $rc
}
# samedeps_tool DIR: samedeps_list of what tools module DIR's build script builds.
samedeps_tool() {
  case $1 in
    hack/tools-kueue) samedeps_list "$1" sigs.k8s.io/kueue/cmd/kueue ;;
    hack/tools-certmanager) samedeps_list "$1" . ;;
    hack/tools-promtool) samedeps_list "$1" -tags remove_all_sd,enable_kubernetes_sd github.com/prometheus/prometheus/cmd/promtool ;;
    hack/tools-volcano) samedeps_list "$1" sigs.k8s.io/controller-tools/cmd/controller-gen ;;
  esac
}
# semver_less A B: whether module version A is older than B, by semantic versioning: the
# release numbers first, then a pre-release (a pseudo-version such as
# v1.36.12-0.20260120151049-f2248ac996af is one) before its release, and pre-releases in
# order. Build metadata (+incompatible) is ignored.
semver_less() {
  local a=${1#v} b=${2#v} ra rb pa pb
  a=${a%%+*} b=${b%%+*}
  ra=${a%%-*} rb=${b%%-*}
  pa=${a#"$ra"} pb=${b#"$rb"}
  if [ "$ra" != "$rb" ]; then
    [ "$(printf '%s\n%s\n' "$ra" "$rb" | sort -V | head -n1)" = "$ra" ]
    return
  fi
  [ -n "$pa" ] || return 1 # a release is never older than its pre-releases
  [ -n "$pb" ] || return 0
  [ "$pa" != "$pb" ] && [ "$(printf '%s\n%s\n' "$pa" "$pb" | sort -V | head -n1)" = "$pa" ]
}

# verify_programs fails when a script, the Makefile or a test runs a program that a fresh
# machine (hack/base-image-packages.txt and Go) lacks at that point: hack/hostprograms,
# with hack/host-programs.txt saying which package ships each program.
verify_programs() {
  go run ./hack/hostprograms
}

if [ $# -eq 0 ]; then set -- gofmt programs shellcheck samedeps codegen lint; fi
for c in "$@"; do check "$c"; done
if [ ${#failed[@]} -gt 0 ]; then
  echo "verify failed: ${failed[*]}" >&2
  exit 1
fi
echo "verify: all checks passed"
