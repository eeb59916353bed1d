# nicpool — the make targets are the project's interface; README.md lists them.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

BIN        := $(CURDIR)/bin
GO         ?= go
GOTEST     ?= $(GO) test
export KUBEBUILDER_ASSETS := $(BIN)
export PATH := $(BIN):$(PATH)

# Binaries of nicpool itself.
CMDS := nicpool nicpool-ipamd nicpool-webhook nicpool-local kubectl-nicpool

.PHONY: all build test unit e2e bench bench-scale fuzz generate verify-generate tools tools-node lint run up down clean help

all: build

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

tools: ## build the pinned control plane, controller-gen, CNI plugins and Multus into bin/
	hack/tools/build.sh

tools-node: ## build what real nodes run into bin/: kubelet, kube-proxy, kubectl, containerd, ctr, runc, CNI loopback
	hack/tools/build.sh node

build: ## build nicpool's binaries into bin/
	@mkdir -p $(BIN)
	@for c in $(CMDS); do if [ -d cmd/$$c ]; then $(GO) build -o $(BIN)/$$c ./cmd/$$c; fi; done

generate: tools ## regenerate deepcopy code and CRD YAML from crds/api
	$(BIN)/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./crds/api/...
	$(BIN)/controller-gen crd paths=./crds/api/... output:crd:artifacts:config=crds/yaml

test: tools build ## everything CI runs: vet, unit and integration tests against a real API server
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GOTEST) -count=1 -timeout 40m ./...
	@# Modules of their own (heavy dependencies): the monitoring rules against the real binaries.
	cd e2e/monitoring && $(GO) vet ./... && $(GOTEST) -count=1 -timeout 30m ./...

bench: tools build ## benchmarks (limit test, admission, memory, the scale scenarios); prints figures, asserts nothing timed
	$(GOTEST) -run '^$$' -bench . -benchmem -benchtime 1x -timeout 60m $$($(GO) list ./... | grep -v '/e2e/scale$$')
	cd e2e/peers/whereabouts && KUBEBUILDER_ASSETS=$(BIN) $(GOTEST) -run '^$$' -bench . -benchtime 1x -timeout 30m ./...
	$(MAKE) bench-scale

# The scale scenarios run one after the other, each on a control plane of its own,
# each bounded by its own deadline.
BENCH ?= .
bench-scale: tools ## the scale scenarios alone (real ipamd processes; BENCH=<regexp> picks some, NICPOOL_SCALE_* change them: see e2e/scale)
	$(GOTEST) -run '^$$' -bench '$(BENCH)' -benchtime 1x -timeout 240m ./e2e/scale

fuzz: ## run every fuzz target for FUZZTIME (default 60s)
	@for spec in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
	  for f in $$(grep -h '^func Fuzz' $$spec/*_test.go | sed 's/func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
	    echo "== $$spec $$f"; $(GOTEST) -run '^$$' -fuzz "^$$f$$" -fuzztime $${FUZZTIME:-60s} $$spec; done; done

lint: ## golangci-lint (built from hack/tools/lint on first use), go vet and gofmt
	hack/tools/build.sh golangci-lint
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(BIN)/golangci-lint run ./...

run: tools build ## local cluster (3 node stand-ins) with nicpool, sample pools, NADs and a multi-NIC StatefulSet; Ctrl-C stops it
	$(BIN)/nicpool-local run

up: tools build ## the same as run, in the background; returns when ready (kubeconfig .local/kubeconfig)
	$(BIN)/nicpool-local up

down: ## stop what `make up` started
	$(GO) run ./cmd/nicpool-local down

e2e: tools ## the end-to-end Ginkgo suite on the local cluster (also part of `make test`)
	$(GOTEST) -count=1 -timeout 30m -v ./e2e/suite/

clean: ## remove built binaries and local state
	rm -rf $(BIN) .local

# Container images, for users with Docker (BuildKit); tags match manifests/base.
DOCKER      ?= docker
IMAGE_REPO  ?= nicpool
IMAGE_TAG   ?= dev
IMAGES      := nicpool nicpool-ipamd nicpool-webhook

.PHONY: images manifests

images: ## build the container images nicpool/<binary>:dev with Docker from build/<binary>.Dockerfile (IMAGE_REPO, IMAGE_TAG)
	@for c in $(IMAGES); do echo "== $(IMAGE_REPO)/$$c:$(IMAGE_TAG)"; \
	  DOCKER_BUILDKIT=1 $(DOCKER) build -f build/$$c.Dockerfile -t $(IMAGE_REPO)/$$c:$(IMAGE_TAG) . ; done

manifests: ## regenerate manifests/base's CRDs, webhook configurations and admission policies from crds/yaml and webhook/configs
	$(GO) run ./hack/manifests
