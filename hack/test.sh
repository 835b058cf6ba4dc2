#!/usr/bin/env bash
# make test: every phase CI runs, in order, each as its own make target, and at the end
# (also when a phase fails) how long each took, so that a slow phase is seen where it is:
# its wall time, and the CPU time of the processes it ran (user + system, from the shell's
# `times`). CPU over wall says how many of the cores a phase kept busy: on a new machine
# the phases are CPU-bound, so CPU time, not wall time, is what a change must cut. It
# counts only processes waited for: the control planes of e2e and bench smoke, which
# kwokctl starts detached, are not in it (so those two phases show less than they use).
#
#   hack/test.sh            compile, verify, unit, build (the control plane, Kueue, Volcano's
#                           CRDs, cert-manager, the kubelet and the image, reused when built
#                           from the same inputs), e2e, bench smoke (started once e2e's
#                           last packages run, below)
#
# The third-party tools (tools_targets: promtool, and those only e2e needs) build in the
# background from the end of the compile phase, beside verify and unit: on a new machine
# they are most of the build phase, and their module downloads and single-threaded links
# leave a core idle that verify and unit fill (and the other way round). Each is kept once
# per machine (hack/toolcache.sh), so on a warm machine that job ends within seconds. The
# build phase waits for it.
#
# The compile phase (make compile) compiles what the main module's builds and tests use
# first, alone: the tools share most of it (hack/verify.sh samedeps), and two go commands
# that need a package not yet in Go's build cache at the same moment both compile it.
set -euo pipefail
cd "$(dirname "$0")/.."
set -m # the background job gets a process group of its own, to be stopped whole

# The build phase makes what test-e2e and bench-smoke would build first (the Makefile's
# E2E_DEPS and BENCH_DEPS), so those two run with them empty: checking up-to-date
# binaries again costs seconds of CPU (each go build hashes every source it depends on).
phases=("compile:compile" "verify:verify" "unit:test-unit" "build:control-plane kueue volcano-crds certmanager kubelet" "e2e:test-e2e E2E_DEPS=" "bench smoke:")
bench_targets="bench-smoke BENCH_DEPS="
# promtool first: make test-unit's rules tests need it (hack/build-promtool.sh lets one
# build run at a time, so the unit phase waits for this one rather than building twice).
tools_targets="promtool kueue certmanager volcano-crds control-plane kubelet"
times=()
tools_pid=
# children_cpu sets cpu_now to the user + system seconds of every process this shell has
# waited for. Called directly, never in $(...) or a pipe: a subshell's `times` reports
# its own children (none).
cpu_now=0
children_cpu() {
  local file="_output/test/times.$BASHPID" # this shell's own: the tools job runs one too
  times >"$file"
  cpu_now=$(awk 'NR == 2 {
    n = split($0, t, " "); s = 0
    for (i = 1; i <= n; i++) { split(t[i], ms, "m"); s += ms[1] * 60 + ms[2] }
    printf "%d", s }' "$file")
}
summary() {
  local rc=$? line
  [ -z "$tools_pid" ] || kill -- "-$tools_pid" 2>/dev/null || true
  [ -z "$bench_pid" ] || kill -- "-$bench_pid" 2>/dev/null || true
  echo
  echo "== make test: time per phase"
  for line in "${times[@]}"; do echo "  $line"; done
  [ "$rc" -eq 0 ] || echo "  (stopped by a failure: exit $rc)"
}
trap summary EXIT

mkdir -p _output/test
rm -f _output/test/tools.done _output/test/bench.done _output/test/e2e.done _output/test/times.* # children_cpu's, one per shell and run
tools_log=_output/test/tools.log

# start_tools: the tools job, in the background.
start_tools() {
  local start=$SECONDS
  # shellcheck disable=SC2086 # tools_targets is a list of make targets
  {
    rc=0
    make --no-print-directory $tools_targets || rc=$?
    children_cpu
    echo "$rc $((SECONDS - start)) $cpu_now" >_output/test/tools.done
  } >"$tools_log" 2>&1 &
  tools_pid=$!
}

# wait_tools: the background tools job's output, and its failure as the build phase's.
# tools_cpu is the job's CPU time, which the build phase's own leaves out.
tools_cpu=0
wait_tools() {
  local rc took
  wait "$tools_pid" || true
  tools_pid=
  cat "$tools_log"
  read -r rc took tools_cpu <_output/test/tools.done || { rc=1 took=0 tools_cpu=0; }
  times+=("$(printf '%-12s %4d s  cpu %5d s  (%s, in the background from the end of compile)' "tools" "$took" "$tools_cpu" "$tools_targets")")
  [ "$rc" -eq 0 ] || { echo "make $tools_targets failed (exit $rc): $tools_log" >&2; return 1; }
}

# Bench smoke starts before e2e ends: once no e2e package waits for a slot. go test
# runs E2E_PARALLEL packages at a time in the order given and prints each one's result
# in that order, so when all but E2E_PARALLEL results are printed, what is left is
# running and the last packages (the shortest) are ending: the cores they leave idle,
# and those bench smoke's lanes leave idle while they wait on their clusters, fill each
# other. Bench smoke beside the whole of e2e was measured slower (README); beside its
# last packages only, the machine was 17% idle over e2e's last two minutes against 41%
# without it, and bench smoke ended 52 s after e2e against 71-75 (one run each).
bench_pid=
e2e_end=0
bench_log=_output/test/bench.log
e2e_log=_output/test/e2e.log

# start_bench_after_e2e_queue: the bench smoke job, in the background, waiting for the
# moment above (or for e2e to end, whichever comes first).
start_bench_after_e2e_queue() {
  local packages parallel begin
  read -r packages parallel < <(make --no-print-directory -s e2e-plan)
  : >"$e2e_log"
  {
    while [ ! -e _output/test/e2e.done ] &&
      [ "$(grep -cE '^(ok|FAIL|\?)[[:space:]]+[^[:space:]]+/test/e2e/' "$e2e_log")" -lt $((packages - parallel)) ]; do
      sleep 2
    done
    begin=$SECONDS rc=0
    # shellcheck disable=SC2086 # bench_targets is a make target and its variables
    make --no-print-directory $bench_targets || rc=$?
    children_cpu
    echo "$rc $((SECONDS - begin)) $cpu_now $begin" >_output/test/bench.done
  } >"$bench_log" 2>&1 &
  bench_pid=$!
}

# wait_bench: the bench smoke job's output, time and CPU, and its failure as the phase's.
wait_bench() {
  local rc took cpu began beside=
  wait "$bench_pid" || true
  bench_pid=
  cat "$bench_log"
  read -r rc took cpu began <_output/test/bench.done || { rc=1 took=0 cpu=0 began=$e2e_end; }
  [ "$e2e_end" -le "$began" ] || beside="  (from $((e2e_end - began)) s before e2e ended)"
  times+=("$(printf '%-12s %4d s  cpu %5d s%s' "bench smoke" "$took" "$cpu" "$beside")")
  [ "$rc" -eq 0 ] || { echo "make $bench_targets failed (exit $rc)" >&2; return 1; }
}

for p in "${phases[@]}"; do
  name=${p%%:*} targets=${p#*:}
  children_cpu
  start=$SECONDS cpu=$cpu_now
  if [ "$name" = build ]; then
    # litepool's own binaries and image first: they need no tool, so they build beside
    # the tools job's last builds instead of after them. Then the tools (up to date).
    make --no-print-directory build image
    wait_tools
  fi
  if [ "$name" = "bench smoke" ]; then
    wait_bench
    continue
  fi
  if [ "$name" = e2e ]; then
    start_bench_after_e2e_queue
    # shellcheck disable=SC2086 # targets is a make target and its variables
    make --no-print-directory $targets | tee -a "$e2e_log"
    touch _output/test/e2e.done
    e2e_end=$SECONDS
  else
    # shellcheck disable=SC2086 # targets is a list of make targets
    make --no-print-directory $targets
  fi
  children_cpu
  cpu=$((cpu_now - cpu))
  [ "$name" != build ] || cpu=$((cpu - tools_cpu))
  times+=("$(printf '%-12s %4d s  cpu %5d s' "$name" $((SECONDS - start)) "$cpu")")
  [ "$name" != compile ] || start_tools
done
