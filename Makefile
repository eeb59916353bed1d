# nicpool — the make targets are the project's interface; CONTRIBUTING.md lists them.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

BIN        := $(CURDIR)/bin
GO         ?= go
GOTEST     ?= $(GO) test
export KUBEBUILDER_ASSETS := $(BIN)
export PATH := $(BIN):$(PATH)

# What plays the nodes of `make run/up/e2e`: standin (in-process node stand-ins, the
# default) or kubelet (real kubelet + containerd + runc nodes, nicpool from its images).
NODE ?= standin
NODE_DEPS := $(if $(filter kubelet,$(NODE)),node-deps tools-node images)
# The local cluster's nodes are this machine: their images are built for its platform
# alone (no cross compiler needed); `make images` builds every IMAGE_PLATFORMS entry.
run up e2e spiderpool-pass: IMAGE_PLATFORMS = $(HOST_PLATFORM)
# The local cluster's images are tagged with the version their binaries carry (VERSION),
# and the cluster installs them under that tag (e2e/local): `kubectl nicpool version`
# finds one version there, the binaries' and their images'.
run up e2e spiderpool-pass test-coordinator: IMAGE_TAG = $(VERSION)

# Binaries of nicpool itself: the Go CNI plugin, ipamd, the webhook (the images carry
# these three) and the kubectl plugin. The local cluster's command, nicpool-local, is
# built by the targets that run it.
CMDS := nicpool-cni nicpool-ipamd nicpool-webhook kubectl-nicpool
# One version for every binary, image and the chart: git describe's (v0.1.0, or
# v0.1.0-3-gabcdef0-dirty between releases; the commit alone before the first tag),
# or VERSION=... on the command line. The linker stamps it and the commit into
# package version (`--version`, nicpool_build_info, `kubectl nicpool version`).
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
VERSION_PKG := github.com/nicpool/nicpool/version
GO_LDFLAGS  := -s -w -X $(VERSION_PKG).version=$(VERSION) -X $(VERSION_PKG).revision=$(REVISION)
# How they are built: static, as build/*.Dockerfile builds them, because the images
# carry these very binaries and have no libc (manifests/dockerfile_test.go checks both
# lines agree; e2e/binaries builds the tests' binaries with the same flags).
GO_BUILD := CGO_ENABLED=0 $(GO) build -trimpath -ldflags="$(GO_LDFLAGS)"
# The CNI plugin's front, bin/nicpool: one C file the runtime execs for every CNI call,
# which execs bin/nicpool-cni beside it for what ipamd does not serve. Static against
# musl and not position independent (a plain static executable: no dynamic loader, no
# relocations at start), so that no call pays a loader or glibc's start-up. FRONT_CC is
# Debian's musl-gcc (musl-tools); `make front-deps` installs it. build/nicpool.Dockerfile
# and the tests' builder (e2e/binaries) compile it with these flags
# (manifests/dockerfile_test.go).
FRONT_SRC    := cniplugin/front/nicpool.c
FRONT_CC     := musl-gcc
FRONT_CFLAGS := -static -no-pie -s -O2 -Wall -Wextra -Werror

.PHONY: front-deps node-deps tools-runc all build local test test-floor e2e test-real test-spiderpool spiderpool-pass spiderpool-image test-coordinator bench bench-exec bench-scale fuzz generate tools tools-node lint run up down clean help

all: build

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

tools: ## build the pinned control plane, kubectl, controller-gen, CNI plugins and Multus into bin/
	hack/tools/build.sh

tools-runc: ## build runc into bin/ (hack/images' tests run the images with it; also part of tools-node)
	hack/tools/build.sh runc

tools-node: ## build what real nodes run into bin/: kubelet, kube-proxy, kubectl, containerd, ctr, runc, CNI loopback
	hack/tools/build.sh node

build: front-deps ## build nicpool's binaries into bin/: nicpool (the CNI plugin's front) and nicpool-cni (the Go plugin), nicpool-ipamd, nicpool-webhook, kubectl-nicpool
	@mkdir -p $(BIN)
	$(GO_BUILD) -o $(BIN)/ $(addprefix ./cmd/,$(CMDS))
	@# kubectl completes `kubectl nicpool <TAB>` through kubectl_complete-nicpool on PATH.
	ln -sf kubectl-nicpool $(BIN)/kubectl_complete-nicpool
	$(FRONT_CC) $(FRONT_CFLAGS) -o $(BIN)/nicpool $(FRONT_SRC)

# front-deps: what compiling the front needs, for the host and for every other platform
# of FRONT_PLATFORMS (Debian's musl and cross compilers; qemu-user-static, which runs the
# arm64, ppc64le and s390x fronts in the tests): hack/front/deps.sh installs what is missing with apt-get
# when run as root, and otherwise names the packages and stops.
FRONT_PLATFORMS ?= $(HOST_PLATFORM)
front-deps:
	@hack/front/deps.sh $(FRONT_PLATFORMS)

# node-deps: what real nodes need from the host (nft for kube-proxy): hack/node/deps.sh
# installs what is missing with apt-get when run as root, and otherwise names the
# packages and stops.
node-deps:
	@hack/node/deps.sh

# local: bin/nicpool-local, the command behind run, up and image-import.
local:
	@mkdir -p $(BIN)
	$(GO_BUILD) -o $(BIN)/nicpool-local ./cmd/nicpool-local

generate: tools ## regenerate deepcopy code and CRD YAML from crds/api
	$(BIN)/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./crds/api/...
	$(BIN)/controller-gen crd paths=./crds/api/... output:crd:artifacts:config=crds/yaml

test: tools tools-runc build ## everything CI runs: vet, unit and integration tests against a real API server
	@# The front's tests also run its arm64, ppc64le and s390x builds under qemu-user.
	@hack/front/deps.sh $(HOST_PLATFORM) qemu
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GOTEST) -count=1 -timeout 40m ./...
	@# Modules of their own (heavy dependencies): the monitoring rules against the real binaries.
	cd e2e/monitoring && $(GO) vet ./... && $(GOTEST) -count=1 -timeout 30m ./...
	@# The Helm chart with the Helm SDK: same objects as kustomize, install/upgrade/uninstall.
	cd e2e/helm && $(GO) vet ./... && $(GOTEST) -count=1 -timeout 20m ./...
	@# nicpool's CRDs against spiderpool v1.2.2's own, and spiderpool's Go types reading nicpool's objects.
	cd e2e/peers/spiderpool-crds && $(GO) vet ./... && KUBEBUILDER_ASSETS=$(BIN) $(GOTEST) -count=1 -timeout 10m ./...

# The lowest Kubernetes release nicpool supports (the README and Chart.yaml's
# kubeVersion say it): the tests against its kube-apiserver, built from source like the
# pinned one (hack/tools/k8s-floor), in bin/floor beside links to the rest of bin/.
# Every package but the two that schedule pods (the local cluster's e2e/suite and
# cmd/nicpool-local): they need a kube-scheduler of the floor's release, which the
# module proxy cannot build (the pinned 1.37 one lists resource.k8s.io/v1, which
# 1.31 does not serve). FLOOR_PACKAGES picks others.
FLOOR_PACKAGES ?= $$($(GO) list ./... | grep -v -e '/e2e/suite$$' -e '/cmd/nicpool-local$$')
test-floor: tools tools-runc build ## the tests against the lowest supported kube-apiserver (Kubernetes 1.31; FLOOR_PACKAGES picks packages)
	@hack/front/deps.sh $(HOST_PLATFORM) qemu
	hack/tools/build.sh floor
	@for f in $(BIN)/*; do n=$$(basename "$$f"); [ -d "$$f" ] || [ "$$n" = kube-apiserver ] || ln -sfn "$$f" $(BIN)/floor/"$$n"; done
	$(BIN)/floor/kube-apiserver --version
	KUBEBUILDER_ASSETS=$(BIN)/floor $(GOTEST) -count=1 -timeout 60m $(FLOOR_PACKAGES)

bench: tools build ## benchmarks (limit test, admission, memory, the scale scenarios); prints figures, asserts nothing timed
	$(GOTEST) -v -run '^$$' -bench . -benchmem -benchtime 1x -timeout 60m $$($(GO) list ./... | grep -v '/e2e/scale$$')
	cd e2e/peers/whereabouts && KUBEBUILDER_ASSETS=$(BIN) $(GOTEST) -v -run '^$$' -bench . -benchtime 1x -timeout 30m ./...
	$(MAKE) bench-scale

bench-exec: tools build ## the front's exec figures in one run: Limit1000/exec and BenchmarkExecAdd against FRONT_BASELINE's front (default ff96208)
	hack/bench/exec.sh $(or $(FRONT_BASELINE),ff96208)

# The scale scenarios run one after the other, each on a control plane of its own,
# each bounded by its own deadline.
BENCH ?= .
bench-scale: tools ## the scale scenarios alone (real ipamd processes; BENCH=<regexp> picks some, NICPOOL_SCALE_* change them: see e2e/scale)
	$(GOTEST) -v -run '^$$' -bench '$(BENCH)' -benchtime 1x -timeout 240m ./e2e/scale

fuzz: ## run every fuzz target for FUZZTIME (default 60s)
	@for spec in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
	  for f in $$(grep -h '^func Fuzz' $$spec/*_test.go | sed 's/func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
	    echo "== $$spec $$f"; $(GOTEST) -run '^$$' -fuzz "^$$f$$" -fuzztime $${FUZZTIME:-60s} $$spec; done; done

LINT_MODULES := e2e/monitoring e2e/helm e2e/peers/whereabouts e2e/peers/spiderpool-crds e2e/peers/spiderpool hack/release
lint: ## golangci-lint (built from hack/tools/lint on first use), go vet and gofmt
	hack/tools/build.sh golangci-lint
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(BIN)/golangci-lint run ./...
	@# The test modules of their own; hack/tools/* hold only pinned imports.
	@for m in $(LINT_MODULES); do echo "golangci-lint: $$m"; (cd $$m && $(GO) vet ./... && $(BIN)/golangci-lint run ./...) || exit 1; done

run: tools build local $(NODE_DEPS) ## local cluster (3 nodes, NODE=standin|kubelet) with nicpool, sample pools, NADs and a multi-NIC StatefulSet; Ctrl-C stops it
	$(BIN)/nicpool-local run --node $(NODE)

up: tools build local $(NODE_DEPS) ## the same as run, in the background; returns when ready (kubeconfig .local/kubeconfig)
	$(BIN)/nicpool-local up --node $(NODE)

down: ## stop what `make up` started
	$(GO) run ./cmd/nicpool-local down

# Real nodes take longer: they start every pod as a kubelet does.
E2E_TIMEOUT := $(if $(filter kubelet,$(NODE)),90m,40m)

e2e: tools $(NODE_DEPS) ## the end-to-end Ginkgo suite on the local cluster (NODE=standin|kubelet; stand-ins are part of `make test`)
	NICPOOL_E2E_NODE=$(NODE) $(GOTEST) -count=1 -timeout $(E2E_TIMEOUT) -v ./e2e/suite/

test-real: ## the end-to-end suite on real kubelet nodes (make e2e NODE=kubelet; images for this machine's platform only)
	$(MAKE) e2e NODE=kubelet

# spiderpool's own end-to-end suites (spiderpool v1.2.2's test/e2e, its IPAM packages)
# against the local cluster, held against e2e/peers/spiderpool/expected.yaml, in two
# passes (SPIDERPOOL_NODES, in order): standin runs every spec on stand-in nodes but
# those expected.yaml lists under kubelet, which need a real node (a command run in
# the pod's container, a container's exit code); kubelet runs those alone on real
# kubelet nodes (NODE=kubelet), with spiderpool-image (BusyBox named alpine:latest,
# the image the specs name) imported into every node. A pass uses the cluster `make up`
# left running (of its kind of node), else brings one up and stops it afterwards.
# SPIDERPOOL_SUITES, SPIDERPOOL_FOCUS and SPIDERPOOL_LABELS narrow a run; logs and
# Ginkgo's reports go to SPIDERPOOL_E2E_DIR/<pass>.
SPIDERPOOL_E2E_DIR ?= $(CURDIR)/.local/spiderpool-e2e
SPIDERPOOL_NODES   ?= standin kubelet
test-spiderpool: ## spiderpool's own IPAM e2e suites on stand-in, then real nodes (SPIDERPOOL_NODES); fails on any result e2e/peers/spiderpool/expected.yaml does not list
	@rc=0; for n in $(SPIDERPOOL_NODES); do $(MAKE) --no-print-directory spiderpool-pass NODE=$$n || rc=1; done; exit $$rc

spiderpool-pass: tools build local $(NODE_DEPS) $(if $(filter kubelet,$(NODE)),spiderpool-image)
	@echo "== spiderpool e2e: the $(NODE) pass"
	@if [ -e .local/pid ] && kill -0 "$$(cat .local/pid)" 2>/dev/null; then \
	  echo "using the local cluster that is up (.local/kubeconfig)"; started=; \
	else $(BIN)/nicpool-local up --node $(NODE); started=1; fi; \
	trap '[ -z "$$started" ] || (cd $(CURDIR) && $(BIN)/nicpool-local down)' EXIT; \
	if [ "$(NODE)" = kubelet ]; then $(BIN)/nicpool-local import $(SPIDERPOOL_IMAGE); fi; \
	cd e2e/peers/spiderpool && $(GO) vet ./... && \
	  NICPOOL_KUBECONFIG=$(CURDIR)/.local/kubeconfig SPIDERPOOL_E2E_DIR=$(SPIDERPOOL_E2E_DIR) SPIDERPOOL_NODE=$(NODE) \
	  $(GOTEST) -count=1 -v -timeout 240m .

# The image spiderpool's specs run, "alpine" (pulled only when not present), for real
# nodes, which reach no registry: BusyBox, Debian's static build (busybox-static,
# unpacked under bin/.deps, not installed), named docker.io/library/alpine:latest
# (hack/images' BusyboxAsAlpine says why), for this machine's platform. It is no
# product image: it goes to dist/test-images, never to dist/images or a release.
SPIDERPOOL_IMAGE := dist/test-images/busybox.tar
spiderpool-image: ## BusyBox named alpine:latest, the image spiderpool's specs run, for real nodes: dist/test-images/busybox.tar
	hack/images/busybox.sh $(BIN)
	$(GO) run ./hack/images/cmd -bin $(BIN) -out $(dir $(SPIDERPOOL_IMAGE)) -platforms $(HOST_PLATFORM) busybox

test-coordinator: tools build local $(NODE_DEPS) ## spiderpool's coordinator plugin, built from spiderpool's module, chained after nicpool on the local cluster (e2e/peers/coordinator)
	@# coordinator writes iptables rules in the pod's network namespace.
	@command -v iptables >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && apt-get install -y -q iptables; } || \
	  { echo "spiderpool's coordinator needs iptables: install it (Debian: iptables)"; exit 1; }
	@if [ -e .local/pid ] && kill -0 "$$(cat .local/pid)" 2>/dev/null; then \
	  echo "using the local cluster that is up (.local/kubeconfig)"; started=; \
	else $(BIN)/nicpool-local up --node $(NODE); started=1; fi; \
	trap '[ -z "$$started" ] || (cd $(CURDIR) && $(BIN)/nicpool-local down)' EXIT; \
	cd e2e/peers/coordinator && $(GO) vet ./... && \
	  NICPOOL_KUBECONFIG=$(CURDIR)/.local/kubeconfig NICPOOL_BIN=$(BIN) NICPOOL_CNI_DIR=$(CURDIR)/.local/bin \
	  $(GOTEST) -count=1 -v -timeout 30m .

clean: ## remove built binaries and local state
	rm -rf $(BIN) .local dist

# Container images. `make images` needs no Docker: hack/images writes each image as an
# OCI tarball dist/images/<image>.tar from the binaries of `make build`, cross-built for
# every IMAGE_PLATFORMS entry (os/arch); plus the pause image of local nodes.
# `make docker-images` builds the same layout from build/<image>.Dockerfile with Docker.
DOCKER          ?= docker
# The images are named as the manifests and the chart name them by default
# (ghcr.io/nicpool/<image>:<the chart's appVersion>), so that a cluster that imports
# them runs them without a registry (the local clusters tag theirs with VERSION, above).
IMAGE_REPO      ?= ghcr.io/nicpool
IMAGE_TAG       ?= $(shell sed -n 's/^appVersion: //p' charts/nicpool/Chart.yaml)
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
IMAGES          := nicpool nicpool-ipamd nicpool-webhook
# The Go commands the images carry (the nicpool image carries nicpool-cni and the front).
IMAGE_CMDS      := nicpool-cni nicpool-ipamd nicpool-webhook
HOST_PLATFORM   := $(shell $(GO) env GOOS)/$(shell $(GO) env GOARCH)
comma           := ,
empty           :=
space           := $(empty) $(empty)

.PHONY: images image-import docker-images manifests

# cross_build,BINARY,PACKAGE: bin/<os>_<arch>/BINARY for every platform but the host's.
define cross_build
for p in $(IMAGE_PLATFORMS); do [ "$$p" = "$(HOST_PLATFORM)" ] || \
  GOOS=$${p%%/*} GOARCH=$${p#*/} $(GO_BUILD) -o $(BIN)/$${p//\//_}/$(1) $(2); done
endef

# cross_front: bin/<os>_<arch>/nicpool, the front, for every platform but the host's,
# with Debian's musl for it driving its GNU cross compiler (<triple>-linux-musl-gcc;
# linux/amd64, arm64, ppc64le and s390x are known). front-deps, which images runs
# first, installs them as root (hack/front/deps.sh).
define cross_front
for p in $(IMAGE_PLATFORMS); do [ "$$p" = "$(HOST_PLATFORM)" ] && continue; \
  case $$p in \
    linux/amd64) cc=x86_64-linux-musl-gcc ;; \
    linux/arm64) cc=aarch64-linux-musl-gcc ;; \
    linux/ppc64le) cc=powerpc64le-linux-musl-gcc ;; \
    linux/s390x) cc=s390x-linux-musl-gcc ;; \
    *) echo "make images: no musl cross compiler known for $$p (the CNI plugin's front)"; exit 1 ;; \
  esac; \
  mkdir -p $(BIN)/$${p//\//_}; \
  echo "$$cc $(FRONT_CFLAGS) -o $(BIN)/$${p//\//_}/nicpool $(FRONT_SRC)"; \
  $$cc $(FRONT_CFLAGS) -o $(BIN)/$${p//\//_}/nicpool $(FRONT_SRC); done
endef

images: build ## build the images without Docker: dist/images/<image>.tar, OCI, multi-arch (IMAGE_REPO, IMAGE_TAG, IMAGE_PLATFORMS; other platforms need musl cross compilers, which front-deps installs)
	@hack/front/deps.sh $(IMAGE_PLATFORMS)
	@$(cross_front)
	@for c in $(IMAGE_CMDS); do $(call cross_build,$$c,./cmd/$$c); done
	$(GO_BUILD) -o $(BIN)/pause ./hack/images/pause
	@$(call cross_build,pause,./hack/images/pause)
	$(GO) run ./hack/images/cmd -bin $(BIN) -out dist/images -repo $(IMAGE_REPO) -tag $(IMAGE_TAG) \
	  -platforms $(subst $(space),$(comma),$(strip $(IMAGE_PLATFORMS))) $(IMAGES) pause

# image-import IMAGE=<name> IMAGE_REF=<ref>: one image for the host's platform, named
# IMAGE_REF, into dist/tilt/<name>.tar, imported into every node of the running
# `make up NODE=kubelet` (Tilt's custom_build in mode kubelet).
image-import: build local
	@[ -n "$(IMAGE)" ] && [ -n "$(IMAGE_REF)" ] || { echo "usage: make image-import IMAGE=<name> IMAGE_REF=<reference>"; exit 2; }
	$(GO) run ./hack/images/cmd -bin $(BIN) -out dist/tilt -platforms $(HOST_PLATFORM) -ref $(IMAGE_REF) $(IMAGE)
	$(BIN)/nicpool-local import dist/tilt/$(IMAGE).tar

docker-images: ## build the same images with Docker (BuildKit) from build/<image>.Dockerfile (IMAGE_REPO, IMAGE_TAG)
	@for c in $(IMAGES); do echo "== $(IMAGE_REPO)/$$c:$(IMAGE_TAG)"; \
	  DOCKER_BUILDKIT=1 $(DOCKER) build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -f build/$$c.Dockerfile -t $(IMAGE_REPO)/$$c:$(IMAGE_TAG) . ; done

# release VERSION=vX.Y.Z: everything a release publishes, into dist/release/VERSION
# (hack/release says what): the images for IMAGE_PLATFORMS named as published, the
# kubectl plugin for every platform krew serves, the chart, the install YAML, SBOMs
# and checksums. The release workflow (.github/workflows/release.yml) runs it, then
# pushes and signs.
RELEASE_DIR       ?= dist/release/$(VERSION)
# A release builds every platform; tests may name fewer (IMAGE_PLATFORMS and
# PLUGIN_PLATFORMS on the command line: `make test-registry` builds this machine's).
PLUGIN_PLATFORMS  ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
.PHONY: release
release: ## everything a release publishes into dist/release/VERSION (VERSION=vX.Y.Z; cd hack/release && go test runs it on a clean clone)
	@[[ "$(VERSION)" =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$$ ]] || { echo "make release: VERSION=$(VERSION) is not vMAJOR.MINOR.PATCH[-PRE]: make release VERSION=v0.1.0"; exit 2; }
	$(MAKE) images VERSION=$(VERSION) IMAGE_REPO=ghcr.io/nicpool IMAGE_TAG=$(VERSION)
	@for p in $(PLUGIN_PLATFORMS); do ext=; [ "$${p%%/*}" = windows ] && ext=.exe; \
	  echo "kubectl-nicpool $$p"; \
	  GOOS=$${p%%/*} GOARCH=$${p#*/} $(GO_BUILD) -o $(BIN)/$${p//\//_}/kubectl-nicpool$$ext ./cmd/kubectl-nicpool; done
	cd hack/release && $(GO) run . -root $(CURDIR) -version $(VERSION) -images $(CURDIR)/dist/images -bin $(BIN) -out $(abspath $(RELEASE_DIR)) \
	  -plugin-platforms $(subst $(space),$(comma),$(strip $(PLUGIN_PLATFORMS)))

# The release installed from a registry: `make release` for this machine's platform
# alone into dist/release-test, which hack/release's TestInstallFromARegistry pushes
# to a registry running in the test and installs from as an OCI chart (Helm SDK, real
# API server). Not part of `make test`: the release's build takes minutes.
REGISTRY_RELEASE_DIR := $(CURDIR)/dist/release-test/v0.1.0
.PHONY: test-registry test-registry-kubelet registry-release
registry-release:
	$(MAKE) release VERSION=v0.1.0 IMAGE_PLATFORMS=$(HOST_PLATFORM) PLUGIN_PLATFORMS=$(HOST_PLATFORM) RELEASE_DIR=$(REGISTRY_RELEASE_DIR)
test-registry: tools registry-release ## a release for this machine's platform pushed to a registry in the test and installed from it (OCI chart, Helm SDK)
	cd hack/release && $(GO) vet ./... && NICPOOL_RELEASE_DIR=$(REGISTRY_RELEASE_DIR) $(GOTEST) -count=1 -v -run '^TestInstallFromARegistry$$' -timeout 20m .
# The same on real kubelet nodes (hack/release's TestInstallFromARegistryOnKubeletNodes):
# the nodes import the pause image alone and pull nicpool's images from the registry
# by digest, then the seed cases of `make run` pass on that install. Not part of `make
# test`: it runs real nodes.
test-registry-kubelet: tools node-deps tools-node registry-release ## the same release installed from the registry onto real kubelet nodes, which pull nicpool's images by digest; then the seed cases of make run
	cd hack/release && $(GO) vet ./... && NICPOOL_RELEASE_DIR=$(REGISTRY_RELEASE_DIR) $(GOTEST) -count=1 -v -run '^TestInstallFromARegistryOnKubeletNodes$$' -timeout 40m .

manifests: ## regenerate manifests/base's CRDs, webhook configurations and admission policies from crds/yaml and webhook/admission/configs, and the Helm chart charts/nicpool from the kustomizations
	$(GO) run ./hack/manifests
