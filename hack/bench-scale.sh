#!/usr/bin/env bash
# make bench-scale: ours against kube-scheduler on clusters of Kubernetes' published size, with
# pods already running on every node (python -m bench --resident-per-node; see
# docs/benchmark.md, "Scale"). Each size is a backlog and a stream of SCALE_PODS new pods of
# the basic workload, one run per contender; results in bench/results/scale/<nodes>-nodes/.
# Variables: SCALE_SIZES (nodes, comma-separated; default 1000,5000), SCALE_PODS (10000),
# SCALE_RESIDENT (pods per node already running; 30), SCALE_MODES (backlog,stream), BENCH_ARGS
# (more flags of python -m bench), SCALE_APISERVER_MEMLIMIT (the API server's GOMEMLIMIT while it
# runs; 10GiB, none to leave it alone), SCALE_SETTLE_LOAD and SCALE_SETTLE_MAX (before each
# contender starts, wait up to SCALE_SETTLE_MAX seconds (300) for the 1-minute load average to
# fall to SCALE_SETTLE_LOAD (1.5), so that neither starts while the cluster is still busy with
# what came before; none to start at once).
# The cluster's own kube-scheduler is stopped while it runs (see pause_cluster_scheduler), and the
# API server given a soft memory limit (see limit_apiserver_heap).
source "$(dirname "$0")/lib/common.sh"
source "$REPO_ROOT/hack/lib/cluster.sh"

sizes=${SCALE_SIZES:-1000,5000}
for nodes in ${sizes//,/ }; do
  [[ $nodes =~ ^[0-9]+$ ]] || die "SCALE_SIZES: expected node counts like 1000,5000, got $sizes"
done
APISERVER_MEMLIMIT=${SCALE_APISERVER_MEMLIMIT:-10GiB}
[[ $APISERVER_MEMLIMIT == none || $APISERVER_MEMLIMIT =~ ^[0-9]+(KiB|MiB|GiB)$ ]] \
  || die "SCALE_APISERVER_MEMLIMIT: expected a size like 10GiB (or none), got $APISERVER_MEMLIMIT"
SETTLE_LOAD=${SCALE_SETTLE_LOAD:-1.5}
SETTLE_MAX=${SCALE_SETTLE_MAX:-300}
[[ $SETTLE_LOAD == none || $SETTLE_LOAD =~ ^[0-9]+(\.[0-9]+)?$ ]] \
  || die "SCALE_SETTLE_LOAD: expected a load average like 1.5 (or none), got $SETTLE_LOAD"
[[ $SETTLE_MAX =~ ^[0-9]+$ ]] || die "SCALE_SETTLE_MAX: expected seconds like 300, got $SETTLE_MAX"
settle_args=""
[[ $SETTLE_LOAD == none ]] || settle_args="--settle-load $SETTLE_LOAD --settle-max $SETTLE_MAX"
cluster_exists || die "no cluster $KIND_CLUSTER: run make kind-up"

# The cluster's own kube-scheduler schedules none of the bench's pods, but it holds every pod in
# its caches and watches them: 2.4 GiB at 150 000 pods, on a machine where the API server, the
# two contenders and the bench need the rest. It is stopped the way the static-pod method's
# replace mode stops it (its manifest moved aside, where `dynamic-scheduler restore static` would
# find it too) and put back when this script ends, however it ends.
CONTROL_PLANE=$KIND_CLUSTER-control-plane
MANIFEST=/etc/kubernetes/manifests/kube-scheduler.yaml
ASIDE=/etc/kubernetes/dynamic-scheduler/kube-scheduler.yaml.orig
on_node() { docker exec "$CONTROL_PLANE" "$@"; }

pause_cluster_scheduler() {
  on_node test -f "$MANIFEST" \
    || die "no $MANIFEST on $CONTROL_PLANE: is a scheduler of ours installed with the static-pod method? (make undeploy)"
  ! on_node test -e "$ASIDE" || die "$ASIDE exists on $CONTROL_PLANE already: put it back first (dynamic-scheduler restore static)"
  on_node test -d "$(dirname "$ASIDE")" || MADE_DIR=1
  on_node mkdir -p "$(dirname "$ASIDE")"
  on_node mv "$MANIFEST" "$ASIDE"
  trap resume_cluster_scheduler EXIT
  local deadline=$((SECONDS + 120))
  while [[ -n $(on_node crictl ps -q --name '^kube-scheduler$') ]]; do
    (( SECONDS < deadline )) || die "the cluster's kube-scheduler still runs 120 s after its manifest was moved aside"
    sleep 1
  done
  log "the cluster's kube-scheduler is stopped while the benchmark runs"
}

resume_cluster_scheduler() {
  on_node test -f "$ASIDE" || return 0
  on_node mv "$ASIDE" "$MANIFEST"
  [[ -z ${MADE_DIR:-} ]] || on_node rmdir --ignore-fail-on-non-empty "$(dirname "$ASIDE")"
  local pod=kube-scheduler-$CONTROL_PLANE
  if ! kubectl -n kube-system wait --for=condition=Ready "pod/$pod" --timeout=120s >/dev/null 2>&1; then
    # The same manifest comes back with the same pod UID; now and then the kubelet keeps that pod
    # down as terminated until it restarts (e2e/test_no_scheduler.py meets the same).
    log "the cluster's kube-scheduler is not back 120 s after its manifest: restarting the kubelet"
    on_node systemctl restart kubelet
    kubectl -n kube-system wait --for=condition=Ready "pod/$pod" --timeout=180s >/dev/null \
      || { log "warning: the cluster's kube-scheduler is not Ready: see kubectl -n kube-system get pod $pod"; return 0; }
  fi
  log "the cluster's kube-scheduler is back"
}

# The API server holds 150 000 pods in its watch cache and serves them to each contender's lists;
# with Go's default GC target its heap grew to 12.4 GiB at 5000 nodes, mostly garbage awaiting a
# collection, and the machine ran out of memory while kube-scheduler started. GOMEMLIMIT makes its
# collector run before the heap passes the limit (a soft limit: a live heap above it is kept). Set
# on the static pod's manifest, which makes the kubelet restart it; the original is put back at the
# end, which restarts it again. Both contenders meet the same API server.
APISERVER_MANIFEST=/etc/kubernetes/manifests/kube-apiserver.yaml
APISERVER_ASIDE=/etc/kubernetes/dynamic-scheduler/kube-apiserver.yaml.orig

apiserver_container() { on_node crictl ps -q --name '^kube-apiserver$'; }

# apiserver_restarted BEFORE: whether the API server container is no longer BEFORE and /readyz
# answers, within 180 s.
apiserver_restarted() {
  local deadline=$((SECONDS + 180))
  until [[ $(apiserver_container) != "$1" ]] && kubectl get --raw /readyz >/dev/null 2>&1; do
    (( SECONDS < deadline )) || return 1
    sleep 2
  done
}

limit_apiserver_heap() {
  [[ $APISERVER_MEMLIMIT != none ]] || return 0
  ! on_node test -e "$APISERVER_ASIDE" \
    || die "$APISERVER_ASIDE exists on $CONTROL_PLANE already: move it back to $APISERVER_MANIFEST first"
  ! on_node grep -q '^    env:' "$APISERVER_MANIFEST" \
    || die "$APISERVER_MANIFEST on $CONTROL_PLANE sets an environment already: run with SCALE_APISERVER_MEMLIMIT=none"
  local before
  before=$(apiserver_container)
  on_node cp "$APISERVER_MANIFEST" "$APISERVER_ASIDE"
  trap resume_cluster EXIT
  # kubeadm's manifest lists one container; its env goes before its image.
  on_node sed -i "s|^    image: \(.*kube-apiserver.*\)|    env:\n    - name: GOMEMLIMIT\n      value: $APISERVER_MEMLIMIT\n    image: \1|" \
    "$APISERVER_MANIFEST"
  on_node grep -q "value: $APISERVER_MEMLIMIT" "$APISERVER_MANIFEST" \
    || die "could not set GOMEMLIMIT in $APISERVER_MANIFEST on $CONTROL_PLANE"
  apiserver_restarted "$before" \
    || die "the API server did not come back within 180 s of its manifest's change (kubectl -n kube-system get pods)"
  log "the API server runs with GOMEMLIMIT=$APISERVER_MEMLIMIT while the benchmark runs"
}

resume_apiserver() {
  on_node test -f "$APISERVER_ASIDE" || return 0
  local before
  before=$(apiserver_container)
  on_node mv "$APISERVER_ASIDE" "$APISERVER_MANIFEST"
  if apiserver_restarted "$before"; then
    log "the API server runs with its own manifest again"
  else
    log "warning: the API server is not back 180 s after its manifest was put back: see docker exec $CONTROL_PLANE crictl ps -a"
  fi
}

resume_cluster() {
  resume_apiserver
  resume_cluster_scheduler
}

pause_cluster_scheduler
limit_apiserver_heap
for nodes in ${sizes//,/ }; do
  log "scale benchmark: $nodes nodes, ${SCALE_RESIDENT:-30} resident pods per node, ${SCALE_PODS:-10000} new pods"
  BENCH_NODES=$nodes BENCH_PODS=${SCALE_PODS:-10000} BENCH_RUNS=1 BENCH_WORKLOADS=basic \
    BENCH_MODES=${SCALE_MODES:-backlog,stream} BENCH_CONTENDERS=ours-qps5000,kube-scheduler-qps5000 \
    BENCH_ARGS="--resident-per-node ${SCALE_RESIDENT:-30} $settle_args --out $REPO_ROOT/bench/results/scale/$nodes-nodes ${BENCH_ARGS:-}" \
    bash "$REPO_ROOT/hack/bench.sh"
done
