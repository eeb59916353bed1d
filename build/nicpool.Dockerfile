# syntax=docker/dockerfile:1
# The CNI plugin `nicpool`. The container runtime runs it from the host's
# /opt/cni/bin, so this image only carries it there: the ipamd DaemonSet's init
# container copies /opt/nicpool/nicpool into the host with the shell of this
# (static, busybox) base.
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/nicpool ./cmd/nicpool

FROM busybox:1.37-musl
COPY --from=build /out/nicpool /opt/nicpool/nicpool
