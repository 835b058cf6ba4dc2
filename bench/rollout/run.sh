#!/usr/bin/env bash
# bench/rollout: the DriverRollout reconciler's API calls per pass (issue 32), a
# rollout over a pool of 1,000 kwok nodes run by litepool-webhook --controllers, counted
# by the process's own metrics (bench/rollout/main.go). The cluster is hack/cluster.sh's
# (kube-controller-manager runs the installer Jobs, kwok the nodes and their pods).
#
#   bench/rollout/run.sh [flags of bench/rollout, e.g. --bin before=PATH --bin now=PATH]
#
# Then issue 41's figure, by the tree's binary: a pool of 8 super pods × 4 kwok nodes
# with installs of 5 s, rolled node by node (maxUnavailable 1) and by domain
# (maxUnavailableDomains 1); wall time and domain-unavailable minutes of each, from the
# rollout's status and from the bench's watch of the cordons, and by domain / node by
# node (--domains, --per-domain, --domain-install; --domains=0 leaves it out,
# --nodes=0 runs only it).
#
# bench/rollout/before.sh runs it with the binary from before node Jobs were watched
# beside this one. BENCH_SMOKE=1: 20 nodes, and 2 super pods × 2 with installs of 1 s.
# BENCH_KEEP=1 leaves the cluster; BENCH_CLUSTER names another.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=$root/_output/bench/rollout
name=${BENCH_CLUSTER:-bench-rollout}
mkdir -p "$out"
say() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*"; }

[ -n "${BENCH_BUILT:-}" ] || make build >/dev/null # hack/bench.sh builds once for all
hack/gobuild.sh "$out/bench-$name" -trimpath ./bench/rollout
if [ -n "${BENCH_SMOKE:-}" ]; then
  set -- --nodes=20 --max-unavailable=50% --install-delay=1s --idle=2s --domains=2 --per-domain=2 --domain-install=1s "$@"
else
  # The first 5 minutes: a few passes of 100 nodes each. The whole rollout (--window=0)
  # took 17-21 minutes on 2 shared cores.
  set -- --window=5m "$@"
fi
[ -n "${BENCH_KEEP:-}" ] || trap 'hack/cluster.sh down "$name" >/dev/null 2>&1 || true' EXIT
hack/cluster.sh down "$name" >/dev/null 2>&1 || true
say "starting cluster $name"
hack/cluster.sh up "$name" "$out/kubeconfig-$name" >/dev/null
kubectl --kubeconfig "$out/kubeconfig-$name" apply -f deploy/webhook/crd >/dev/null
until kubectl --kubeconfig "$out/kubeconfig-$name" wait --for=condition=Established --timeout=60s crd/pools.runwhere.ai crd/driverrollouts.runwhere.ai >/dev/null 2>&1; do sleep 1; done
say "measuring ($(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg))"
has_bin=
for a in "$@"; do case $a in --bin|--bin=*) has_bin=1 ;; esac; done
[ -n "$has_bin" ] || set -- --bin "now=$root/_output/bin/litepool-webhook" "$@"
"$out/bench-$name" --kubeconfig "$out/kubeconfig-$name" "$@"
say "done (load average $(cut -d' ' -f1-3 /proc/loadavg))"
