# syntax=docker/dockerfile:1
# The CNI plugin `nicpool`. The container runtime runs it from the host's
# /opt/cni/bin, so this image only carries it: the ipamd DaemonSet's init container
# runs `nicpool install`, which copies the plugin into the host. No shell, no base.
# `make images` builds the same layout without Docker (hack/images);
# manifests/dockerfile_test.go keeps the two equal.
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/nicpool ./cmd/nicpool

FROM scratch
COPY --from=build /out/nicpool /opt/nicpool/nicpool
LABEL org.opencontainers.image.title="nicpool" \
      org.opencontainers.image.description="nicpool CNI IPAM plugin; the ipamd DaemonSet's init container installs it into the node's CNI bin directory" \
      org.opencontainers.image.source="https://github.com/nicpool/nicpool"
ENTRYPOINT ["/opt/nicpool/nicpool"]
