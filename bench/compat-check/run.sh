#!/usr/bin/env bash
# What the compatibility check costs a user: wall time of `check compat` with explicit
# versions (decode the embedded 2,100-line matrix, walk the chain, print) against the
# plugin's own floor, `version` (process start, cobra, kubectl flags), measured in the
# same run. No cluster is needed for either.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/_output/bin/kubectl-litepool"
[ -x "$bin" ] || make -C "$root" build >/dev/null
runs=${RUNS:-30}

mean_ms() { # mean wall time in ms of RUNS runs of the command
  local start end
  start=$(date +%s%N)
  for _ in $(seq "$runs"); do "$@" >/dev/null 2>&1 || true; done
  end=$(date +%s%N)
  echo $(( (end - start) / runs / 1000000 ))
}

"$bin" version >/dev/null 2>&1 # warm the page cache
base=$(mean_ms "$bin" version)
ascend=$(mean_ms "$bin" check compat --hardware Snt9B --driver 24.1.0.3 --firmware 7.5.0.5.220 --cann 8.2.RC1 --torch-npu 2.5.1.post1 --pytorch 2.5.1)
nvidia=$(mean_ms "$bin" check compat --hardware A100 --driver 535.104.05 --cuda 12.4 --pytorch 2.5.1)
printf '%-44s %8s\n' "command ($runs runs each)" "mean ms"
printf '%-44s %8s\n' "baseline: kubectl-litepool version" "$base"
printf '%-44s %8s\n' "check compat, Ascend chain of 6 links" "$ascend"
printf '%-44s %8s\n' "check compat, NVIDIA chain of 4 links" "$nvidia"
