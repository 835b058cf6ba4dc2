#!/usr/bin/env bash
# bench/lib.sh: what the benches that need a populated cluster share. Source it after
# setting root, bin, out, name, nodes and pods; then call bench_cluster.
#
# bench_cluster starts the kwok cluster $name (API server and kwok only: no scheduler,
# no controller-manager, no admission, no client QPS limits), installs the Pool CRD and
# populates it with bench/getpools/populate: $nodes accelerator nodes and $pods pods.
# It writes $KUBECONFIG and, unless BENCH_KEEP is set, tears the cluster down at exit.
# BENCH_REUSE=1 measures on the cluster a BENCH_KEEP=1 run left instead. BENCH_CLUSTER
# names the cluster, so that two benches can share one (hack/bench.sh, size by size).

# The sourcing script sets root, bin, out, name, nodes and pods.
# shellcheck disable=SC2154

say() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*"; }

bench_teardown() { hack/cluster.sh down "$name" >/dev/null 2>&1 || true; }

bench_cluster() {
  export KUBECONFIG=$out/kubeconfig
  [ -n "${BENCH_KEEP:-}" ] || trap bench_teardown EXIT
  if [ -n "${BENCH_REUSE:-}" ] && "$bin/kwokctl" get kubeconfig --name "$name" >"$KUBECONFIG" 2>/dev/null &&
    kubectl get --raw /readyz >/dev/null 2>&1; then
    say "reusing the running cluster $name"
    return
  fi
  bench_teardown
  say "starting cluster $name"
  hack/cluster.sh create "$name" bench/getpools/kwokctl.yaml \
    --disable kube-controller-manager,kube-scheduler --kube-admission=false --disable-qps-limits \
    >"$out/create.log" 2>&1 || { cat "$out/create.log" >&2; exit 1; }
  "$bin/kwokctl" get kubeconfig --name "$name" >"$KUBECONFIG"
  kubectl apply -f deploy/webhook/crd >/dev/null
  until kubectl wait --for=condition=Established --timeout=60s crd/pools.runwhere.ai >/dev/null 2>&1; do sleep 1; done
  say "populating: $nodes nodes, $pods pods"
  local start
  start=$(date +%s)
  "$out/populate" -nodes "$nodes" -pods "$pods" ${BENCH_DRA:+-dra} | grep -v '^populate: [0-9]* pods (' || exit 1
  say "populated in $(( $(date +%s) - start ))s"
}
