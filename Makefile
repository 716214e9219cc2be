# devtool — build, test and run the local cluster. `make help` lists the targets.
SHELL := /bin/bash
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DATE    ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
PKG     := github.com/devtool/devtool/internal/buildinfo
# The agent gets no date: its hash decides whether up uploads it again, so it must change only with the code.
AGENT_LDFLAGS := -s -w -X $(PKG).Version=$(VERSION) -X $(PKG).Commit=$(COMMIT)
LDFLAGS := $(AGENT_LDFLAGS) -X $(PKG).Date=$(DATE)
GO      ?= go

.PHONY: help build agent cross install test test-unit test-integration fuzz vet deps cluster-build cluster-up cluster-down demo platform-bin platform-up platform-down

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

build: agent ## build bin/devtool with the version stamped in (the agent binaries embedded)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/devtool ./cmd/devtool

AGENT_BIN := internal/agentbin/bin
agent: ## cross-build devtool-agent (static) for linux/amd64 and linux/arm64, gzip'd into internal/agentbin/bin
	@set -e; for arch in amd64 arm64; do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags '$(AGENT_LDFLAGS)' -o $(AGENT_BIN)/devtool-agent-linux-$$arch ./cmd/devtool-agent; \
		gzip -9 -n -f $(AGENT_BIN)/devtool-agent-linux-$$arch; \
	done

platform-bin: ## build bin/devtool-platform (static; no date stamped, so an unchanged server is the same image)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(AGENT_LDFLAGS)' -o bin/devtool-platform ./cmd/devtool-platform

cross: ## cross-compile the CLI for darwin and windows, amd64 and arm64 (CI builds one of each OS)
	@set -e; for t in darwin/amd64 darwin/arm64 windows/amd64 windows/arm64; do \
		echo "$$t"; CGO_ENABLED=0 GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) build -o /dev/null ./cmd/devtool; \
	done

install: agent ## install devtool into GOBIN
	CGO_ENABLED=0 $(GO) install -trimpath -ldflags '$(LDFLAGS)' ./cmd/devtool

vet: ## gofmt check, then go vet with and without the integration tag
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt -w needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags integration ./...

test-unit: ## unit tests: no root, no cluster
	$(GO) test ./...

test-integration: ## integration tests against the running local cluster (or KUBECONFIG)
	$(GO) test -tags integration -count=1 -timeout 30m ./...

fuzz: ## every fuzz target for FUZZTIME each (default 60s; CI gives each 20s)
	hack/fuzz.sh

test: ## everything: deps, vet, unit tests, fuzz, local cluster, integration tests (stops the cluster it started)
	hack/test.sh

deps: ## install what the tests need (Debian packages, Go modules, cluster binaries)
	hack/deps.sh

cluster-build: ## build or find the cached cluster binaries
	hack/cluster/build.sh

cluster-up: ## start the local Kubernetes cluster (root); writes /tmp/devtool-cluster/kubeconfig
	hack/cluster/up.sh

demo: ## the main job: local cluster, then a real deploy of examples/hello and a request to it
	hack/demo.sh

cluster-down: ## stop the local cluster and remove everything it made on the host
	hack/cluster/down.sh

platform-up: ## install the platform server into the local cluster (2 replicas); writes platform-url, -ca.crt, -admin-token
	hack/platform.sh up

platform-down: ## remove the platform server, its users' namespaces and the three files
	hack/platform.sh down
