#!/usr/bin/env bash
# bench/getpools: `kubectl litepool get pools` and `get domains` on a cluster of 5,000
# accelerator nodes in 625 topology domains of 8 (the Ascend and NVIDIA presets' labels)
# and 40,000 pods, side by side in one run with
# two yardsticks on the same cluster:
#   floor    a minimal client-go program that pages through every node and pod and sums
#            accelerator requests (bench/getpools/floor): what any tool pays
#   kubectl  `kubectl get nodes -o json` plus `kubectl get pods -A -o json`
# Each tool runs BENCH_ROUNDS times (default 3), interleaved; then get pools again on the
# same cluster with DRA objects added (docs/dra.md), and the tables show the
# median wall time and the median peak RSS (/usr/bin/time). The cluster is built with
# bench/getpools/populate (many goroutines, one high-QPS client) and torn down at exit.
#
#   BENCH_NODES=5000 BENCH_PODS=40000 BENCH_ROUNDS=3 bench/getpools/run.sh
#
# While optimising: BENCH_KEEP=1 leaves the cluster running at the end, and
# BENCH_REUSE=1 measures on that cluster instead of building a new one (then
# `hack/cluster.sh down bench-getpools` removes it).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=bench/lib.sh
source bench/lib.sh
bin=$root/_output/bin
out=$root/_output/bench/getpools
nodes=${BENCH_NODES:-5000} pods=${BENCH_PODS:-40000} rounds=${BENCH_ROUNDS:-3}
name=${BENCH_CLUSTER:-bench-getpools}
export KWOK_WORKDIR=$root/_output/kwok
mkdir -p "$out" "$KWOK_WORKDIR"

say "building the plugin, the floor and the populator"
[ -n "${BENCH_BUILT:-}" ] || make build >/dev/null # hack/bench.sh builds once for all
hack/gobuild.sh "$out/floor" -trimpath -ldflags '-s -w' ./bench/getpools/floor
hack/gobuild.sh "$out/populate" -trimpath -ldflags '-s -w' ./bench/getpools/populate
# The same plugin with list items decoded in full by the generated Unmarshal, under the
# same streaming pager: the yardstick of the protobuf scanner (pkg/inventory/decoder.go).
CGO_ENABLED=0 hack/gobuild.sh "$out/kubectl-litepool-unmarshal" -trimpath -tags inventory_unmarshal -ldflags '-s -w' ./cmd/kubectl-litepool
hack/build-control-plane.sh >/dev/null

bench_cluster

# measure NAME CMD...: one run; appends "wall_seconds max_rss_kb" to $out/NAME.times.
measure() {
  local label=$1; shift
  /usr/bin/time -f '%e %M' -o "$out/time.tmp" "$@" >"$out/$label.out" 2>"$out/$label.err" \
    || { echo "$label failed:"; cat "$out/$label.err"; exit 1; }
  cat "$out/time.tmp" >>"$out/$label.times"
}
export PATH=$bin:$PATH
rm -f "$out"/*.times
for round in $(seq "$rounds"); do
  say "round $round/$rounds"
  measure floor "$out/floor"
  measure litepool kubectl litepool get pools
  measure plugin-direct "$bin/kubectl-litepool" get pools
  measure plugin-unmarshal "$out/kubectl-litepool-unmarshal" get pools
  # Every Pool object has spec.topology (populate -domain-size 8: 625 domains at 5,000
  # nodes, 449 of them in the 30 pools with a Pool object), so get pools computes the
  # domains too; get domains lists each.
  measure litepool-domains kubectl litepool get domains
  # kubectl holds everything at once (4.5 GiB at 5,000 nodes): beyond that, left out.
  if [ "$nodes" -le 5000 ]; then
    measure kubectl-nodes kubectl get nodes -o json
    measure kubectl-pods kubectl get pods -A -o json
  fi
done

# What the tables must show, whatever the size (make bench-smoke runs this in make test):
# the rows populate built (every pool; every domain of the pools with a topology), and
# each pool's domains adding up to its get pools figures: every member is Ready,
# untainted and in a domain, so its free and total accelerators are its domains'.
check_rows() {
  local want_pools want_domains
  want_pools=$("$out/populate" -expect -nodes "$nodes" -pods "$pods" | awk '$1 == "pools" {print $2}')
  want_domains=$("$out/populate" -expect -nodes "$nodes" -pods "$pods" | awk '$1 == "domains" {print $2}')
  awk -v want_pools="$want_pools" -v want_domains="$want_domains" '
    FNR == 1 { next } # headers
    FILENAME ~ /litepool-domains.out$/ { split($4, a, "/"); free[$1] += a[1]; total[$1] += a[2]; domains++; next }
    { pools++; poolTotal[$1] = $3; poolFree[$1] = $5 }
    END {
      bad = 0
      if (pools != want_pools) { printf "get pools printed %d rows, populate built %d pools\n", pools, want_pools; bad = 1 }
      if (domains != want_domains) { printf "get domains printed %d rows, populate built %d domains in pools with a topology\n", domains, want_domains; bad = 1 }
      for (p in total) if (total[p] != poolTotal[p] || free[p] != poolFree[p]) {
        printf "pool %s: its domains add up to %d free of %d, get pools says %d free of %d\n", p, free[p], total[p], poolFree[p], poolTotal[p]; bad = 1 }
      if (bad) exit 1
      printf "rows: get pools %d, get domains %d, as populated; each pool'"'"'s domains add up to its free and total accelerators\n", pools, domains
    }' "$out/litepool.out" "$out/litepool-domains.out"
}
check_rows || { echo "get pools or get domains printed what the cluster does not hold"; exit 1; }

# median FILE COLUMN
median() { cut -d' ' -f"$2" "$1" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
# kubectl's two commands make one row: per round, wall times add and the peak is the larger.
[ ! -f "$out/kubectl-nodes.times" ] ||
  paste -d' ' "$out/kubectl-nodes.times" "$out/kubectl-pods.times" | awk '{printf "%.2f %d\n", $1+$3, ($2>$4?$2:$4)}' >"$out/kubectl.times"

floor_wall=$(median "$out/floor.times" 1)
echo
echo "get pools on $nodes nodes and $pods pods ($rounds rounds, medians; $(nproc) cores)"
printf '%-50s %10s %16s %10s\n' "command" "wall (s)" "peak RSS (MiB)" "vs floor"
row() {
  local label=$1 title=$2 wall rss
  wall=$(median "$out/$label.times" 1); rss=$(median "$out/$label.times" 2)
  printf '%-50s %10.2f %16.1f %9.2fx\n' "$title" "$wall" "$(echo "$rss" | awk '{print $1/1024}')" "$(echo "$wall $floor_wall" | awk '{print $1/$2}')"
}
row floor "floor (client-go pager, bench/getpools/floor)"
row litepool "kubectl litepool get pools"
row plugin-direct "kubectl-litepool get pools (without kubectl)"
row plugin-unmarshal "the same, items decoded by generated Unmarshal"
row litepool-domains "kubectl litepool get domains"
[ ! -f "$out/kubectl.times" ] || row kubectl "kubectl get nodes -o json + get pods -A -o json"
echo
lp_wall=$(median "$out/litepool.times" 1); lp_rss=$(median "$out/litepool.times" 2)
echo "$lp_wall $floor_wall $lp_rss" | awk '{
  printf "goal: wall within 1.25x of the floor: %.2fx %s\n", $1/$2, ($1 <= 1.25*$2 ? "(met)" : "(missed)");
  printf "goal: peak under 64 MiB: %.1f MiB %s\n", $3/1024, ($3 < 65536 ? "(met)" : "(missed)") }'
echo "$(median "$out/plugin-direct.times" 1) $(median "$out/plugin-unmarshal.times" 1)" | awk '{
  printf "scanner vs generated Unmarshal (same pager): %.2f s vs %.2f s, the scanner saves %.1f%% of wall time\n", $1, $2, 100*($2-$1)/$2 }'
dom_wall=$(median "$out/litepool-domains.times" 1); dom_rss=$(median "$out/litepool-domains.times" 2)
echo "$dom_wall $floor_wall $dom_rss $(grep -c . "$out/litepool-domains.out")" | awk '{
  printf "get domains (%d rows): wall within 1.25x of the floor: %.2fx %s; peak under 64 MiB: %.1f MiB %s\n", $4-1, $1/$2, ($1 <= 1.25*$2 ? "(met)" : "(missed)"), $3/1024, ($3 < 65536 ? "(met)" : "(missed)") }'
if [ -n "${BENCH_FIGURES:-}" ]; then # for the table hack/bench.sh prints
  echo "$dom_wall $floor_wall $dom_rss" | awk -v n="$nodes" '{
    printf "%s getpools.domains-floor %.2f\n%s getpools.domains-rss %.2f\n", n, $1/$2, n, $3/1024 }' >>"$BENCH_FIGURES"
  echo "$lp_wall $floor_wall $lp_rss $(median "$out/plugin-direct.times" 1) $(median "$out/plugin-unmarshal.times" 1)" | awk -v n="$nodes" '{
    printf "%s getpools.floor %.2f\n%s getpools.rss %.2f\n%s getpools.scanner %.1f\n", n, $1/$2, n, $3/1024, n, 100*($5-$4)/$5 }' >>"$BENCH_FIGURES"
fi
cmp -s "$out/plugin-direct.out" "$out/plugin-unmarshal.out" || { echo "the two decoders printed different tables:"; diff "$out/plugin-direct.out" "$out/plugin-unmarshal.out"; exit 1; }

# The same cluster with DRA objects added (a ResourceSlice of 8 GPUs a node, an allocated
# ResourceClaim a pod: docs/dra.md), measured beside the rounds without them; they are
# deleted after, so the benches after this one see the cluster they always did. With
# BENCH_DRA=1 the cluster had them from the start, and there is nothing to add.
if [ -z "${BENCH_DRA:-}" ]; then
  say "adding DRA objects: $nodes ResourceSlices, $pods allocated ResourceClaims"
  "$out/populate" -nodes "$nodes" -pods "$pods" -only-dra | grep -v '^populate: [0-9]* resourceclaims (' || exit 1
  rm -f "$out"/*-dra.times
  for round in $(seq "$rounds"); do
    say "round $round/$rounds with DRA objects"
    measure floor-dra "$out/floor" -dra
    measure litepool-dra kubectl litepool get pools
  done
  "$out/populate" -delete-dra >/dev/null || exit 1
  echo
  echo "get pools on the same cluster with DRA objects ($rounds rounds, medians)"
  printf '%-50s %10s %16s %10s\n' "command" "wall (s)" "peak RSS (MiB)" "vs floor"
  row litepool "kubectl litepool get pools, without DRA objects"
  row litepool-dra "kubectl litepool get pools, with DRA objects"
  row floor-dra "floor, also reading slices and claims"
  dra_wall=$(median "$out/litepool-dra.times" 1); dra_rss=$(median "$out/litepool-dra.times" 2)
  echo "$dra_wall $lp_wall $dra_rss $lp_rss" | awk '{
    printf "DRA objects cost get pools %.2fx the wall time and %+.1f MiB of peak RSS\n", $1/$2, ($3-$4)/1024 }'
  # The goal compares like with like: the floor that reads the same DRA objects.
  floor_dra_wall=$(median "$out/floor-dra.times" 1)
  if [ -n "${BENCH_FIGURES:-}" ]; then
    echo "$dra_wall $floor_dra_wall $dra_rss" | awk -v n="$nodes" '{
      printf "%s getpools.dra-floor %.2f\n%s getpools.dra-rss %.2f\n", n, $1/$2, n, $3/1024 }' >>"$BENCH_FIGURES"
  fi
fi
echo
echo "floor: $(cat "$out/floor.out")"
echo "kubectl litepool get pools (first and last lines):"
head -3 "$out/litepool.out"; echo "..."; tail -2 "$out/litepool.out"
