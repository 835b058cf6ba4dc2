#!/usr/bin/env bash
# `make demo`: the cluster is up with the sample AI cluster (make cluster); show pools.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$root/_output/bin:$PATH"
export KUBECONFIG="$root/_output/dev/kubeconfig"
kubeconfig=$KUBECONFIG
echo
echo "\$ kubectl litepool get pools"
kubectl litepool get pools
echo
echo "\$ kubectl litepool get pools -o wide"
kubectl litepool get pools -o wide
cat <<EOF2

The local cluster is still running. To use it:
  export KUBECONFIG=$kubeconfig PATH=$root/_output/bin:\$PATH
  kubectl get nodes -L runwhere.ai/pool,runwhere.ai/gpu-type
  kubectl litepool get pools
Stop it with: make cluster-down
EOF2
