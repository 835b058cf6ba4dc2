# shellcheck shell=bash
# Sourced by the scripts that build make test's tools (the control plane, the kubelet,
# Kueue, cert-manager, promtool, golangci-lint). Each tool is built into _output of the
# clone with a stamp of its inputs, and a copy is kept once per machine, keyed by the same
# inputs: a fresh clone (CI's) takes the copy instead of linking the tool again. Nothing
# else is shared between clones; a new machine builds each tool once.
#
# LITEPOOL_TOOL_CACHE chooses the directory (default ~/.cache/litepool/tools); removing it
# costs one build of each tool.
tool_cache=${LITEPOOL_TOOL_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/litepool/tools}
# bin_cache: where hack/gotest.sh and hack/gobuild.sh keep litepool's own test binaries
# and programs (LITEPOOL_BIN_CACHE chooses it); go itself decides when one is out of date.
# shellcheck disable=SC2034 # read by the scripts that source this file
bin_cache=${LITEPOOL_BIN_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/litepool/bin}

# tool_ready DIR NAME INPUTS: DIR/NAME is there and was built from INPUTS, or is now, copied
# from the machine's cache.
tool_ready() {
  local dir=$1 name=$2 inputs=$3
  local cached="$tool_cache/$name-$inputs"
  if [ -x "$dir/$name" ] && [ "$(cat "$dir/.$name.stamp" 2>/dev/null)" = "$inputs" ]; then
    [ -x "$cached" ] || tool_built "$dir" "$name" "$inputs" # built before the cache was
    return 0
  fi
  [ -x "$cached" ] || return 1
  mkdir -p "$dir"
  # A hard link where the cache shares the file system (the builds replace a tool by
  # renaming, never by writing into it), a copy elsewhere.
  ln -f "$cached" "$dir/$name.tmp" 2>/dev/null || cp "$cached" "$dir/$name.tmp"
  mv -f "$dir/$name.tmp" "$dir/$name"
  echo "$inputs" >"$dir/.$name.stamp"
  echo "$name: built before on this machine from the same inputs ($cached)"
}

# tool_built DIR NAME INPUTS: records DIR/NAME as built from INPUTS and keeps a copy in the
# machine's cache (a failure to keep it only costs the next clone a build).
tool_built() {
  local dir=$1 name=$2 inputs=$3 tmp
  echo "$inputs" >"$dir/.$name.stamp"
  tmp="$tool_cache/.$name-$inputs.$$"
  if mkdir -p "$tool_cache" && cp "$dir/$name" "$tmp" && mv -f "$tmp" "$tool_cache/$name-$inputs"; then
    return 0
  fi
  rm -f "$tmp"
  echo "$name: not kept in $tool_cache; the next clone builds it again" >&2
}
