#!/usr/bin/env bash
# A one-off of bench/rollout: the same rollout run by the binary from before node Jobs
# were watched (the parent of 9688f3e, "Node Jobs watched, not polled") and by this
# tree's, side by side. Not part of `make bench`: it builds an old tree.
#
#   bench/rollout/before.sh [flags of bench/rollout]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
change=${BEFORE_CHANGE:-9688f3e}
before=$(git rev-parse "$change^")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "building litepool-webhook at $(git log -1 --format='%h %s' "$before") (before $change)"
git archive "$before" | tar -x -C "$tmp"
(cd "$tmp" && CGO_ENABLED=0 go build -trimpath -o "$tmp/litepool-webhook" ./cmd/webhook)
make build >/dev/null
# --domains=0: the by-domain comparison runs the tree's binary only, as run.sh does.
bash bench/rollout/run.sh --bin "before=$tmp/litepool-webhook" --bin "now=$root/_output/bin/litepool-webhook" --domains=0 "$@"
