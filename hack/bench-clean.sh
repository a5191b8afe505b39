#!/usr/bin/env bash
# make bench-clean: remove what make bench leaves in the cluster when it is
# interrupted or run with --keep-nodes: its kwok and churn nodes and its
# namespaces (python -m bench.clean, which knows their labels). make e2e runs
# it on a reused cluster: its suites count every node and pod.
source "$(dirname "$0")/lib/common.sh"
source "$REPO_ROOT/hack/lib/cluster.sh"
PY=${PY:-$REPO_ROOT/.venv/bin/python}
cluster_exists || die "no cluster $KIND_CLUSTER: run make kind-up"
"$PY" -m bench.clean --kubeconfig "$KUBECONFIG" 2>&1 | while IFS= read -r line; do log "$line"; done
