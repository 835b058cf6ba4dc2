#!/usr/bin/env bash
# hack/gobuild.sh OUT [GO BUILD FLAGS...] PACKAGE: go build -o OUT, from a copy kept once
# per machine, linked only when go finds it out of date.
#
# go build -o FILE does not link when FILE's build ID is the one go computes from its
# inputs; but a fresh clone (CI's) has no _output, so its benches linked each of their
# programs again (about 40 s of CPU in bench smoke). The copy kept for OUT (named by OUT's
# path in the clone, under hack/toolcache.sh's bin_cache) is built there and copied
# to OUT, under a lock so that a clone never copies what another is writing.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: hack/gobuild.sh OUT [GO BUILD FLAGS...] PACKAGE" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
out=$1
shift
pkg=${*: -1}
flags=("${@:1:$#-1}")

# shellcheck source=hack/toolcache.sh
source "$root/hack/toolcache.sh"
cache=$bin_cache/build
rel=$(realpath -m --relative-to="$root" "$out")
kept=$cache/${rel//\//_}
mkdir -p "$cache" "$(dirname "$out")"
(
  flock 9
  # -buildvcs=false: go stamps a program with the commit it was built at (and whether the
  # tree was modified), so every new commit would link each one again; nothing reads it.
  go build -buildvcs=false "${flags[@]}" -o "$kept" "$pkg" 9>&-
  cp "$kept" "$out.tmp"
  mv -f "$out.tmp" "$out"
) 9>"$kept.lock"
