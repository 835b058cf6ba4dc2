#!/usr/bin/env bash
# Builds Kueue's controller-manager (sigs.k8s.io/kueue/cmd/kueue, the version hack/tools-kueue
# pins) into _output/bin/kueue for the queueing e2e tests (test/e2e/kueue). Its own module:
# Kueue builds with k8s.io v0.35 and controller-runtime v0.23, the main module with v0.36.
#
# One line of Kueue's main is changed (in a copy: the module cache is untouched):
# with its internal certificate management off, Kueue reads its metrics serving certificate
# from the fixed in-container path /etc/kueue/metrics/certs, which a test on a developer's
# machine must not write. The overlay reads KUEUE_METRICS_CERT_DIR first and falls back to
# that path; nothing else of Kueue changes. When Kueue's line changes, the build stops.
# The copy is built as the main package of a module beside it, with hack/tools-kueue's
# go.mod and go.sum, so every other package is Kueue's own at the pinned version.
#
# Rebuilt only when missing or built from other inputs (a stamp, as build-control-plane.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/_output/bin"
tools="$root/hack/tools-kueue"
work="$root/_output/tools-kueue"
mkdir -p "$bin" "$work"
# shellcheck source=hack/toolcache.sh
source "$root/hack/toolcache.sh"

inputs=$(cat "$tools/go.mod" "$tools/go.sum" "$0" <(go env GOVERSION) | sha256sum | cut -c1-16)
if tool_ready "$bin" kueue "$inputs"; then
  exit 0
fi

cd "$tools"
# go list -m names the module's directory only once it is in the module cache.
go mod download sigs.k8s.io/kueue
version=$(go list -m -f '{{.Version}}' sigs.k8s.io/kueue)
main="$(go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)/cmd/kueue/main.go"
from='metricsCertPath := "/etc/kueue/metrics/certs"'
to='metricsCertPath := func() string { if d := os.Getenv("KUEUE_METRICS_CERT_DIR"); d != "" { return d }; return "/etc/kueue/metrics/certs" }()'
if [ "$(grep -cF "$from" "$main")" != 1 ]; then
  echo "build-kueue: $main no longer has the line the overlay replaces: $from" >&2
  exit 1
fi
patched="$work/main.go"
cp "$tools/go.mod" "$tools/go.sum" "$work/"
while IFS= read -r line; do
  printf '%s\n' "${line/"$from"/"$to"}"
done <"$main" >"$patched"

echo "building kueue $version (sigs.k8s.io/kueue/cmd/kueue)"
(cd "$work" && CGO_ENABLED=0 go build -trimpath \
  -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$version" -o "$bin/kueue.tmp" .)
mv "$bin/kueue.tmp" "$bin/kueue"
tool_built "$bin" kueue "$inputs"
