# syntax=docker/dockerfile:1
#
# The litepool image: litepool-webhook (the entrypoint) and kubectl-litepool (for jobs
# that run the plugin in the cluster, e.g. `stress schedule`'s CronJob), static, with no
# base image, as a non-root user. `make image` builds the same image without a container
# engine (hack/image, go-containerregistry); test/dist/dockerfile_test.go checks that
# this file and hack/image's definition agree: files, user, entrypoint, ports, labels. deploy/webhook refers to it by the kustomize image name
# litepool-webhook; `kustomize edit set image litepool-webhook=REGISTRY/NAME:TAG` points
# the Deployment at your build.
#
#   docker build -t ghcr.io/runwhere-ai/litepool-webhook:v0.1.0 --build-arg VERSION=v0.1.0 .
#   docker buildx build --platform linux/amd64,linux/arm64 ...   (cross-compiled, no emulation)
#
# test/dist/dockerfile_test.go also checks that this file builds the programs `make
# build` builds, from the same packages, into a non-root final stage.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=v0.1.0-dev
ARG COMMIT=unknown
WORKDIR /src
# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    LDFLAGS="-s -w -X github.com/runwhere-ai/litepool/pkg/version.Version=${VERSION} -X github.com/runwhere-ai/litepool/pkg/version.Commit=${COMMIT}" && \
    GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -ldflags "${LDFLAGS}" -o /out/litepool-webhook ./cmd/webhook && \
    GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -ldflags "${LDFLAGS}" -o /out/kubectl-litepool ./cmd/kubectl-litepool

# No base: no shell, no package manager, no CA certificates (the programs only talk to
# the API server, with the service account's CA). uid/gid 65532 is distroless's nonroot,
# which deploy/webhook's runAsUser names.
FROM scratch
ARG VERSION=v0.1.0-dev
LABEL org.opencontainers.image.title="litepool" \
      org.opencontainers.image.description="litepool admission webhook and kubectl plugin" \
      org.opencontainers.image.source="https://github.com/runwhere-ai/litepool" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/litepool-webhook /out/kubectl-litepool /usr/local/bin/
COPY LICENSE /licenses/LICENSE
USER 65532:65532
# webhook (HTTPS), metrics, health probes: the flags' defaults in cmd/webhook.
EXPOSE 9443 8443 8081
ENTRYPOINT ["/usr/local/bin/litepool-webhook"]
