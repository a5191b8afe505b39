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
BENCH_NODES ?= 1000
BENCH_PODS ?= 5000
BENCH_RUNS ?= 3
BENCH_CONTENDERS ?=
export KIND_CLUSTER OFFLINE IMG BENCH_NODES BENCH_PODS BENCH_RUNS BENCH_CONTENDERS

##@ General

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target> [OFFLINE=1] [KIND_CLUSTER=name]\n"} \
	  /^[a-zA-Z0-9_-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

# The exact versions (and hashes) of requirements/dev.txt, then our package on top.
$(VENV)/.installed: pyproject.toml requirements/dev.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements/dev.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $@

.PHONY: venv
venv: $(VENV)/.installed ## Create .venv with the package and the locked versions of its test dependencies

LOCK := $(VENV)/bin/uv pip compile pyproject.toml --quiet --universal --python-version 3.11 --generate-hashes

.PHONY: lock
lock: venv ## Refresh requirements/runtime.txt (the image) and dev.txt (make venv) from pyproject.toml's ranges (needs PyPI)
	$(LOCK) --upgrade -o requirements/runtime.txt
	$(LOCK) --upgrade --extra test --extra e2e --extra bench --extra docs -o requirements/dev.txt

.PHONY: test
test: venv tools ## Run every test of tests/: unit tests, and those against a private kube-apiserver (needs make tools)
	$(PY) -m pytest tests

.PHONY: unit
unit: venv ## Run the unit tests only (no API server, no tools build)
	$(PY) -m pytest tests -m "not apiserver"

PY_SOURCES := scheduler tests e2e bench hack/conformance hack/docs setup.py

.PHONY: lint
lint: venv ## ruff check and format --check, mypy of scheduler/, the docs (names they use, make docs), shellcheck of hack/ and .ci/run, actionlint of the workflows, every rendered manifest against the pinned schemas
	$(VENV)/bin/ruff check $(PY_SOURCES)
	$(VENV)/bin/ruff format --check $(PY_SOURCES)
	$(PY) -m mypy
	@command -v shellcheck >/dev/null || { echo "error: shellcheck not found: apt-get install shellcheck" >&2; exit 1; }
	shellcheck -x --severity=warning $$(git ls-files 'hack/*.sh' 'hack/**/*.sh') .ci/run
	$$(bash hack/lint/actionlint.sh) .github/workflows/*.yaml
	$(PY) -m pytest -q -p no:cacheprovider tests/deploy/test_render.py -k "valid_for_kubernetes or strict_validation"
	$(PY) -m pytest -q -p no:cacheprovider tests/test_docs.py
	@$(MAKE) --no-print-directory docs

.PHONY: docs
docs: venv ## Build the documentation site into site/ (mkdocs, strict: a broken link or anchor fails)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

.PHONY: fmt
fmt: venv ## ruff format and the safe ruff fixes (imports, upgrades)
	$(VENV)/bin/ruff format $(PY_SOURCES)
	$(VENV)/bin/ruff check --fix $(PY_SOURCES)

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
docker-build: image ## Same as image

.PHONY: kind-load
kind-load: ## Load $(IMG) (and offline, the Prometheus image) into the kind cluster
	@bash hack/kind/load.sh

##@ Replacing the scheduler (on the kind cluster; see "The two methods" in the README)

.PHONY: render
render: venv ## Print the manifests of a method: make render METHOD=lease|static|prometheus|shadow
	@$(PY) -m scheduler render $(or $(METHOD),lease) -f "$$(bash hack/deploy-values.sh)"

.PHONY: deploy-lease
deploy-lease: venv ## The lease method: 3 replicas as default-scheduler take kube-system/kube-scheduler
	@bash hack/deploy.sh lease $(DEPLOY_ARGS)

.PHONY: deploy-static
deploy-static: venv ## The static-pod method (DEPLOY_ARGS='--set static.mode=replace' replaces kube-scheduler)
	@bash hack/deploy.sh static $(DEPLOY_ARGS)

.PHONY: deploy-shadow
deploy-shadow: venv ## Shadow mode beside the running scheduler: judges its binds, writes nothing (then: make shadow-report)
	@bash hack/deploy.sh shadow $(DEPLOY_ARGS)

.PHONY: shadow-report
shadow-report: venv ## The shadow's agreement rate and last decisions (REPORT_ARGS='--disagreements')
	@KUBECONFIG=$${KUBECONFIG:-$(HOME)/.cache/dynamic-scheduler/clusters/$(KIND_CLUSTER)/kubeconfig} \
	  $(PY) -m scheduler shadow report $(REPORT_ARGS)

.PHONY: prometheus
prometheus: venv ## Prometheus at prometheus.crane-system.svc:9090 with the policy's recording rules
	@bash hack/deploy.sh prometheus $(DEPLOY_ARGS)

.PHONY: restore
restore: venv ## Give scheduling back to kube-scheduler and remove the scheduler's objects
	@bash hack/deploy.sh restore $(DEPLOY_ARGS)

.PHONY: undeploy
undeploy: venv ## restore, and remove Prometheus too
	@bash hack/deploy.sh undeploy $(DEPLOY_ARGS)

.PHONY: churn
churn: venv ## Delete the pods of NAMESPACE on a timer, forced, bounded in rounds and time: make churn NAMESPACE=ns [CHURN_ARGS=...]
	@test -n "$(NAMESPACE)" || { echo "error: set NAMESPACE=<namespace>" >&2; exit 1; }
	@KUBECONFIG=$${KUBECONFIG:-$(HOME)/.cache/dynamic-scheduler/clusters/$(KIND_CLUSTER)/kubeconfig} \
	  $(PY) -m scheduler churn -n $(NAMESPACE) $(CHURN_ARGS)

.PHONY: finalize-namespace
finalize-namespace: venv ## Clear the finalizers of a namespace stuck in Terminating: make finalize-namespace NAMESPACE=ns
	@test -n "$(NAMESPACE)" || { echo "error: set NAMESPACE=<namespace>" >&2; exit 1; }
	@KUBECONFIG=$${KUBECONFIG:-$(HOME)/.cache/dynamic-scheduler/clusters/$(KIND_CLUSTER)/kubeconfig} \
	  $(PY) -m scheduler finalize-namespace $(NAMESPACE)

##@ End-to-end

.PHONY: e2e test-e2e
e2e: docker venv ## Cluster up, image, every e2e suite, cluster down (KEEP_CLUSTER=1 keeps it; E2E_ARGS='-k lease')
	@bash hack/e2e.sh
test-e2e: e2e ## Same as e2e

.PHONY: e2e-faults
e2e-faults: docker venv ## Only the fault suites (kube-apiserver restart, leader cut off, Lease deleted or edited, bindings refused, Prometheus stopped or answering garbage): cluster up, suites, down
	@E2E_ARGS="e2e/test_faults.py e2e/test_faults_prometheus.py $(E2E_ARGS)" bash hack/e2e.sh

.PHONY: conformance
conformance: docker venv ## Upstream's [sig-scheduling] e2e specs with ours, then with kube-scheduler: conformance/results/latest.md (KEEP_CLUSTER=1 keeps the cluster)
	@bash hack/conformance/run.sh

.PHONY: conformance-dra
conformance-dra: docker venv ## Upstream's [DRA] e2e specs (control plane and kubelet, 3 ginkgo processes; CONFORMANCE_PROCS) with ours, then with kube-scheduler: conformance/results/dra/latest.md
	@CONFORMANCE_SUITE=dra bash hack/conformance/run.sh

##@ Benchmark

.PHONY: bench
bench: venv kind-up ## Throughput and latency vs kube-scheduler on kwok nodes (BENCH_NODES=1000 BENCH_PODS=5000 BENCH_RUNS=3 BENCH_CONTENDERS=... BENCH_WORKLOADS=basic,affinity,spread,preemption,churn,dra,dynamic BENCH_MODES=stream,backlog)
	@bash hack/bench.sh

.PHONY: bench-scale
bench-scale: venv kind-up ## Ours vs kube-scheduler with 30 pods running per node, at 1000 and 5000 kwok nodes (the cluster's own kube-scheduler stopped, the API server's GOMEMLIMIT set meanwhile), into bench/results/scale/ (SCALE_SIZES=1000,5000 SCALE_PODS=10000 SCALE_RESIDENT=30 SCALE_MODES=backlog,stream SCALE_APISERVER_MEMLIMIT=10GiB SCALE_SETTLE_LOAD=1.5)
	@bash hack/bench-scale.sh

.PHONY: bench-placement
bench-placement: venv kind-up ## Placement quality on simulated usage: kube-scheduler, ours, ours with Dynamic as crane and as improved, an oracle (PLACEMENT_NODES=16 PLACEMENT_RUNS=3 PLACEMENT_SCENARIOS=... PLACEMENT_ARGS=...)
	@bash hack/bench-placement.sh

.PHONY: soak
soak: venv kind-up ## Ours (the lease method) for SOAK_MINUTES=120 under churn: pods, nodes, the leader deleted every 10 min, Prometheus restarted; into bench/results/soak/ (SOAK_ARGS=...)
	@bash hack/soak.sh

.PHONY: bench-clean
bench-clean: ## Remove what an interrupted make bench (or BENCH_ARGS=--keep-nodes) left in the cluster: kwok nodes, bench namespaces
	@bash hack/bench-clean.sh

.PHONY: bench-report
bench-report: venv ## Write the report of a benchmark's workdir again, finished or not, with no cluster (BENCH_WORKDIR=_artifacts/bench/<time>)
	@test -n "$(BENCH_WORKDIR)" || { echo "make bench-report: set BENCH_WORKDIR=_artifacts/bench/<time>" >&2; exit 2; }
	@$(PY) -m bench --report-from "$(BENCH_WORKDIR)" $(BENCH_ARGS)

.PHONY: bench-5000
bench-5000: venv kind-up ## The basic workload at 5000 kwok nodes, both modes, into bench/results/5000-nodes/ (about 40 min)
	@BENCH_NODES=5000 BENCH_WORKLOADS=basic BENCH_ARGS="--out $(CURDIR)/bench/results/5000-nodes $${BENCH_ARGS:-}" bash hack/bench.sh
