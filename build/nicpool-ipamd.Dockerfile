# syntax=docker/dockerfile:1
# The node IPAM daemon: a static binary and nothing else. It runs as root because
# its socket is root-only, like the container runtime that execs the CNI plugin; the
# DaemonSet drops every capability. `make images` builds the same layout without
# Docker (hack/images); manifests/dockerfile_test.go keeps the two equal.
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
# The version the binary reports (make docker-images passes the Makefile's).
ARG VERSION=dev
ARG REVISION=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/nicpool/nicpool/version.version=${VERSION} -X github.com/nicpool/nicpool/version.revision=${REVISION}" -o /out/nicpool-ipamd ./cmd/nicpool-ipamd

FROM scratch
COPY --from=build /out/nicpool-ipamd /usr/local/bin/nicpool-ipamd
LABEL org.opencontainers.image.title="nicpool-ipamd" \
      org.opencontainers.image.description="nicpool node IPAM daemon, serving the CNI plugin on a unix socket" \
      org.opencontainers.image.source="https://github.com/nicpool/nicpool" \
      org.opencontainers.image.licenses="Apache-2.0"
ENTRYPOINT ["/usr/local/bin/nicpool-ipamd"]
