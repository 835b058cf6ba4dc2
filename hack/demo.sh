#!/usr/bin/env bash
# `make demo`: the cluster is up with the sample AI cluster (make cluster) and the
# webhook runs locally (hack/localwebhook start). Show the pools, then the webhook
# pinning a pool's pod to the pool's nodes and refusing a pod of a pool that does not
# exist.
#
#   hack/demo.sh [KUBECONFIG]   (default _output/dev/kubeconfig)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$root/_output/bin:$PATH"
export KUBECONFIG=${1:-$root/_output/dev/kubeconfig}
kubeconfig=$KUBECONFIG

show() { echo "\$ $*"; "$@"; }

echo
show kubectl litepool get pools
echo
show kubectl litepool get pools -o wide

echo
echo "# The controller in litepool-webhook keeps each Pool's status; plain kubectl shows it:"
kubectl wait --for=condition=Upgrading=false --timeout=60s --all pools >/dev/null
show kubectl get pools

echo
echo "# The webhook pins a pool's pods to the pool's nodes (rule P1):"
kubectl delete pod demo-trainer -n ai-team --ignore-not-found --now >/dev/null
show kubectl run demo-trainer -n ai-team --image=busybox --restart=Never \
  -l runwhere.ai/pool=train-a100,runwhere.ai/workload-type=training
kubectl wait --for=condition=PodScheduled --timeout=60s pod/demo-trainer -n ai-team >/dev/null
show kubectl get pod demo-trainer -n ai-team \
  -o custom-columns=NAME:.metadata.name,NODE-SELECTOR:.spec.nodeSelector,NODE:.spec.nodeName
selector=$(kubectl get pod demo-trainer -n ai-team -o jsonpath='{.spec.nodeSelector.runwhere\.ai/pool}')
[ "$selector" = train-a100 ] || { echo "demo.sh: the webhook did not pin the pod (nodeSelector runwhere.ai/pool=$selector)" >&2; exit 1; }

echo
echo "# ... and refuses pods of pools that do not exist (rule P2):"
echo "\$ kubectl run demo-h100 -n ai-team --image=busybox --restart=Never -l runwhere.ai/pool=train-h100"
if out=$(kubectl run demo-h100 -n ai-team --image=busybox --restart=Never -l runwhere.ai/pool=train-h100 2>&1); then
  echo "$out"
  echo "demo.sh: the webhook let a pod of a missing pool through" >&2
  exit 1
fi
echo "$out"

cat <<EOF2

The local cluster and the webhook are still running. To use them:
  export KUBECONFIG=$kubeconfig PATH=$root/_output/bin:\$PATH
  kubectl get nodes -L runwhere.ai/pool,runwhere.ai/gpu-type
  kubectl litepool get pools
  kubectl get pools -o wide            # status kept by the in-cluster controller
Stop both with: make cluster-down
EOF2
