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
#                           from the same inputs), e2e, bench smoke
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
phases=("compile:compile" "verify:verify" "unit:test-unit" "build:control-plane kueue volcano-crds certmanager kubelet" "e2e:test-e2e E2E_DEPS=" "bench smoke:bench-smoke BENCH_DEPS=")
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
  echo
  echo "== make test: time per phase"
  for line in "${times[@]}"; do echo "  $line"; done
  [ "$rc" -eq 0 ] || echo "  (stopped by a failure: exit $rc)"
}
trap summary EXIT

mkdir -p _output/test
rm -f _output/test/tools.done _output/test/times.* # children_cpu's, one per shell and run
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
  # shellcheck disable=SC2086 # targets is a list of make targets
  make --no-print-directory $targets
  children_cpu
  cpu=$((cpu_now - cpu))
  [ "$name" != build ] || cpu=$((cpu - tools_cpu))
  times+=("$(printf '%-12s %4d s  cpu %5d s' "$name" $((SECONDS - start)) "$cpu")")
  [ "$name" != compile ] || start_tools
done
