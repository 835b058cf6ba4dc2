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
bin=$root/_output/bin
out=$root/_output/bench/controller
nodes=${BENCH_NODES:-5000} pods=${BENCH_PODS:-40000}
name=bench-controller
export KWOK_WORKDIR=$root/_output/kwok
mkdir -p "$out" "$KWOK_WORKDIR"

say() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*"; }

say "building litepool-webhook and the populator"
make build >/dev/null
go build -trimpath -ldflags '-s -w' -o "$out/populate" ./bench/getpools/populate
go build -trimpath -ldflags '-s -w' -o "$out/bench" ./bench/controller
hack/build-control-plane.sh >/dev/null

teardown() { hack/cluster.sh down "$name" >/dev/null 2>&1 || true; }
export KUBECONFIG=$out/kubeconfig
if [ -n "${BENCH_REUSE:-}" ] && kubectl get --raw /readyz >/dev/null 2>&1; then
  say "reusing the running cluster $name"
  [ -n "${BENCH_KEEP:-}" ] || trap teardown EXIT
else
  [ -n "${BENCH_KEEP:-}" ] || trap teardown EXIT
  teardown
  say "starting cluster $name"
  "$bin/kwokctl" create cluster --name "$name" --runtime binary --config bench/getpools/kwokctl.yaml \
    --kube-apiserver-binary "$bin/kube-apiserver" --kube-controller-manager-binary "$bin/kube-controller-manager" \
    --kube-scheduler-binary "$bin/kube-scheduler" --kwok-controller-binary "$bin/kwok" --etcd-binary "$bin/etcd" \
    --disable kube-controller-manager,kube-scheduler --kube-admission=false --disable-qps-limits \
    --kubeconfig "" --wait 120s --quiet-pull >"$out/create.log" 2>&1 || { cat "$out/create.log" >&2; exit 1; }
  "$bin/kwokctl" get kubeconfig --name "$name" >"$KUBECONFIG"
  kubectl apply -f deploy/webhook/crd >/dev/null
  until kubectl wait --for=condition=Established --timeout=60s crd/pools.runwhere.ai >/dev/null 2>&1; do sleep 1; done
  say "populating: $nodes nodes, $pods pods"
  start=$(date +%s)
  "$out/populate" -nodes "$nodes" -pods "$pods" | grep -v '^populate: [0-9]* pods (' || exit 1
  say "populated in $(( $(date +%s) - start ))s"
fi
kubectl apply -f deploy/webhook/crd >/dev/null # status fields and columns of this build

say "measuring ($(nproc) cores)"
"$out/bench" --kubeconfig "$KUBECONFIG" --webhook-bin "$bin/litepool-webhook" "$@"
