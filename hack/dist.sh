#!/usr/bin/env bash
# `make dist`: release archives of kubectl-litepool and the krew manifest with their
# sha256s.
#
#   hack/dist.sh VERSION [OUTDIR]
#
# VERSION is a semantic version starting with v (krew refuses anything else); OUTDIR
# defaults to _output/dist. For each platform it writes
#   kubectl-litepool_VERSION_OS_ARCH.tar.gz (.zip on Windows)
# holding kubectl-litepool (.exe), kubectl_complete-litepool (.cmd) and LICENSE, then
#   litepool.yaml      krew/litepool.yaml rendered with the archives' sha256s
#   checksums.txt      sha256sum of every archive
# and checks the manifest and the archives by krew's rules (hack/disttool verify).
#
# DIST_PLATFORMS="linux/amd64" builds some platforms only (tests do, to spare the
# cross-compiles); the manifest then lists those only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

die() { echo "dist.sh: $*" >&2; exit 1; }

version=${1:-}
[ -n "$version" ] || die "usage: hack/dist.sh VERSION [OUTDIR]"
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$'
[[ $version =~ $semver ]] || die "VERSION $version is not a semantic version starting with v (krew needs one): tag the release vX.Y.Z or run make dist VERSION=v0.1.0"
out=${2:-$root/_output/dist}
all="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64"
platforms=${DIST_PLATFORMS:-$all}
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
ldflags="-s -w -X github.com/runwhere-ai/litepool/pkg/version.Version=$version -X github.com/runwhere-ai/litepool/pkg/version.Commit=$commit"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
# Only what this script writes is removed: OUTDIR may be a directory the caller owns.
rm -f "$out"/kubectl-litepool_*.tar.gz "$out"/kubectl-litepool_*.zip "$out/litepool.yaml" "$out/checksums.txt"

go build -o "$work/disttool" ./hack/disttool

for p in $platforms; do
  os=${p%/*} arch=${p#*/}
  stage="$work/$os-$arch"
  mkdir -p "$stage"
  if [ "$os" = windows ]; then
    exe=.exe ext=zip script=kubectl_complete-litepool.cmd
  else
    exe='' ext=tar.gz script=kubectl_complete-litepool
  fi
  echo "building kubectl-litepool $version for $os/$arch"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "$ldflags" \
    -o "$stage/kubectl-litepool$exe" ./cmd/kubectl-litepool
  install -m 0755 "cmd/kubectl-litepool/$script" "$stage/$script"
  install -m 0644 LICENSE "$stage/LICENSE"
  "$work/disttool" pack "$out/kubectl-litepool_${version}_${os}_${arch}.$ext" "$stage"
done

partial=
[ "$platforms" = "$all" ] || partial=-partial
"$work/disttool" render -template krew/litepool.yaml -version "$version" -dir "$out" $partial -o "$out/litepool.yaml"
(cd "$out" && sha256sum kubectl-litepool_"$version"_* >checksums.txt)
verify_all=-all-platforms
[ -z "$partial" ] || verify_all=
"$work/disttool" verify -manifest "$out/litepool.yaml" -dir "$out" $verify_all
echo "release files in $out:"
(cd "$out" && stat -c "  %10s  %n" kubectl-litepool_"$version"_* litepool.yaml checksums.txt)
