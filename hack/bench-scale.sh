#!/usr/bin/env bash
# make bench-scale: ours against kube-scheduler on clusters of Kubernetes' published size, with
# pods already running on every node (python -m bench --resident-per-node; see
# docs/benchmark.md, "Scale"). Each size is a backlog and a stream of SCALE_PODS new pods of
# the basic workload, one run per contender; results in bench/results/scale/<nodes>-nodes/.
# Variables: SCALE_SIZES (nodes, comma-separated; default 1000,5000), SCALE_PODS (10000),
# SCALE_RESIDENT (pods per node already running; 30), SCALE_MODES (backlog,stream), BENCH_ARGS
# (more flags of python -m bench).
source "$(dirname "$0")/lib/common.sh"

sizes=${SCALE_SIZES:-1000,5000}
for nodes in ${sizes//,/ }; do
  [[ $nodes =~ ^[0-9]+$ ]] || die "SCALE_SIZES: expected node counts like 1000,5000, got $sizes"
done
for nodes in ${sizes//,/ }; do
  log "scale benchmark: $nodes nodes, ${SCALE_RESIDENT:-30} resident pods per node, ${SCALE_PODS:-10000} new pods"
  BENCH_NODES=$nodes BENCH_PODS=${SCALE_PODS:-10000} BENCH_RUNS=1 BENCH_WORKLOADS=basic \
    BENCH_MODES=${SCALE_MODES:-backlog,stream} BENCH_CONTENDERS=ours-qps5000,kube-scheduler-qps5000 \
    BENCH_ARGS="--resident-per-node ${SCALE_RESIDENT:-30} --out $REPO_ROOT/bench/results/scale/$nodes-nodes ${BENCH_ARGS:-}" \
    bash "$REPO_ROOT/hack/bench.sh"
done
