# hack/k8s-version.sh: the Kubernetes version the local control plane and the real node's
# kubelet are built at, and the link flags that stamp it into them. Sourced by
# hack/build-control-plane.sh and hack/realnode.sh, so that the two cannot drift.
# shellcheck shell=bash disable=SC2034
k8s_version=v1.36.3
k8s_ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=${k8s_version} \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=36 \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.buildDate=2026-01-01T00:00:00Z \
 -X k8s.io/client-go/pkg/version.gitVersion=${k8s_version} \
 -X k8s.io/client-go/pkg/version.gitMajor=1 \
 -X k8s.io/client-go/pkg/version.gitMinor=36"
