#!/usr/bin/env bash
# `make bench`: runs every bench/*/run.sh in turn. Each prints its figures side by side
# with its baseline, measured in the same run on the same machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shopt -s nullglob
# BENCH_SMOKE=1 (make bench-smoke, run by make test): every bench at a size of tens of
# nodes, so that a bench cannot break unseen; its figures mean nothing at that size.
if [ -n "${BENCH_SMOKE:-}" ]; then
  export BENCH_NODES=${BENCH_NODES:-40} BENCH_PODS=${BENCH_PODS:-240} BENCH_ROUNDS=${BENCH_ROUNDS:-1} RUNS=${RUNS:-2}
  echo "smoke run: $BENCH_NODES nodes, $BENCH_PODS pods, $BENCH_ROUNDS round(s); the figures only show that each bench runs"
fi
ran=0
for run in "$root"/bench/*/run.sh; do
  echo "=== $(basename "$(dirname "$run")") ==="
  bash "$run"
  ran=$((ran+1))
  echo
done
[ "$ran" -gt 0 ] || { echo "no benchmarks under bench/" >&2; exit 1; }
