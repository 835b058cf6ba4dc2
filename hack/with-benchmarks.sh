#!/usr/bin/env bash
# go test -exec hack/with-benchmarks.sh: runs a test binary with its Go benchmarks too,
# each once (-test.bench=. -test.benchtime=1x), so that none rots.
#
# Why not `go test -bench . -benchtime 1x`: given -bench, go test links every test binary
# before it runs any, then runs the packages one at a time (so that benchmarks never share
# the machine). make test-unit's benchmarks are run once to prove they still work, never
# timed, so that order bought nothing: test/dist (33 s) and pkg/controller (22 s) ran
# alone while a core idled. Through -exec go test sees no -bench, runs and links up to -p
# packages at once, and each binary still runs its benchmarks once, after its tests.
set -euo pipefail
exec "$@" -test.bench=. -test.benchtime=1x
