#!/usr/bin/env bash
# `make release`: the release archives, the krew manifest and the image, all at the
# version in the file VERSION, which deploy/webhook's image tag and the docs' install
# lines name too (test/release checks that they do, first).
#
#   hack/release.sh
#
# Writes _output/dist (make dist) and _output/images/litepool-webhook.tar, tagged
# ghcr.io/runwhere-ai/litepool-webhook:VERSION (make image); docs/install.md says how to
# push it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

version=$(cat VERSION)
for tag in $(git tag --points-at HEAD 'v*'); do
  if [ "$tag" != "$version" ]; then
    echo "release.sh: HEAD is tagged $tag but VERSION says $version: set VERSION (and what test/release names) to $tag, or tag $version" >&2
    exit 1
  fi
done
go test -count=1 ./test/release
make dist image VERSION="$version"
