#!/usr/bin/env bash
# bench/bindings: P6's binding conditions at 2,000, 5,000 and 10,000 exclusive nodes
# (issue 30), against kube-apiserver with litepool-webhook and its controllers, which
# write the conditions (bench/bindings/main.go says what is measured). The cluster is
# the bench cluster of bench/getpools (API server and etcd only: no kwok-played nodes,
# no controller manager, whose node lifecycle controller would write to every one of
# the 10,000 plain nodes during the measurement); it grows from one size to the next.
#
#   bench/bindings/run.sh [flags of bench/bindings]
#
# BENCH_SMOKE=1: 40 exclusive nodes, one short round. BENCH_KEEP=1 leaves the cluster
# (`hack/cluster.sh down bench-bindings` removes it); BENCH_CLUSTER names another.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bin=$root/_output/bin
out=$root/_output/bench/bindings
name=${BENCH_CLUSTER:-bench-bindings}
export KWOK_WORKDIR=$root/_output/kwok
mkdir -p "$out" "$KWOK_WORKDIR"
say() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*"; }

[ -n "${BENCH_BUILT:-}" ] || make build >/dev/null # hack/bench.sh builds once for all
hack/build-control-plane.sh >/dev/null
hack/gobuild.sh "$out/bench-$name" -trimpath ./bench/bindings

if [ -n "${BENCH_SMOKE:-}" ]; then
  set -- --sizes=40 --open-nodes=10 --bindings=20 --rounds=1 --outage=5 --warmup=5 "$@"
fi
[ -n "${BENCH_KEEP:-}" ] || trap 'hack/cluster.sh down "$name" >/dev/null 2>&1 || true' EXIT
hack/cluster.sh down "$name" >/dev/null 2>&1 || true
say "starting cluster $name"
hack/cluster.sh create "$name" bench/getpools/kwokctl.yaml \
  --disable kube-controller-manager,kube-scheduler --disable-qps-limits \
  >"$out/create-$name.log" 2>&1 || { cat "$out/create-$name.log" >&2; exit 1; }
export KUBECONFIG=$out/kubeconfig-$name
"$bin/kwokctl" get kubeconfig --name "$name" >"$KUBECONFIG"
kubectl apply -f deploy/webhook/crd >/dev/null
until kubectl wait --for=condition=Established --timeout=60s crd/pools.runwhere.ai >/dev/null 2>&1; do sleep 1; done
say "measuring ($(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg))"
"$out/bench-$name" --kubeconfig "$KUBECONFIG" --webhook-bin "$bin/litepool-webhook" --root "$root" \
  --cluster-dir "$KWOK_WORKDIR/clusters/$name/" \
  --figures "${BENCH_FIGURES:-}" "$@"
say "done (load average $(cut -d' ' -f1-3 /proc/loadavg))"
