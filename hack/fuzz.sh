#!/usr/bin/env bash
# Runs every Go fuzz target briefly (FUZZTIME each, default 10s): `go test -fuzz` takes
# one target at a time, so this finds them and runs them in turn.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-10s}
found=0
while IFS= read -r line; do
  file=${line%%:*}; name=$(sed -E 's/.*func (Fuzz[A-Za-z0-9_]+).*/\1/' <<<"$line")
  pkg=./$(dirname "$file")
  echo "fuzz $pkg $name ($fuzztime)"
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"
  found=$((found+1))
done < <(grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(f \*testing.F\)' pkg cmd 2>/dev/null || true)
echo "ran $found fuzz targets"
