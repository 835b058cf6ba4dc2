#!/usr/bin/env bash
# Builds Kueue's controller-manager (sigs.k8s.io/kueue/cmd/kueue, the version hack/tools-kueue
# pins) into _output/bin/kueue for the queueing e2e tests (test/e2e/kueue). Its own module,
# built against the main module's k8s.io v0.36 and controller-runtime v0.24 (Kueue v0.17.0
# asks for v0.35 and v0.23; hack/tools-kueue's go.mod says why it does not get them).
#
# One line of Kueue's main is changed (in a copy: the module cache is untouched):
# with its internal certificate management off, Kueue reads its metrics serving certificate
# from the fixed in-container path /etc/kueue/metrics/certs, which a test on a developer's
# machine must not write. The overlay reads KUEUE_METRICS_CERT_DIR first and falls back to
# that path; nothing else of Kueue changes. When Kueue's line changes, the build stops.
# The copy is built as the main package of a module beside it, with hack/tools-kueue's
# go.mod and go.sum, so every other package is at the version that go.mod selects.
#
# And one generated file of Kubeflow Trainer's API (an integration Kueue links), in a copy
# of that module: its OpenAPI definitions name core/v1's WorkloadReference, an alpha type
# k8s.io/api v0.36 no longer has, by the type's method. The copy names it by the string
# that method returned ("io.k8s.api.core.v1.WorkloadReference"), so the definitions are
# the same; when the file no longer names the type, the build stops.
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

trainer_module=github.com/kubeflow/trainer/v2
trainer_file=pkg/apis/trainer/v1alpha1/zz_generated.openapi.go
trainer_from='corev1.WorkloadReference{}.OpenAPIModelName()'
go mod download "$trainer_module"
rm -rf "$work/trainer"
cp -R "$(go list -m -f '{{.Dir}}' "$trainer_module")" "$work/trainer"
chmod -R u+w "$work/trainer"
if ! grep -qF "$trainer_from" "$work/trainer/$trainer_file"; then
  echo "build-kueue: $trainer_module's $trainer_file no longer names $trainer_from: drop its copy from $0" >&2
  exit 1
fi
sed -i 's/corev1\.WorkloadReference{}\.OpenAPIModelName()/"io.k8s.api.core.v1.WorkloadReference"/g' "$work/trainer/$trainer_file"
(cd "$work" && go mod edit -replace="$trainer_module=./trainer")

echo "building kueue $version (sigs.k8s.io/kueue/cmd/kueue)"
(cd "$work" && CGO_ENABLED=0 go build -trimpath \
  -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$version" -o "$bin/kueue.tmp" .)
mv "$bin/kueue.tmp" "$bin/kueue"
tool_built "$bin" kueue "$inputs"
