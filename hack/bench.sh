#!/usr/bin/env bash
# `make bench`: runs every bench/*/run.sh in turn. Each prints its figures side by side
# with its baseline, measured in the same run on the same machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
shopt -s nullglob
ran=0
for run in "$root"/bench/*/run.sh; do
  echo "=== $(basename "$(dirname "$run")") ==="
  bash "$run"
  ran=$((ran+1))
  echo
done
[ "$ran" -gt 0 ] || { echo "no benchmarks under bench/" >&2; exit 1; }
