#!/usr/bin/env bash
# make bench-clean: remove what make bench leaves in the cluster when it is
# interrupted or run with --keep-nodes: its kwok and churn nodes (the pods
# bound to them go with them, by the pod garbage collector) and its
# namespaces. make e2e runs it on a reused cluster: its suites count every
# node and pod.
source "$(dirname "$0")/lib/common.sh"
source "$REPO_ROOT/hack/lib/cluster.sh"
nodes='bench.dynamic-scheduler.io/kwok=true'
churn='bench.dynamic-scheduler.io/churn=true'
namespaces='app.kubernetes.io/part-of=dynamic-scheduler-bench'

# The number of objects of a kind with a label; fails when the API server does not answer.
count() {
  local names
  names=$(kubectl get "$1" -l "$2" -o name) || die "cannot list $1 in cluster $KIND_CLUSTER (is it up?)"
  if [[ -z $names ]]; then echo 0; else wc -l <<<"$names"; fi
}
# Sets n_nodes and n_ns (each count is its own assignment, so a failed one stops the script).
tally() {
  local kwok_nodes churn_nodes
  kwok_nodes=$(count nodes "$nodes")
  churn_nodes=$(count nodes "$churn")
  n_ns=$(count namespaces "$namespaces")
  n_nodes=$((kwok_nodes + churn_nodes))
}
tally
if (( n_nodes == 0 && n_ns == 0 )); then
  log "no benchmark leftovers in cluster $KIND_CLUSTER"
  exit 0
fi
log "removing the benchmark's leftovers: $n_nodes nodes, $n_ns namespaces"
kubectl delete nodes -l "$nodes" --wait=false >/dev/null
kubectl delete nodes -l "$churn" --wait=false >/dev/null
kubectl delete namespaces -l "$namespaces" --wait=false >/dev/null
# The nodes go at once; the namespaces once the pod garbage collector has
# removed the pods that were bound to those nodes.
deadline=$((SECONDS + 300))
while :; do
  tally
  (( n_nodes + n_ns > 0 )) || break
  (( SECONDS < deadline )) \
    || die "after 300s $n_nodes benchmark nodes and $n_ns namespaces are left (kubectl get namespaces -l $namespaces)"
  sleep 2
done
log "benchmark leftovers removed"
