#!/usr/bin/env bash
# Builds cert-manager's controllers and CA injector (hack/tools-certmanager: the
# github.com/cert-manager/cert-manager version its go.mod pins) into _output/bin/certmanager,
# for the e2e tests of deploy/webhook/components/cert-manager (test/e2e/certmanager). Its own
# module, as Kueue's is: cert-manager's dependencies stay out of litepool's go.sum.
#
# Built at low priority and only when missing or built from other inputs (a stamp, as
# build-control-plane.sh and build-kueue.sh): once per machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/_output/bin"
tools="$root/hack/tools-certmanager"
mkdir -p "$bin"
# shellcheck source=hack/toolcache.sh
source "$root/hack/toolcache.sh"

inputs=$(cat "$tools/go.mod" "$tools/go.sum" "$tools/main.go" "$0" <(go env GOVERSION) | sha256sum | cut -c1-16)
if tool_ready "$bin" certmanager "$inputs"; then
  exit 0
fi

cd "$tools"
version=$(go list -m -f '{{.Version}}' github.com/cert-manager/cert-manager)
echo "building cert-manager $version (controller and cainjector, hack/tools-certmanager)"
CGO_ENABLED=0 nice go build -trimpath \
  -ldflags "-s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$version" -o "$bin/certmanager.tmp" .
mv "$bin/certmanager.tmp" "$bin/certmanager"
tool_built "$bin" certmanager "$inputs"
