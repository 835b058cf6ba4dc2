#!/usr/bin/env bash
# The local control plane: kube-apiserver, etcd, controller-manager and scheduler built
# from source (hack/build-control-plane.sh), with kwok as the kubelet, run by kwokctl's
# binary runtime. No Docker.
#
#   hack/cluster.sh up [NAME] [KUBECONFIG]   start (or reuse) cluster NAME, write its kubeconfig
#   hack/cluster.sh up NAME KUBECONFIG --real-node
#                                            the same, with a real node beside kwok's
#                                            (hack/realnode.sh: kubelet, containerd)
#   hack/cluster.sh create NAME CONFIG [KWOKCTL FLAGS...]
#                                            only start cluster NAME from kwokctl CONFIG (the
#                                            benches' clusters: their own config and flags)
#   hack/cluster.sh fixtures KUBECONFIG      load the sample AI cluster (nodes, pods, CRD, pools)
#   hack/cluster.sh down [NAME]              stop it and every process it started
#
# NAME defaults to litepool-dev and KUBECONFIG to _output/dev/kubeconfig. Both up and
# down are idempotent. Cluster state lives in _output/kwok.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/_output/bin"
export KWOK_WORKDIR="$root/_output/kwok"
kwokctl="$bin/kwokctl"

die() { echo "cluster.sh: $*" >&2; exit 1; }

running() { # running NAME: the cluster exists and its API server answers
  "$kwokctl" get clusters 2>/dev/null | grep -qx "$1" || return 1
  kubectl --kubeconfig "$KWOK_WORKDIR/clusters/$1/kubeconfig.yaml" get --raw /readyz >/dev/null 2>&1
}

up() {
  local name=${1:-litepool-dev} kubeconfig=${2:-$root/_output/dev/kubeconfig} real=${3:-}
  [ -z "$real" ] || [ "$real" = --real-node ] || die "unknown flag $real (want --real-node)"
  "$root/hack/build-control-plane.sh"
  local config="$root/hack/kwokctl-config.yaml"
  if [ -n "$real" ]; then
    config=$(realnode_config "$name")
    # A cluster started without the real node's API server flags cannot take it.
    if running "$name" && ! [ -f "$KWOK_WORKDIR/clusters/$name/.real-node" ]; then
      echo "cluster $name runs without --real-node: starting it afresh"
      "$kwokctl" delete cluster --name "$name" >/dev/null 2>&1 || true
    fi
  fi
  mkdir -p "$KWOK_WORKDIR"
  if running "$name"; then
    echo "cluster $name is already running"
  else
    if "$kwokctl" get clusters 2>/dev/null | grep -qx "$name"; then
      # Left from an earlier run but not answering: start afresh.
      "$kwokctl" delete cluster --name "$name" >/dev/null 2>&1 || true
    fi
    echo "starting cluster $name (kube-apiserver $("$bin/kube-apiserver" --version | awk '{print $2}'), kwok as the kubelet)"
    locked_create "$name"
  fi
  mkdir -p "$(dirname "$kubeconfig")"
  "$kwokctl" get kubeconfig --name "$name" >"$kubeconfig"
  kubectl --kubeconfig "$kubeconfig" wait --for=create --timeout=60s serviceaccount/default -n default >/dev/null 2>&1 || true
  if [ -n "$real" ]; then
    touch "$KWOK_WORKDIR/clusters/$name/.real-node"
    "$root/hack/realnode.sh" up "$name" "$kubeconfig"
  fi
  echo "kubeconfig: $kubeconfig"
}

# realnode_config NAME: hack/kwokctl-config.yaml plus what a real kubelet needs of the
# API server (docs/install.md, "Real node"): it calls webhook Services' endpoints
# directly (no kube-proxy), reaches the kubelet by its InternalIP with the admin pair,
# and serves the kubernetes Service IP, which pods dial and hack/realnode.sh DNATs.
realnode_config() {
  local name=$1 pki="$KWOK_WORKDIR/clusters/$1/pki" out="$KWOK_WORKDIR/$1-realnode.yaml" ip
  ip=$(ip -4 route get 1.1.1.1 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") {print $(i + 1); exit}}')
  mkdir -p "$KWOK_WORKDIR"
  {
    cat "$root/hack/kwokctl-config.yaml"
    cat <<YAML
- name: kube-apiserver
  extraArgs:
  - {key: enable-aggregator-routing, value: "true"}
  - {key: kubelet-client-certificate, value: "$pki/admin.crt"}
  - {key: kubelet-client-key, value: "$pki/admin.key"}
  - {key: kubelet-preferred-address-types, value: "InternalIP,Hostname"}
  - {key: service-cluster-ip-range, value: "10.0.0.0/24"}
options:
  kubeApiserverCertSANs: ["10.0.0.1", "$ip"]
YAML
  } >"$out"
  echo "$out"
}

# locked_create NAME [KWOKCTL FLAGS...]: one cluster starts at a time on the machine,
# whoever starts it (e2e packages side by side, the two lanes of bench smoke): kwokctl
# picks free ports by probing, and two starts at once can pick the same ones (bench smoke
# once lost its API server's port that way). kwokctl gets the lock's descriptor closed
# (9>&-) so the daemons it leaves running do not hold it.
locked_create() {
  mkdir -p "$KWOK_WORKDIR"
  (flock 9; create "$@") 9>"$KWOK_WORKDIR/.create.lock"
}

# create NAME [KWOKCTL FLAGS...]: a start that failed anyway (a port taken by something
# else meanwhile) is retried afresh.
create() {
  local name=$1 attempt
  for attempt in 1 2 3; do
    if create_once "$@"; then return 0; fi
    echo "cluster $name did not start (attempt $attempt); retrying" >&2
    "$kwokctl" delete cluster --name "$name" >/dev/null 2>&1 || true
    sleep $((attempt * 2))
  done
  cat "$KWOK_WORKDIR/$name-create.log" >&2
  die "the control plane did not start; logs: $KWOK_WORKDIR/clusters/$name/logs"
}

create_once() {
  local name=$1; shift
  "$kwokctl" create cluster --name "$name" --runtime binary \
      --config "${config:-$root/hack/kwokctl-config.yaml}" "$@" \
      --kube-apiserver-binary "$bin/kube-apiserver" \
      --kube-controller-manager-binary "$bin/kube-controller-manager" \
      --kube-scheduler-binary "$bin/kube-scheduler" \
      --kwok-controller-binary "$bin/kwok" \
      --etcd-binary "$bin/etcd" \
      --kubeconfig "" --wait 120s --quiet-pull >"$KWOK_WORKDIR/$name-create.log" 2>&1 9>&- || return 1
  # kwokctl exits 0 when its wait for readiness timed out (it logs "Failed to wait for
  # cluster to be ready"), and can report ready while kwok itself failed to bind its
  # port: check both.
  sleep 1
  pgrep -f "$KWOK_WORKDIR/clusters/$name/bin/kwok-controller" >/dev/null || return 1
  running "$name"
}

fixtures() {
  local kubeconfig=${1:-$root/_output/dev/kubeconfig}
  local k=(kubectl --kubeconfig "$kubeconfig")
  # One kubectl apply per step: each call fetches and parses the API server's OpenAPI
  # (about 0.35 s of CPU), and every e2e package starts a cluster this way.
  "${k[@]}" apply -f "$root/hack/fixtures/nodes.yaml" -f "$root/deploy/webhook/crd" >/dev/null
  # `kubectl wait --for=condition` fails at once if the CRD has no status yet; poll instead.
  local i
  for i in $(seq 1 120); do
    [ "$("${k[@]}" get crd pools.runwhere.ai -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" = True ] && break
    [ "$i" = 120 ] && die "the Pool CRD was not established within 60s"
    sleep 0.5
  done
  "${k[@]}" wait --for=create --timeout=60s serviceaccount/default -n default >/dev/null
  "${k[@]}" apply -f "$root/hack/fixtures/pools.yaml" -f "$root/hack/fixtures/workloads.yaml" >/dev/null
  # Wait until kwok has made every node it plays Ready.
  local managed
  managed=$("${k[@]}" get nodes -o go-template='{{range .items}}{{if index .metadata.annotations "kwok.x-k8s.io/node"}}node/{{.metadata.name}} {{end}}{{end}}')
  # shellcheck disable=SC2086
  "${k[@]}" wait --for=condition=Ready --timeout=120s $managed >/dev/null
  local names
  names=$("${k[@]}" get nodes,pods -A -o name)
  echo "loaded the sample AI cluster: $(grep -c '^node/' <<<"$names") nodes, $(grep -c '^pod/' <<<"$names") pods"
}

down() {
  local name=${1:-litepool-dev}
  # The real node first, while the API server still answers its kubelet.
  [ -d "$root/_output/realnode/$name" ] && "$root/hack/realnode.sh" down "$name"
  [ -x "$kwokctl" ] || { echo "no kwokctl built: nothing to stop"; return 0; }
  if "$kwokctl" get clusters 2>/dev/null | grep -qx "$name"; then
    "$kwokctl" delete cluster --name "$name" >/dev/null 2>&1
    echo "cluster $name deleted"
  else
    echo "cluster $name is not running"
  fi
  # kwokctl stops what it started; make sure, by the cluster's own directory.
  local left
  left=$(pgrep -f "$KWOK_WORKDIR/clusters/$name/" || true)
  if [ -n "$left" ]; then
    echo "$left" | xargs -r kill 2>/dev/null || true
    sleep 1
    pgrep -f "$KWOK_WORKDIR/clusters/$name/" | xargs -r kill -9 2>/dev/null || true
  fi
}

cmd=${1:-}; shift || true
case "$cmd" in
  up) up "$@" ;;
  create) [ $# -ge 2 ] || die "usage: $0 create NAME CONFIG [KWOKCTL FLAGS...]"
    name=$1 config=$2; shift 2
    "$root/hack/build-control-plane.sh" >/dev/null
    locked_create "$name" "$@" ;;
  fixtures) fixtures "$@" ;;
  down) down "$@" ;;
  *) die "usage: $0 up|create|fixtures|down [NAME] [KUBECONFIG]" ;;
esac
