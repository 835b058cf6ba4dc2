#!/usr/bin/env bash
# make test: every phase CI runs, in order, each as its own make target, and at the end
# (also when a phase fails) how long each took, so that a slow phase is seen where it is.
#
#   hack/test.sh            verify, unit, build (the control plane, Kueue, Volcano's CRDs,
#                           cert-manager, the kubelet and the image, reused when built from
#                           the same inputs), e2e, bench smoke
set -euo pipefail
cd "$(dirname "$0")/.."

phases=("verify:verify" "unit:test-unit" "build:build control-plane kueue volcano-crds certmanager image kubelet" "e2e:test-e2e" "bench smoke:bench-smoke")
times=()
summary() {
  local rc=$? line
  echo
  echo "== make test: time per phase"
  for line in "${times[@]}"; do echo "  $line"; done
  [ "$rc" -eq 0 ] || echo "  (stopped by a failure: exit $rc)"
}
trap summary EXIT

for p in "${phases[@]}"; do
  name=${p%%:*} targets=${p#*:}
  start=$SECONDS
  # shellcheck disable=SC2086 # targets is a list of make targets
  make --no-print-directory $targets
  times+=("$(printf '%-12s %4d s' "$name" $((SECONDS - start)))")
done
