#!/usr/bin/env bash
# hack/gotest.sh LANE [GO TEST FLAGS...] -- PACKAGES...: go test, with each test binary
# kept once per machine so that an unchanged one is not linked again.
#
# go test links every test binary afresh on each run (its build cache keeps compiled
# packages, not linked test binaries), and linking make test's 85 test binaries took about
# 250 s of CPU, a fifth of a warm run's. Given -o DIR, go test writes each binary into DIR
# and still runs it; a binary already there whose build ID is the one go computes from
# its inputs (the same content-addressed ID its build cache keys on) is used as it is,
# without a link. The tests run every time: only the link is saved, and only when go
# itself finds the binary up to date. -trimpath (the Makefile's GOFLAGS) leaves clone
# paths out of the binaries, so a fresh clone (CI's) finds them up to date too.
#
# One directory holds one pkg.test per package name, so packages that share a last path
# element (pkg/health, pkg/plugin/health) go to separate go test runs, each with its own
# directory. They run side by side (run one after the other, the few of the second run
# linked alone on one core); the first streams, the others print when it is done.
#
# A lane's directories are one clone's at a time (flock): a binary another clone's run
# put there between go's check and its exec would be run instead. A run that finds the
# lane taken uses a directory of its own, deleted after, and links as go test does.
#
# LITEPOOL_BIN_CACHE chooses the directory (default ~/.cache/litepool/bin; the lanes are
# its test-LANE); removing it costs one link of each test binary. hack/gobuild.sh keeps
# programs the same way.
set -euo pipefail

lane=${1:?usage: hack/gotest.sh LANE [GO TEST FLAGS...] -- PACKAGES...}
shift
flags=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do flags+=("$1"); shift; done
[ "${1:-}" = -- ] || { echo "hack/gotest.sh: no -- before the packages" >&2; exit 2; }
shift
[ $# -gt 0 ] || { echo "hack/gotest.sh: no packages after --" >&2; exit 2; }

# shellcheck source=hack/toolcache.sh
source "$(dirname "$0")/toolcache.sh"
cache=$bin_cache
mkdir -p "$cache"
exec 8>"$cache/test-$lane.lock"
if flock -n 8; then
  dir=$cache/test-$lane
else
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  echo "hack/gotest.sh: another run holds $cache/test-$lane; linking into $dir" >&2
fi

# groups[i]: the packages whose name is the (i+1)th of that name in the list.
declare -A seen=()
groups=()
for pkg in "$@"; do
  name=${pkg##*/}
  i=${seen[$name]:-0}
  seen[$name]=$((i + 1))
  groups[i]="${groups[i]:-} $pkg"
done

# run I: go test of groups[I] into its own directory. A binary go test runs and discards
# is linked with -s -w; one it keeps (-o) is linked with its symbols and DWARF, which cost
# a cold run about half as much CPU again as the links themselves. Nothing here reads them
# (a panic's trace comes from the pcln table), so kept binaries are linked as discarded
# ones are; a caller's own -ldflags, coming after, replaces this.
#
# -vet=off: go test's own vet (a subset of go vet's analyzers) would run them again on
# every package it tests; make verify's golangci-lint runs all of go vet's default
# analyzers over the same packages and their tests (govet, run.tests in .golangci.yml).
# On a new machine that second pass type-checked each of the ~100 packages once more.
run() {
  mkdir -p "$dir/$1"
  # shellcheck disable=SC2086 # groups[i] is a list of import paths
  # 8>&-: the lock is this script's; the daemons tests start (kwokctl's control planes)
  # must not inherit it and hold it after the run.
  go test -ldflags='-s -w' -vet=off "${flags[@]}" -o "$dir/$1/" ${groups[$1]} 8>&-
}

logs=$(mktemp -d)
pids=()
for ((i = 1; i < ${#groups[@]}; i++)); do
  run "$i" >"$logs/$i" 2>&1 &
  pids[i]=$!
done
rc=0
run 0 || rc=$?
for ((i = 1; i < ${#groups[@]}; i++)); do
  wait "${pids[i]}" || rc=$?
  cat "$logs/$i"
done
rm -rf "$logs"
exit "$rc"
