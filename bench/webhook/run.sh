#!/usr/bin/env bash
# litepool-webhook benchmarks (run by `make bench` through hack/bench.sh), each figure
# beside a baseline measured in the same run on the same machine:
#   1. handler cost per request (go test -bench): decode, judge, encode, against a cache
#      of 1000 nodes and 20000 pods, beside an allow-all controller-runtime handler;
#   2. HTTPS on loopback against the webhook binary at several concurrencies, beside an
#      allow-all controller-runtime server on the same TLS stack;
#   3. node removals through kube-apiserver: a departure reserved by the webhook (its
#      latency and the API calls it makes), beside the same removal with no webhook and a
#      label change the webhook judges from its cache, one at a time and 8 at a time;
#   4. pod creates through the real kube-apiserver with the webhook registered, beside
#      the same run without it, a trivial webhook, and litepool without its P6
#      placement webhook (before/after P6; rounds alternate).
# Needs `make build control-plane`. Starts its own cluster and removes it at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
name=bench-webhook
kubeconfig=$root/_output/bench/webhook/kubeconfig

benchtime=1s
if [ -n "${BENCH_SMOKE:-}" ]; then
  benchtime=20x
  set -- --requests=40 --duration=2s --concurrency=1,4 --pods=40 --rounds=1 --departures=4 "$@"
fi
echo "1. handler cost per request (go test -bench; informer-style cache of 1000 nodes, 20000 pods)"
hack/gotest.sh bench-webhook -run '^$' -bench '^BenchmarkAdmission$' -benchmem -benchtime "$benchtime" -count 1 -- ./pkg/admission |
  awk -v figures="${BENCH_FIGURES:-}" '/^BenchmarkAdmission\// {
         sub(/^BenchmarkAdmission\//, "", $1); sub(/-[0-9]+$/, "", $1)
         ns[NR]=$3; name[NR]=$1; b[NR]=$5; a[NR]=$7; if ($1 == "baseline-allow-all") base=$3; n[++k]=NR }
       END {
         if (k == 0 || base == "") { print "no BenchmarkAdmission results (or no baseline-allow-all case)" > "/dev/stderr"; exit 1 }
         printf "%-22s %12s %12s %10s %14s\n", "case", "ns/op", "B/op", "allocs/op", "vs baseline"
         for (i=1; i<=k; i++) { r=n[i]; printf "%-22s %12d %12d %10d %13.1fx\n", name[r], ns[r], b[r], a[r], ns[r]/base; t[name[r]]=ns[r] }
         # the table of hack/bench.sh: a P2 denial against an allowed P1 request
         if (figures != "" && t["pod-deny-P2"] && t["pod-mutate-P1-HCCL"])
           printf "any webhook.denial %.2f\n", t["pod-deny-P2"]/t["pod-mutate-P1-HCCL"] >> figures
       }'
echo

trap 'hack/cluster.sh down "$name" >/dev/null 2>&1 || true' EXIT
hack/cluster.sh up "$name" "$kubeconfig" >/dev/null
hack/cluster.sh fixtures "$kubeconfig" >/dev/null
echo "2./3. (cluster $name: kube-apiserver $("$root/_output/bin/kube-apiserver" --version | awk '{print $2}'), $(nproc) CPUs, load average $(cut -d' ' -f1 /proc/loadavg) at start)"
go run ./bench/webhook --kubeconfig "$kubeconfig" --cluster-dir "$root/_output/kwok/clusters/$name/" \
  --webhook-bin "$root/_output/bin/litepool-webhook" --root "$root" --figures "${BENCH_FIGURES:-}" "$@"
