#!/usr/bin/env bash
# `make bench`: runs every bench/*/run.sh and ends with one table of the figures issue 20
# sets goals for, each beside its goal, at each cluster size, measured in this one run on
# this machine. Each bench also prints its own figures beside its own baseline.
#
# A bench that populates a cluster (it sources bench/lib.sh) runs once per size, and the
# benches of one size share one cluster (BENCH_CLUSTER): 1,000 and 5,000 nodes with 8 pods
# a node, and 10,000 with BENCH_10K=1 (populating it takes long on a small machine);
# BENCH_SIZES="1000 2000" chooses others. The other benches run once.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
shopt -s nullglob
export KWOK_WORKDIR=$root/_output/kwok
sizes=${BENCH_SIZES:-1000 5000}
[ -z "${BENCH_10K:-}" ] || sizes="$sizes 10000"
pods_per_node=8
# BENCH_SMOKE=1 (make bench-smoke, run by make test): every bench at a size of tens of
# nodes, so that a bench cannot break unseen; its figures mean nothing at that size.
if [ -n "${BENCH_SMOKE:-}" ]; then
  export BENCH_ROUNDS=${BENCH_ROUNDS:-1} RUNS=${RUNS:-2}
  sizes=${BENCH_NODES:-40} pods_per_node=6
  echo "smoke run: $sizes nodes, $((sizes * pods_per_node)) pods, $BENCH_ROUNDS round(s); the figures only show that each bench runs"
fi
# The binaries, built once (make bench and make bench-smoke have built them, and say so
# with BENCH_BUILT): a bench run alone builds them itself, but not when run from here, as
# a `go build` that finds its binary up to date still hashes every source file it
# depends on (make build: about 2.4 s of CPU).
[ -n "${BENCH_BUILT:-}" ] || make --no-print-directory build >/dev/null
export BENCH_BUILT=1
mkdir -p _output/bench
export BENCH_FIGURES=$root/_output/bench/figures
: >"$BENCH_FIGURES"
echo "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start"

sized=() once=()
for run in bench/*/run.sh; do
  if grep -q 'source bench/lib.sh' "$run"; then sized+=("$run"); else once+=("$run"); fi
done
[ $((${#sized[@]} + ${#once[@]})) -gt 0 ] || { echo "no benchmarks under bench/" >&2; exit 1; }

bench_names() { # bench_names RUN...: the benches' names, each followed by a space
  local run
  for run in "$@"; do run=${run%/run.sh}; printf '%s ' "${run##*/}"; done
}
run_once() { # run_once RUN...: each bench that runs once, in turn
  local run start
  for run in "$@"; do
    echo "=== $(basename "$(dirname "$run")") ==="
    start=$SECONDS
    bash "$run"
    echo "($(basename "$(dirname "$run")"): $((SECONDS - start)) s)"
    echo
  done
}
run_sized() { # every bench that populates a cluster, at each size
  local n first reuse run start # cluster stays global: the EXIT trap reads it
  for n in $sizes; do
    cluster=bench-$n
    trap 'hack/cluster.sh down "$cluster" >/dev/null 2>&1 || true' EXIT
    first=1
    for run in "${sized[@]}"; do
      echo "=== $(basename "$(dirname "$run")") at $n nodes ==="
      # The first bench of a size builds the cluster and leaves it; the others reuse it.
      reuse=1; [ -z "$first" ] || reuse=
      start=$SECONDS
      BENCH_NODES=$n BENCH_PODS=$((n * pods_per_node)) BENCH_CLUSTER=$cluster BENCH_KEEP=1 BENCH_REUSE=$reuse bash "$run"
      echo "($(basename "$(dirname "$run")") at $n nodes: $((SECONDS - start)) s)"
      first=
      echo
    done
    hack/cluster.sh down "$cluster" >/dev/null 2>&1 || true
  done
}

if [ -z "${BENCH_SMOKE:-}" ]; then
  run_once "${once[@]}"
  run_sized
else
  # A smoke run's figures mean nothing, so its benches run in three lanes side by side,
  # each bench with its own cluster, and each lane's output is printed whole after it:
  # the benches that run once in two lanes, the sized ones (one shared cluster) in the
  # third. Two lanes, the sized benches after half of the others, took 138 s of a warm
  # make test with the machine 38% idle (the benches wait on their clusters).
  lane_a=() lane_b=()
  for i in "${!once[@]}"; do
    if [ $((i % 2)) -eq 1 ]; then lane_a+=("${once[$i]}"); else lane_b+=("${once[$i]}"); fi
  done
  logs=$root/_output/bench/smoke-lanes
  mkdir -p "$logs"
  run_once "${lane_a[@]}" >"$logs/a.log" 2>&1 &
  pid_a=$!
  run_once "${lane_b[@]}" >"$logs/b.log" 2>&1 &
  pid_b=$!
  run_sized >"$logs/c.log" 2>&1 &
  pid_c=$!
  rc_a=0 rc_b=0 rc_c=0
  wait "$pid_a" || rc_a=$?
  wait "$pid_b" || rc_b=$?
  wait "$pid_c" || rc_c=$?
  cat "$logs/a.log" "$logs/b.log" "$logs/c.log"
  if [ "$rc_a" -ne 0 ] || [ "$rc_b" -ne 0 ] || [ "$rc_c" -ne 0 ]; then
    echo "bench smoke failed: lane a ($(bench_names "${lane_a[@]}")) exit $rc_a; lane b ($(bench_names "${lane_b[@]}")) exit $rc_b; lane c (the sized benches: $(bench_names "${sized[@]}")) exit $rc_c" >&2
    exit 1
  fi
fi

# goal_awk: how both tables judge a figure against its goal ("<= 1.05", ">= 0.95",
# "< 64 @5000": the last only at 5,000 nodes). met marks "?" a median of rounds (key-min
# and key-max recorded beside it) whose rounds fall on both sides of the goal: too wide to
# decide. v holds the figures, v[column, key].
goal_awk='
  function meets(x, g) {
    return (g[1] == "<=" && x + 0 <= g[2] + 0) || (g[1] == "<" && x + 0 < g[2] + 0) ||
      (g[1] == ">=" && x + 0 >= g[2] + 0) || (g[1] == ">" && x + 0 > g[2] + 0)
  }
  function met(x, goal, c, key,   g, r) {
    if (goal == "-") return ""
    split(goal, g, " ")
    if (g[3] != "" && g[3] != "@" c) return ""
    r = meets(x, g) ? " ok" : " MISS"
    if (((c, key "-min") in v) && ((c, key "-max") in v) && meets(v[c, key "-min"], g) != meets(v[c, key "-max"], g)) { r = r "?"; undecided = 1 }
    return r
  }'

# The table: one row a figure, one column a size; "any" figures do not depend on the
# cluster's size (the webhook bench's own small cluster).
echo "=== issue 20's figures, one run ($(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end) ==="
awk -v sizes="$sizes" "$goal_awk"'
  BEGIN {
    ns = split(sizes, size, " ")
    # key|title|goal (op and bound, and "@N" when the goal is set at N nodes only, as
    # issue 20 sets the memory goals at 5,000; "-" for none)
    n = split("webhook.peak|webhook: peak RSS after start (MiB)|<= 128 @5000;" \
              "webhook.steady|webhook: RSS when steady (MiB)|<= 128 @5000;" \
              "webhook.burst|webhook: peak RSS after a 1,000-pod burst (MiB)|<= 128 @5000;" \
              "webhook.anon|webhook: of it anonymous, at most (MiB)|-;" \
              "controller.peak|controller: peak RSS after start (MiB)|<= 160 @5000;" \
              "controller.steady|controller: RSS when steady (MiB)|<= 160 @5000;" \
              "controller.burst|controller: peak RSS after a 1,000-pod burst (MiB)|<= 160 @5000;" \
              "controller.anon|controller: of it anonymous, at most (MiB)|-;" \
              "controller.start|controller: start until every Pool has status (s)|-;" \
              "controller.lag|controller: status lag of one pod, median (s)|-;" \
              "controller.follow|controller: burst counted in status after (s)|-;" \
              "getpools.floor|get pools: wall time / floor|<= 1.25;" \
              "getpools.rss|get pools: peak RSS (MiB)|< 64;" \
              "getpools.scanner|get pools: wall the scanner saves vs Unmarshal (%)|-;" \
              "getpools.domains-floor|get domains: wall time / floor|<= 1.25;" \
              "getpools.domains-rss|get domains: peak RSS (MiB)|< 64;" \
              "getpools.dra-floor|get pools with DRA objects: wall / floor with DRA|<= 1.25;" \
              "getpools.dra-rss|get pools with DRA objects: peak RSS (MiB)|< 64 @5000;" \
              "webhook.creates|pod create: litepool / trivial, median of rounds|<= 1.05;" \
              "webhook.creates-min|pod create: litepool / trivial, lowest round|-;" \
              "webhook.creates-max|pod create: litepool / trivial, highest round|-;" \
              "webhook.creates-cpu|pod create: API server + etcd CPU, litepool / trivial, median|-;" \
              "webhook.own-cpu|pod create: own CPU, litepool / trivial, median|<= 2;" \
              "webhook.creates-p6|pod create: litepool / trivial with P6 config|-;" \
              "webhook.creates-gogc25|pod create: litepool at GOGC=25 / trivial|-;" \
              "webhook.denial|handler: P2 denial / allowed P1 request|<= 10", row, ";")
  }
  { v[$1, $2] = $3 }
  END {
    printf "%-52s %12s", "figure", "goal"
    for (i = 1; i <= ns; i++) printf " %13s", size[i] " nodes"
    printf " %14s\n", "per 1k nodes"
    for (r = 1; r <= n; r++) {
      split(row[r], f, "|"); key = f[1]
      printf "%-52s %12s", f[2], f[3]
      any = ((("any", key) in v))
      for (i = 1; i <= ns; i++) {
        s = any ? "any" : size[i]
        cell = ((s, key) in v) ? sprintf("%.2f%s", v[s, key], met(v[s, key], f[3], s, key)) : "-"
        if (any && i > 1) cell = "\""
        printf " %13s", cell
      }
      # growth between the smallest and the largest size, for the memory rows
      slope = "-"
      if (!any && ns > 1 && key ~ /peak|steady|burst|rss|anon/ && ((size[1], key) in v) && ((size[ns], key) in v))
        slope = sprintf("%+.1f", (v[size[ns], key] - v[size[1], key]) / ((size[ns] - size[1]) / 1000))
      printf " %14s\n", slope
    }
    if (undecided) print "?: the rounds fall on both sides of the goal; the median alone is too wide to decide"
  }' "$BENCH_FIGURES"

# Issue 30's binding figures (bench/bindings), one column a count of exclusive nodes
# (written xN in the figures file): P6's binding conditions as the controller writes
# them, and a second scheduler's bindings.
if grep -q '^x[0-9]* bindings\.' "$BENCH_FIGURES"; then
  echo
  echo "=== issue 30's binding figures, one run (columns: exclusive nodes) ==="
  awk "$goal_awk"'
    BEGIN {
      n = split("bindings.conditions|binding conditions the controller writes|-;" \
                "bindings.chars|their characters|-;" \
                "bindings.ratio|second scheduler onto other nodes: with conditions / no entry|>= 0.95;" \
                "bindings.open-rate|  with conditions (bindings/s)|-;" \
                "bindings.cpu-ratio|  API server + etcd CPU per binding, with conditions / no entry|-;" \
                "bindings.match-us|  API server match-condition time per binding (us)|<= 100;" \
                "bindings.match-floor-us|    the floor: one condition reading one field (us)|-;" \
                "bindings.change-in-ms|  API server + etcd CPU, entry put in + 100 bindings (ms)|-;" \
                "bindings.change-out-ms|  the same, entry taken out + 100 bindings (ms)|-;" \
                "bindings.excl-rate|second scheduler onto exclusive nodes, webhook up (bindings/s)|-;" \
                "bindings.excl-failed|  of them failed (webhook timeouts)|<= 0;" \
                "bindings.outage-open-failed|webhook down: bindings onto other nodes failed|<= 0;" \
                "bindings.outage-excl-refused|webhook down: share of bindings onto exclusive nodes refused|-", row, ";")
    }
    $1 ~ /^x[0-9]+$/ && $2 ~ /^bindings\./ { if (!($1 in seen)) { seen[$1] = 1; col[++nc] = $1 }; v[$1, $2] = $3 }
    END {
      printf "%-64s %10s", "figure", "goal"
      for (i = 1; i <= nc; i++) printf " %12s", substr(col[i], 2) " excl."
      printf "\n"
      for (r = 1; r <= n; r++) {
        split(row[r], f, "|")
        printf "%-64s %10s", f[2], f[3]
        for (i = 1; i <= nc; i++) printf " %12s", ((col[i], f[1]) in v) ? sprintf("%.2f%s", v[col[i], f[1]], met(v[col[i], f[1]], f[3], col[i], f[1])) : "-"
        printf "\n"
      }
      if (undecided) print "?: the rounds fall on both sides of the goal; the median alone is too wide to decide"
      print "The match time has a floor: one condition reading one field. Where the floor alone is above 100 us, no expression meets the goal (docs/webhook.md)."
    }' "$BENCH_FIGURES"
fi

# Issue 41's figure (bench/rollout): one pool of super pods rolled node by node and by
# domain, one column a pool shape (DxM in the figures file).
if grep -q '^[0-9]*x[0-9]* rollout\.' "$BENCH_FIGURES"; then
  echo
  echo "=== issue 41's figure, one run (columns: super pods x nodes; lower is better) ==="
  awk '
    $1 ~ /^[0-9]+x[0-9]+$/ && $2 ~ /^rollout\./ { if (!($1 in seen)) { seen[$1] = 1; col[++nc] = $1 }; v[$1, $2] = $3 }
    function cell(c, k) { return ((c, k) in v) ? sprintf("%.2f", v[c, k]) : "-" }
    function ratio(c, a, b) { return ((c, a) in v) && v[c, a] > 0 ? sprintf("%.2f", v[c, b] / v[c, a]) : "-" }
    END {
      n = split("wall|wall time (s)|rollout.node-wall|rollout.domain-wall;" \
                "unavailable|domain-unavailable (min), rollout status|rollout.node-unavailable|rollout.domain-unavailable;" \
                "observed|domain-unavailable (min), the bench'"'"'s watch|rollout.node-observed|rollout.domain-observed", row, ";")
      printf "%-64s", "figure"
      for (i = 1; i <= nc; i++) printf " %10s", col[i]
      printf "\n"
      for (r = 1; r <= n; r++) {
        split(row[r], f, "|")
        printf "%-64s", f[2] ", node by node"; for (i = 1; i <= nc; i++) printf " %10s", cell(col[i], f[3]); printf "\n"
        printf "%-64s", f[2] ", by domain"; for (i = 1; i <= nc; i++) printf " %10s", cell(col[i], f[4]); printf "\n"
        printf "%-64s", "  by domain / node by node"; for (i = 1; i <= nc; i++) printf " %10s", ratio(col[i], f[3], f[4]); printf "\n"
      }
    }' "$BENCH_FIGURES"
fi
