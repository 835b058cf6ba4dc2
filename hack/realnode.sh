#!/usr/bin/env bash
# A real node in a local cluster: a real kubelet (v1.36.3, built from hack/tools like the
# control plane) running real containers through containerd and runc, beside the nodes
# kwok plays. No Docker, no systemd, no registry: containerd and the kubelet run as plain
# processes with their own root, state and socket; images are imported from the archives
# make image writes. The facts behind every setting: docs/install.md ("Real node").
#
#   hack/realnode.sh build                 kubelet into _output/bin (skipped when built)
#   hack/realnode.sh packages              containerd, runc, the CNI plugins and iptables
#                                          from Debian's apt, those missing (needs root)
#   hack/realnode.sh up NAME KUBECONFIG    start containerd and the kubelet, join cluster NAME
#   hack/realnode.sh down NAME             stop them and give the host back as it was
#
# The cluster must have been started with `hack/cluster.sh up NAME KUBECONFIG --real-node`
# (the API server flags a real kubelet needs). up saves the host's state first (sysctls,
# iptables chains, links, directories); down undoes everything up and the kubelet did:
# processes, mounts, cgroups, the bridge, iptables chains, sysctls, directories. Both
# are idempotent. One real node per host: the kubelet's ports and the bridge are host-wide.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/_output/bin"
# shellcheck source=hack/toolcache.sh
source "$root/hack/toolcache.sh"
images="$root/_output/images"
export KWOK_WORKDIR="$root/_output/kwok"

# Fixed names: test/e2e/realnode relies on them.
node_name=litepool-realnode
bridge=litepool0
pod_cidr=10.244.0.0/24
service_ip=10.0.0.1
dnat_chain=LITEPOOL-REALNODE
sandbox_image=litepool.local/pause:e2e
# The sysctls the kubelet (and the bridge plugin) set: saved by up, restored by down.
sysctls=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)
# Host directories containerd, CNI and the kubelet create whatever their configuration
# says: removed by down when up did not find them.
host_dirs=(/run/containerd /run/netns /var/lib/cni /var/log/containers /var/log/pods /etc/cni)

die() { echo "realnode.sh: $*" >&2; exit 1; }
say() { echo "realnode: $*"; }

statedir() { echo "$root/_output/realnode/$1"; }

# build: the kubelet, as hack/build-control-plane.sh builds the control plane (same
# module, same flags, a stamp of its inputs).
build() {
  local ldflags inputs out="$bin/kubelet"
  # shellcheck source=hack/k8s-version.sh
  source "$root/hack/k8s-version.sh"
  ldflags=$k8s_ldflags
  inputs=$(cat "$root/hack/tools/go.mod" "$root/hack/tools/go.sum" <(echo "$ldflags" "$(go env GOVERSION)") | sha256sum | cut -c1-16)
  if tool_ready "$bin" kubelet "$inputs"; then return 0; fi
  mkdir -p "$bin"
  echo "building kubelet (k8s.io/kubernetes/cmd/kubelet $k8s_version)"
  (cd "$root/hack/tools" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out.tmp" k8s.io/kubernetes/cmd/kubelet)
  mv "$out.tmp" "$out"
  tool_built "$bin" kubelet "$inputs"
}

# packages: containerd, runc, the CNI plugins and iptables from Debian, when missing.
packages() {
  local missing=() p
  for p in containerd runc containernetworking-plugins iptables; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing ${missing[*]} (apt-get)"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

node_ip() { ip -4 route get 1.1.1.1 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") {print $(i + 1); exit}}'; }

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# save DIR: the host state down restores, taken before anything changes it.
save() {
  local dir=$1 s d
  [ -f "$dir/host/saved" ] && return 0
  mkdir -p "$dir/host"
  for s in "${sysctls[@]}"; do
    echo "$s=$(sysctl -n "$s")"
  done >"$dir/host/sysctls"
  for d in "${host_dirs[@]}"; do
    [ -e "$d" ] && echo "$d"
  done >"$dir/host/dirs" || true
  chains >"$dir/host/chains"
  ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 >"$dir/host/links"
  touch "$dir/host/saved"
}

# chains: every iptables chain as "ipt|ip6t TABLE CHAIN".
chains() {
  local ipt t
  for ipt in iptables ip6tables; do
    for t in filter nat mangle; do
      "$ipt" -w -t "$t" -S 2>/dev/null | awk -v p="$ipt" -v t="$t" '$1 == "-N" {print p, t, $2}'
    done
  done
}

up() {
  local name=${1:-} kubeconfig=${2:-}
  if [ -z "$name" ] || [ -z "$kubeconfig" ]; then die "usage: $0 up NAME KUBECONFIG"; fi
  local dir pki ip server port
  dir=$(statedir "$name")
  pki="$KWOK_WORKDIR/clusters/$name/pki"
  [ -f "$pki/admin.crt" ] || die "cluster $name has no PKI at $pki: start it with hack/cluster.sh up $name KUBECONFIG --real-node"
  if ! [ -f "$images/test-images.tar" ] || ! [ -f "$images/litepool-webhook.tar" ]; then die "no images in $images: run make image"; fi
  if alive "$dir/kubelet.pid" && alive "$dir/containerd.pid"; then
    say "node $node_name is already running"
    return 0
  fi
  # One real node per host: the kubelet's ports and the bridge are host-wide.
  if ip link show "$bridge" >/dev/null 2>&1 && ! [ -f "$dir/host/saved" ]; then
    die "another real node runs on this host (the bridge $bridge exists): stop it first (hack/realnode.sh down ITS-CLUSTER)"
  fi
  packages
  build
  ip=$(node_ip)
  [ -n "$ip" ] || die "cannot tell this machine's address (no default route)"
  server=$(kubectl --kubeconfig "$kubeconfig" config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  port=${server##*:}
  save "$dir"
  mkdir -p "$dir"/{containerd,cni/net.d,kubelet,logs,pod-logs}
  local sock="$dir/containerd.sock"

  cat >"$dir/containerd.toml" <<TOML
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$sandbox_image"
  # root here lacks CAP_SYS_RESOURCE: a negative oom_score_adj kills runc.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$dir/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
TOML
  # The host reaches pod IPs on the bridge directly; no masquerading (no CNI chains).
  cat >"$dir/cni/net.d/10-litepool.conflist" <<JSON
{"cniVersion": "0.4.0", "name": "litepool", "plugins": [
  {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$pod_cidr"}]], "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": "$dir/cni/ipam"}}]}
JSON

  say "starting containerd ($(containerd --version | awk '{print $3}'))"
  containerd --config "$dir/containerd.toml" >"$dir/logs/containerd.log" 2>&1 &
  echo $! >"$dir/containerd.pid"
  local i
  for i in $(seq 1 100); do
    ctr --address "$sock" version >/dev/null 2>&1 && break
    [ "$i" = 100 ] && die "containerd did not answer within 20s; log: $dir/logs/containerd.log"
    sleep 0.2
  done
  local tar
  for tar in "$images"/litepool-webhook.tar "$images"/test-images.tar; do
    ctr --address "$sock" -n k8s.io images import --no-unpack=false "$tar" >/dev/null
  done

  # Pods dial the kubernetes Service IP: DNAT it to the API server (no kube-proxy).
  iptables -w -t nat -N "$dnat_chain" 2>/dev/null || iptables -w -t nat -F "$dnat_chain"
  iptables -w -t nat -A "$dnat_chain" -d "$service_ip/32" -p tcp --dport 443 -j DNAT --to-destination "$ip:$port"
  iptables -w -t nat -C PREROUTING -j "$dnat_chain" 2>/dev/null || iptables -w -t nat -I PREROUTING -j "$dnat_chain"
  iptables -w -t nat -C OUTPUT -j "$dnat_chain" 2>/dev/null || iptables -w -t nat -I OUTPUT -j "$dnat_chain"

  cat >"$dir/kubelet.kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {certificate-authority: $pki/ca.crt, server: "https://127.0.0.1:$port"}
users:
- name: kubelet
  user: {client-certificate: $pki/admin.crt, client-key: $pki/admin.key}
contexts:
- name: local
  context: {cluster: local, user: kubelet}
current-context: local
YAML
  cat >"$dir/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This host has cgroup v1 hierarchies and no systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$sock
podLogsDir: $dir/pod-logs
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
# A webhook writes its certificate into its mounted Secret: Ready within seconds.
syncFrequency: 10s
failSwapOn: false
# No registry: images that are garbage-collected cannot come back.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
serializeImagePulls: false
YAML
  say "starting kubelet ($("$bin/kubelet" --version | awk '{print $2}')) as node $node_name ($ip)"
  "$bin/kubelet" --config "$dir/kubelet.yaml" --kubeconfig "$dir/kubelet.kubeconfig" \
    --root-dir "$dir/kubelet" --cert-dir "$dir/kubelet/pki" \
    --hostname-override "$node_name" --node-ip "$ip" \
    --node-labels "litepool.local/real-node=true" >"$dir/logs/kubelet.log" 2>&1 &
  echo $! >"$dir/kubelet.pid"
  for i in $(seq 1 120); do
    [ "$(kubectl --kubeconfig "$kubeconfig" get node "$node_name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ] && break
    alive "$dir/kubelet.pid" || die "the kubelet exited; log: $dir/logs/kubelet.log"
    [ "$i" = 120 ] && die "node $node_name not Ready within 60s; log: $dir/logs/kubelet.log"
    sleep 0.5
  done
  say "node $node_name is Ready"
}

stop_pid() { # stop_pid FILE: TERM, then KILL after 10s
  local f=$1 pid i
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for i in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      [ "$i" = 50 ] && kill -9 "$pid" 2>/dev/null
      sleep 0.2
    done
  fi
  rm -f "$f"
}

down() {
  local name=${1:-}
  [ -n "$name" ] || die "usage: $0 down NAME"
  local dir sock
  dir=$(statedir "$name")
  sock="$dir/containerd.sock"
  [ -d "$dir" ] || { say "no real node for cluster $name"; return 0; }
  # What up installed is needed to undo it (ctr, iptables); a no-op unless someone
  # removed them in between.
  packages
  stop_pid "$dir/kubelet.pid"
  if alive "$dir/containerd.pid"; then
    local ctr_=(ctr --address "$sock" -n k8s.io) t
    for t in $("${ctr_[@]}" tasks ls -q 2>/dev/null); do
      "${ctr_[@]}" tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
    done
    for t in $("${ctr_[@]}" tasks ls -q 2>/dev/null); do
      "${ctr_[@]}" tasks delete -f "$t" >/dev/null 2>&1 || true
    done
    for t in $("${ctr_[@]}" containers ls -q 2>/dev/null); do
      "${ctr_[@]}" containers delete "$t" >/dev/null 2>&1 || true
    done
  fi
  # The shims outlive containerd: stop those of this socket, by PID.
  local pids
  pids=$(pgrep -f "containerd-shim-runc-v2 .*-address $sock( |$)" || true)
  [ -n "$pids" ] && { echo "$pids" | xargs -r kill -9 2>/dev/null || true; }
  stop_pid "$dir/containerd.pid"
  pids=$(pgrep -f "$dir/" || true)
  [ -n "$pids" ] && { echo "$pids" | xargs -r kill -9 2>/dev/null || true; sleep 0.5; }

  # Mounts: the kubelet's volumes, containerd's rootfs and shm, CNI's network namespaces.
  local m
  while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done < <(awk '{print $5}' /proc/self/mountinfo | grep -E "^($dir/|/run/netns/cni-)" | sort -r)
  rm -f /run/netns/cni-* 2>/dev/null || true
  # cgroups: kubepods (the kubelet's) and k8s.io (containerd's), deepest first.
  local cg
  for cg in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/k8s.io; do
    if [ -d "$cg" ]; then find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
  done
  if [ -f "$dir/host/saved" ]; then
    local l
    if ip link show "$bridge" >/dev/null 2>&1 && ! grep -qx "$bridge" "$dir/host/links"; then
      ip link del "$bridge"
    fi
    for l in $(ip -o link show type veth | awk -F': ' '{print $2}' | cut -d@ -f1); do
      grep -qx "$l" "$dir/host/links" || ip link del "$l" 2>/dev/null || true
    done
    unchain "$dir/host/chains"
    local kv
    while IFS= read -r kv; do sysctl -qw "$kv" >/dev/null; done <"$dir/host/sysctls"
    local d
    for d in "${host_dirs[@]}"; do
      [ -e "$d" ] && ! grep -qx "$d" "$dir/host/dirs" && rm -rf "$d"
    done
  fi
  # Keep the logs; drop the state (images, volumes, rootfs).
  rm -rf "$dir.logs"
  [ -d "$dir/logs" ] && mv "$dir/logs" "$dir.logs"
  rm -rf "$dir"
  say "node $node_name stopped; host restored (logs: $dir.logs)"
}

# unchain SAVED: removes every iptables chain that is not in SAVED, with the rules that
# jump to it.
unchain() {
  local saved=$1 ipt t c chain n
  local -a added=()
  while read -r ipt t c; do
    grep -qx "$ipt $t $c" "$saved" || added+=("$ipt $t $c")
  done < <(chains)
  [ ${#added[@]} -eq 0 ] && return 0
  for chain in "${added[@]}"; do
    read -r ipt t c <<<"$chain"
    # Rules of other chains that jump here, by number, last first.
    local from
    for from in $("$ipt" -w -t "$t" -S | awk '$1 == "-P" || $1 == "-N" {print $2}'); do
      for n in $("$ipt" -w -t "$t" -L "$from" -n --line-numbers | awk -v c="$c" 'NR > 2 && $2 == c {print $1}' | sort -rn); do
        "$ipt" -w -t "$t" -D "$from" "$n"
      done
    done
  done
  for chain in "${added[@]}"; do
    read -r ipt t c <<<"$chain"
    "$ipt" -w -t "$t" -F "$c" 2>/dev/null || true
  done
  for chain in "${added[@]}"; do
    read -r ipt t c <<<"$chain"
    "$ipt" -w -t "$t" -X "$c" 2>/dev/null || true
  done
}

cmd=${1:-}; shift || true
case "$cmd" in
  build) build ;;
  packages) packages ;;
  up) up "$@" ;;
  down) down "$@" ;;
  *) die "usage: $0 build|packages|up NAME KUBECONFIG|down NAME" ;;
esac
