# dynamic-scheduler: a kube-scheduler-compatible scheduler and the proof that it replaces kube-scheduler.
# `make help` lists the targets. Every target that needs a tool or a cluster makes it first.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -o errexit -o nounset -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
KIND_CLUSTER ?= dynamic-scheduler
OFFLINE ?= 0
IMG ?= dynamic-scheduler:dev
E2E_ARGS ?=
export KIND_CLUSTER OFFLINE IMG

##@ General

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target> [OFFLINE=1] [KIND_CLUSTER=name]\n"} \
	  /^[a-zA-Z_-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,e2e,bench]'
	@touch $@

.PHONY: venv
venv: $(VENV)/.installed ## Create .venv with the package and its test dependencies

.PHONY: test
test: venv tools ## Run every test of tests/: unit tests, and those against a private kube-apiserver (needs make tools)
	$(PY) -m pytest tests

.PHONY: unit
unit: venv ## Run the unit tests only (no API server, no tools build)
	$(PY) -m pytest tests -m "not apiserver"

.PHONY: lint
lint: venv ## ruff check and format check
	$(VENV)/bin/ruff check scheduler tests e2e bench
	$(VENV)/bin/ruff format --check scheduler tests e2e bench

##@ Offline toolchain (what OFFLINE=1 builds; binaries live in ~/.cache/dynamic-scheduler)

.PHONY: docker
docker: ## Make `docker` work: start dockerd, installing Debian's docker.io if needed
	@bash hack/docker/ensure-docker.sh

.PHONY: tools
tools: ## Build the pinned Kubernetes, etcd, containerd, CNI, kind, kwok binaries (hack/tools/go.mod)
	@bash hack/tools/build.sh

.PHONY: node-image
node-image: docker tools ## Assemble the offline kind node image from the pinned binaries
	@bash hack/images/node-image.sh

##@ Cluster

.PHONY: kind-up
kind-up: docker ## Create (or reuse) the kind cluster of kind-config.yaml; OFFLINE=1 uses the offline node image
	@bash hack/kind/up.sh

.PHONY: kind-down
kind-down: ## Delete the kind cluster
	@bash hack/kind/down.sh

.PHONY: image docker-build
image: docker venv ## Build the scheduler image $(IMG) (OFFLINE=1: on the Debian-built Python base)
	@bash hack/images/scheduler-image.sh
docker-build: image

.PHONY: kind-load
kind-load: ## Load $(IMG) (and offline, the Prometheus image) into the kind cluster
	@bash hack/kind/load.sh

##@ End-to-end

.PHONY: e2e test-e2e
e2e: docker venv ## Cluster up, image, every e2e suite, cluster down (KEEP_CLUSTER=1 keeps it; E2E_ARGS='-k lease')
	@bash hack/e2e.sh
test-e2e: e2e
