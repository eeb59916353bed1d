# syntax=docker/dockerfile:1
# The admission webhook and cluster controllers: a static binary on a distroless
# base that runs as non-root (the Deployment also enforces it).
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/nicpool-webhook ./cmd/nicpool-webhook

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/nicpool-webhook /usr/local/bin/nicpool-webhook
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/nicpool-webhook"]
