# shellcheck shell=bash
# shellcheck disable=SC2034  # settings for the scripts that source this file
# Cluster settings shared by the kind, deploy and e2e scripts. Source after common.sh.

KIND_CLUSTER=${KIND_CLUSTER:-dynamic-scheduler}
KIND_CONFIG=${KIND_CONFIG:-$REPO_ROOT/kind-config.yaml}
# The stock node image of the pinned release, as kind v0.33.0 lists it.
KIND_STOCK_NODE_IMAGE=${KIND_STOCK_NODE_IMAGE:-kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5}
CLUSTER_DIR=$CACHE_ROOT/clusters/$KIND_CLUSTER
export KUBECONFIG=${KIND_KUBECONFIG:-$CLUSTER_DIR/kubeconfig}
OFFLINE=${OFFLINE:-0}

KIND=${KIND:-$("$REPO_ROOT/hack/tools/ensure-bin.sh" kind)}
KUBECTL=${KUBECTL:-$("$REPO_ROOT/hack/tools/ensure-bin.sh" kubectl)}

# The list is read whole before it is searched: `kind get clusters | grep -q` under pipefail
# fails when grep stops at an early match and kind, still writing, dies of the closed pipe
# (two clusters, ours listed first), and the e2e teardown then deleted a healthy cluster.
cluster_exists() {
  local names
  names=$("$KIND" get clusters 2>&1) || die "kind get clusters failed: $names"
  grep -qx "$KIND_CLUSTER" <<<"$names"
}
kubectl() { "$KUBECTL" "$@"; }
