# syntax=docker/dockerfile:1
# The CNI plugin: `nicpool-cni`, the Go plugin, and `nicpool`, its front (one C file,
# cniplugin/front), which the runtime runs from the host's /opt/cni/bin and which execs
# nicpool-cni from its own directory. This image only carries the pair: the ipamd
# DaemonSet's init container runs `nicpool-cni install`, which copies both into the
# host. No shell, no base. `make images` builds the same layout without Docker
# (hack/images); manifests/dockerfile_test.go keeps the two equal, and both build
# lines equal to the Makefile's.
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
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/nicpool/nicpool/version.version=${VERSION} -X github.com/nicpool/nicpool/version.revision=${REVISION}" -o /out/nicpool-cni ./cmd/nicpool-cni

# The front, static against musl (the golang image is Debian with gcc; musl-tools adds
# musl-gcc), built for the platform of the image as the build stage is.
FROM golang:${GO_VERSION} AS front
RUN apt-get update -q && apt-get install -y -q --no-install-recommends musl-tools && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY cniplugin/front/nicpool.c cniplugin/front/
RUN mkdir /out && musl-gcc -static -no-pie -s -O2 -Wall -Wextra -Werror -o /out/nicpool cniplugin/front/nicpool.c

FROM scratch
COPY --from=build /out/nicpool-cni /opt/nicpool/nicpool-cni
COPY --from=front /out/nicpool /opt/nicpool/nicpool
LABEL org.opencontainers.image.title="nicpool" \
      org.opencontainers.image.description="nicpool CNI IPAM plugin, the Go plugin nicpool-cni and its front nicpool; the ipamd DaemonSet's init container installs both into the node's CNI bin directory" \
      org.opencontainers.image.source="https://github.com/nicpool/nicpool" \
      org.opencontainers.image.licenses="Apache-2.0"
ENTRYPOINT ["/opt/nicpool/nicpool-cni"]
