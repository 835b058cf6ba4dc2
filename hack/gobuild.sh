#!/usr/bin/env bash
# hack/gobuild.sh OUT [GO BUILD FLAGS...] PACKAGE: go build -o OUT, from a copy kept once
# per machine, linked only when go finds it out of date.
#
# go build -o FILE does not link when FILE's build ID is the one go computes from its
# inputs; but a fresh clone (CI's) has no _output, so its benches linked each of their
# programs again (about 40 s of CPU in bench smoke). The copy kept for OUT (named by OUT's
# path in the clone; LITEPOOL_BIN_CACHE as in hack/gotest.sh) is built there and copied
# to OUT, under a lock so that a clone never copies what another is writing.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: hack/gobuild.sh OUT [GO BUILD FLAGS...] PACKAGE" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
out=$1
shift
pkg=${*: -1}
flags=("${@:1:$#-1}")

cache=${LITEPOOL_BIN_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/litepool/bin}/build
rel=$(realpath -m --relative-to="$root" "$out")
kept=$cache/${rel//\//_}
mkdir -p "$cache" "$(dirname "$out")"
(
  flock 9
  go build "${flags[@]}" -o "$kept" "$pkg" 9>&-
  cp "$kept" "$out.tmp"
  mv -f "$out.tmp" "$out"
) 9>"$kept.lock"
