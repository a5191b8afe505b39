#!/usr/bin/env bash
# make kind-down: delete the cluster kind-up made, and its kubeconfig.
source "$(dirname "$0")/../lib/common.sh"
source "$REPO_ROOT/hack/lib/cluster.sh"
if docker info >/dev/null 2>&1 && cluster_exists; then
  "$KIND" delete cluster --name "$KIND_CLUSTER" --kubeconfig "$KUBECONFIG"
else
  log "no cluster $KIND_CLUSTER"
fi
rm -rf "$CLUSTER_DIR"
