#!/usr/bin/env bash
# Builds Prometheus's promtool (github.com/prometheus/prometheus/cmd/promtool, the version
# hack/tools-promtool pins) into _output/bin/promtool, for `make test-unit`'s check and unit
# tests of the alerting rules in deploy/monitoring (hack/test-rules.sh).
#
# Rebuilt only when missing or built from other inputs (a stamp, as build-kueue.sh), so a
# machine builds it once. The build runs under nice: it is a large module, and the machine
# is shared with whatever else make test runs.
#
# Built with Prometheus's own tags for leaving out service discovery (its README, "Building
# with a selection of service discoveries"): remove_all_sd, and enable_kubernetes_sd, which
# promtool imports anyway. The rules' check and unit tests use no service discovery; the
# cloud SDKs they drop (AWS's EC2, Google's Compute, Azure's, Oracle's, and a dozen more)
# were about 80 of promtool's 143 MB of Go source, the largest part of a new machine's build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/_output/bin"
tools="$root/hack/tools-promtool"
mkdir -p "$bin"
# shellcheck source=hack/toolcache.sh
source "$root/hack/toolcache.sh"

inputs=$(cat "$tools/go.mod" "$tools/go.sum" "$0" <(go env GOVERSION) | sha256sum | cut -c1-16)
# One build at a time: make test starts one in the background (hack/test.sh) while
# make test-unit may reach its rules tests first; the second waits, then finds the first's.
exec 9>"$bin/.promtool.lock"
flock 9
if tool_ready "$bin" promtool "$inputs"; then
  exit 0
fi

cd "$tools"
version=$(go list -m -f '{{.Version}}' github.com/prometheus/prometheus)
echo "building promtool $version (github.com/prometheus/prometheus/cmd/promtool)"
CGO_ENABLED=0 nice go build -trimpath -tags remove_all_sd,enable_kubernetes_sd -ldflags "-s -w" -o "$bin/promtool.tmp" \
  github.com/prometheus/prometheus/cmd/promtool
mv "$bin/promtool.tmp" "$bin/promtool"
tool_built "$bin" promtool "$inputs"
