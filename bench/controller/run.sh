#!/usr/bin/env bash
# bench/controller: litepool-webhook's controllers (Pool status, per-pool gauges) on the
# cluster of bench/getpools (5,000 accelerator nodes, 40,000 pods, 40 pools), beside
# the same binary serving only the webhook: start-up time and CPU, idle CPU, peak RSS,
# how long Pool status takes to follow a pod added or removed, and a burst of 1,000 pods.
#
#   BENCH_NODES=5000 BENCH_PODS=40000 bench/controller/run.sh
#
# BENCH_KEEP=1 leaves the cluster running; BENCH_REUSE=1 measures on it again
# (`hack/cluster.sh down bench-controller` removes it).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=bench/lib.sh
source bench/lib.sh
bin=$root/_output/bin
out=$root/_output/bench/controller
nodes=${BENCH_NODES:-5000} pods=${BENCH_PODS:-40000}
name=${BENCH_CLUSTER:-bench-controller}
export KWOK_WORKDIR=$root/_output/kwok
mkdir -p "$out" "$KWOK_WORKDIR"

say "building litepool-webhook and the populator"
[ -n "${BENCH_BUILT:-}" ] || make build >/dev/null # hack/bench.sh builds once for all
hack/gobuild.sh "$out/populate" -trimpath -ldflags '-s -w' ./bench/getpools/populate
hack/gobuild.sh "$out/bench" -trimpath -ldflags '-s -w' ./bench/controller
hack/build-control-plane.sh >/dev/null

bench_cluster
kubectl apply -f deploy/webhook/crd >/dev/null # status fields and columns of this build

if [ -n "${BENCH_SMOKE:-}" ]; then set -- --idle=2s --lag-rounds=2 --churn-pods=20 "$@"; fi
say "measuring ($(nproc) cores)"
"$out/bench" --kubeconfig "$KUBECONFIG" --webhook-bin "$bin/litepool-webhook" \
  --figures "${BENCH_FIGURES:-}" --size "$nodes" "$@"
