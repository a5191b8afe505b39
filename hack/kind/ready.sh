#!/usr/bin/env bash
# Waits until every node of the cluster is Ready and kube-proxy and CoreDNS run;
# on failure shows nodes and pods, exports the node logs and fails. The
# benchmark's kwok nodes are left out: kept between runs (--keep-nodes), they
# are NotReady while no kwok controller runs.
source "$(dirname "$0")/../lib/common.sh"
source "$REPO_ROOT/hack/lib/cluster.sh"

fail() {
  local logs
  logs=$REPO_ROOT/_artifacts/kind-up-$(date +%s)
  kubectl get nodes -o wide >&2 || true
  kubectl get pods -A -o wide >&2 || true
  "$KIND" export logs "$logs" --name "$KIND_CLUSTER" >/dev/null 2>&1 || true
  die "$1 (node logs: $logs)"
}
log "waiting for nodes, kube-proxy and CoreDNS"
kubectl wait --for=condition=Ready nodes --timeout=240s \
  -l '!bench.dynamic-scheduler.io/kwok,!bench.dynamic-scheduler.io/churn' >/dev/null \
  || fail "nodes did not become Ready"
kubectl -n kube-system rollout status daemonset/kube-proxy --timeout=180s >/dev/null || fail "kube-proxy is not running"
kubectl -n kube-system rollout status deployment/coredns --timeout=180s >/dev/null || fail "CoreDNS is not running"
log "cluster $KIND_CLUSTER is ready: export KUBECONFIG=$KUBECONFIG"
