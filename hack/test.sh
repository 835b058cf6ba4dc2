#!/usr/bin/env bash
# make test: every phase CI runs, in order, each as its own make target, and at the end
# (also when a phase fails) how long each took, so that a slow phase is seen where it is:
# its wall time, and the CPU time of the processes it ran (user + system, from the shell's
# `times`). CPU over wall says how many of the cores a phase kept busy: on a new machine
# the phases are CPU-bound, so CPU time, not wall time, is what a change must cut. It
# counts only processes waited for: the control planes of e2e and bench smoke, which
# kwokctl starts detached, are not in it (so those two phases show less than they use).
#
#   hack/test.sh            verify, unit, build (the control plane, Kueue, Volcano's CRDs,
#                           cert-manager, the kubelet and the image, reused when built from
#                           the same inputs), e2e, and bench smoke beside e2e
#
# The third-party tools (tools_targets: promtool, and those only e2e needs) start building in the background at once,
# beside verify and unit: on a new machine they are most of the build phase, and their
# module downloads and single-threaded links leave a core idle that verify and unit fill
# (and the other way round). Each is kept once per machine (hack/toolcache.sh), so on a
# warm machine that job ends within seconds. The build phase waits for it.
#
# Bench smoke runs beside e2e, not after it: e2e's packages leave the cores idle for
# about an eighth of the phase (all three waiting on pods, containers or Jobs at once),
# and its last packages end one by one; bench smoke's two lanes fill that. Its output is
# printed whole once both have ended.
set -euo pipefail
cd "$(dirname "$0")/.."
set -m # each background job gets a process group of its own, to be stopped whole

phases=("verify:verify" "unit:test-unit" "build:build control-plane kueue volcano-crds certmanager image kubelet" "e2e:test-e2e")
# promtool first: make test-unit's rules tests need it (hack/build-promtool.sh lets one
# build run at a time, so the unit phase waits for this one rather than building twice).
# The control plane and the kubelet last: they share about 880 compiled packages with the
# main module (hack/verify.sh samedeps), which verify's lint and the unit phase compile
# meanwhile; built first, both would compile them at once, each for itself.
tools_targets="promtool kueue certmanager volcano-crds control-plane kubelet"
times=()
declare -A job_pids=()
# children_cpu sets cpu_now to the user + system seconds of every process this shell has
# waited for. Called directly, never in $(...) or a pipe: a subshell's `times` reports
# its own children (none).
cpu_now=0
# A background job's CPU joins this shell's children's when bash reaps it, which it does
# as soon as the job ends: a phase during which a job ended leaves that job's out again.
# jobs_cpu is the CPU of the jobs ended so far (each records its own in its .done file).
jobs_cpu() {
  local f cpu
  jobs_cpu=0
  for f in _output/test/*.done; do
    [ -e "$f" ] || continue
    read -r _ _ cpu <"$f"
    jobs_cpu=$((jobs_cpu + cpu))
  done
}
children_cpu() {
  local file="_output/test/times.$BASHPID" # this shell's own: each background job runs one too
  times >"$file"
  cpu_now=$(awk 'NR == 2 {
    n = split($0, t, " "); s = 0
    for (i = 1; i <= n; i++) { split(t[i], ms, "m"); s += ms[1] * 60 + ms[2] }
    printf "%d", s }' "$file")
}
summary() {
  local rc=$? line pid
  for pid in "${job_pids[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
  echo
  echo "== make test: time per phase"
  for line in "${times[@]}"; do echo "  $line"; done
  [ "$rc" -eq 0 ] || echo "  (stopped by a failure: exit $rc)"
}
trap summary EXIT

mkdir -p _output/test
rm -f _output/test/*.done _output/test/times.* # the jobs' and children_cpu's, one per run

# start_job NAME TARGETS: make TARGETS in the background, its output in
# _output/test/NAME.log; at its end it records its exit code, wall time and CPU time
# (its own `times`: the phases' CPU leaves a background job's out).
start_job() {
  local name=$1 targets=$2 start=$SECONDS
  rm -f "_output/test/$name.done"
  # shellcheck disable=SC2086 # targets is a list of make targets
  {
    rc=0
    make --no-print-directory $targets || rc=$?
    children_cpu
    echo "$rc $((SECONDS - start)) $cpu_now" >"_output/test/$name.done"
  } >"_output/test/$name.log" 2>&1 &
  job_pids[$name]=$!
}

# finish_job NAME LABEL NOTE: waits for job NAME, prints its output, adds its line to the
# summary, and fails as it failed.
finish_job() {
  local name=$1 label=$2 note=$3 rc took cpu
  wait "${job_pids[$name]}" || true
  unset "job_pids[$name]"
  cat "_output/test/$name.log"
  read -r rc took cpu <"_output/test/$name.done" || { rc=1 took=0 cpu=0; }
  times+=("$(printf '%-12s %4d s  cpu %5d s  (%s)' "$label" "$took" "$cpu" "$note")")
  [ "$rc" -eq 0 ] || { echo "$label failed (exit $rc): _output/test/$name.log" >&2; return 1; }
}

start_job tools "$tools_targets"
for p in "${phases[@]}"; do
  name=${p%%:*} targets=${p#*:}
  children_cpu; jobs_cpu
  start=$SECONDS cpu=$((cpu_now - jobs_cpu))
  if [ "$name" = build ]; then
    # litepool's own binaries and image first: they need no tool, so they build beside
    # the tools job's last builds instead of after them.
    make --no-print-directory build image
    finish_job tools tools "$tools_targets, in the background from the start"
  fi
  [ "$name" != e2e ] || start_job bench-smoke bench-smoke
  # shellcheck disable=SC2086 # targets is a list of make targets
  make --no-print-directory $targets
  children_cpu; jobs_cpu
  times+=("$(printf '%-12s %4d s  cpu %5d s' "$name" $((SECONDS - start)) $((cpu_now - jobs_cpu - cpu)))")
done
finish_job bench-smoke "bench smoke" "beside e2e, from its start"
