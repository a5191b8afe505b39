#!/usr/bin/env bash
# make bench: scheduling throughput and latency of dynamic-scheduler against
# kube-scheduler and a raw binder, on kwok nodes in the kind cluster
# (python -m bench; see the README's "Benchmark"). Variables: BENCH_NODES,
# BENCH_PODS, BENCH_RUNS, BENCH_CONTENDERS, BENCH_WORKLOADS
# (basic,affinity,spread,preemption,churn,dra,dynamic), BENCH_MODES (stream,backlog),
# BENCH_ARGS (more flags of python -m bench).
source "$(dirname "$0")/lib/common.sh"
source "$REPO_ROOT/hack/lib/cluster.sh"
source "$REPO_ROOT/hack/lib/kwok.sh"
PY=${PY:-$REPO_ROOT/.venv/bin/python}
cluster_exists || die "no cluster $KIND_CLUSTER: run make kind-up"

# Only the dynamic workload (in the default list) queries Prometheus.
if [[ -z ${BENCH_WORKLOADS:-} || ${BENCH_WORKLOADS} == *dynamic* ]]; then
  need prometheus "the dynamic workload queries a local Prometheus: apt-get install prometheus (Debian's package)"
fi
kwok=$("$REPO_ROOT/hack/tools/ensure-bin.sh" kwok)
kube_scheduler=$("$REPO_ROOT/hack/tools/ensure-bin.sh" kube-scheduler)
rawbinder=$("$REPO_ROOT/hack/tools/ensure-bin.sh" rawbinder)
kwok_stages

args=(--kubeconfig "$KUBECONFIG" --nodes "${BENCH_NODES:-1000}" --pods "${BENCH_PODS:-5000}"
      --runs "${BENCH_RUNS:-3}" --kwok "$kwok" --kwok-stages "${KWOK_STAGES[@]}"
      --kube-scheduler "$kube_scheduler" --rawbinder "$rawbinder")
[[ -n ${BENCH_CONTENDERS:-} ]] && args+=(--contenders "$BENCH_CONTENDERS")
[[ -n ${BENCH_WORKLOADS:-} ]] && args+=(--workloads "$BENCH_WORKLOADS")
[[ -n ${BENCH_MODES:-} ]] && args+=(--modes "$BENCH_MODES")
log "benchmark on cluster $KIND_CLUSTER: ${BENCH_NODES:-1000} kwok nodes, ${BENCH_PODS:-5000} pods, ${BENCH_RUNS:-3} runs"
# BENCH_ARGS is split as the shell would (quotes kept): BENCH_ARGS="--note 'a sentence'".
eval "set -- ${BENCH_ARGS:-}"
exec "$PY" -m bench "${args[@]}" "$@"
