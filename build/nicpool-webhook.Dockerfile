# syntax=docker/dockerfile:1
# The admission webhook and cluster controllers: a static binary and nothing else,
# run as non-root (the Deployment also enforces it). `make images` builds the same
# layout without Docker (hack/images); manifests/dockerfile_test.go keeps the two equal.
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
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/nicpool/nicpool/version.version=${VERSION} -X github.com/nicpool/nicpool/version.revision=${REVISION}" -o /out/nicpool-webhook ./cmd/nicpool-webhook

FROM scratch
COPY --from=build /out/nicpool-webhook /usr/local/bin/nicpool-webhook
USER 65532:65532
LABEL org.opencontainers.image.title="nicpool-webhook" \
      org.opencontainers.image.description="nicpool admission webhook and cluster controllers" \
      org.opencontainers.image.source="https://github.com/nicpool/nicpool" \
      org.opencontainers.image.licenses="Apache-2.0"
ENTRYPOINT ["/usr/local/bin/nicpool-webhook"]
