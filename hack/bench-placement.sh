#!/usr/bin/env bash
# make bench-placement: where pods go, judged on simulated real usage: kube-scheduler,
# ours without and with the Dynamic plugin (as crane-scheduler decides, and as improved),
# and an oracle, on kwok nodes whose usage kwok reports to a local Prometheus
# (python -m bench.placement; see docs/benchmark.md). Variables: PLACEMENT_NODES (per
# contender, 16), PLACEMENT_RUNS (3), PLACEMENT_SCENARIOS, PLACEMENT_CONTENDERS,
# PLACEMENT_ARGS (more flags, e.g. --scale 0.3 for a quick look, --dynamic-policy FILE and
# --dynamic-weight N to try another policy or weight for ours-dynamic).
source "$(dirname "$0")/lib/common.sh"
source "$REPO_ROOT/hack/lib/cluster.sh"
source "$REPO_ROOT/hack/lib/kwok.sh"
PY=${PY:-$REPO_ROOT/.venv/bin/python}
cluster_exists || die "no cluster $KIND_CLUSTER: run make kind-up"
need prometheus "the placement benchmark runs a local Prometheus: apt-get install prometheus (Debian's package)"
kwok=$("$REPO_ROOT/hack/tools/ensure-bin.sh" kwok)
kube_scheduler=$("$REPO_ROOT/hack/tools/ensure-bin.sh" kube-scheduler)
kwok_stages

args=(--kubeconfig "$KUBECONFIG" --kwok "$kwok" --kwok-stages "${KWOK_STAGES[@]}"
      --kube-scheduler "$kube_scheduler" --nodes "${PLACEMENT_NODES:-16}" --runs "${PLACEMENT_RUNS:-3}")
[[ -n ${PLACEMENT_SCENARIOS:-} ]] && args+=(--scenarios "$PLACEMENT_SCENARIOS")
[[ -n ${PLACEMENT_CONTENDERS:-} ]] && args+=(--contenders "$PLACEMENT_CONTENDERS")
log "placement benchmark on cluster $KIND_CLUSTER: ${PLACEMENT_NODES:-16} kwok nodes per contender, ${PLACEMENT_RUNS:-3} runs"
eval "set -- ${PLACEMENT_ARGS:-}"
exec "$PY" -m bench.placement "${args[@]}" "$@"
