#!/usr/bin/env bash
# make soak: ours leading on kind for SOAK_MINUTES (120) under churn, the lease method deployed
# with Prometheus (python -m bench.soak; see docs/benchmark.md, "Soak"): the image built and
# loaded, both deployed, the soak, then both removed again (kube-scheduler leads as before).
# Variables: SOAK_MINUTES, SOAK_ARGS (more flags of python -m bench.soak, e.g. --nodes 40).
source "$(dirname "$0")/lib/common.sh"
source "$REPO_ROOT/hack/lib/cluster.sh"
source "$REPO_ROOT/hack/lib/kwok.sh"
PY=${PY:-$REPO_ROOT/.venv/bin/python}
cluster_exists || die "no cluster $KIND_CLUSTER: run make kind-up"
minutes=${SOAK_MINUTES:-120}
[[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] || die "SOAK_MINUTES: expected a number of minutes, got $minutes"
kwok=$("$REPO_ROOT/hack/tools/ensure-bin.sh" kwok)
kwok_stages

bash "$REPO_ROOT/hack/images/scheduler-image.sh"
bash "$REPO_ROOT/hack/kind/load.sh"
# A cluster may hold what make bench left (kwok nodes, its namespaces).
bash "$REPO_ROOT/hack/bench-clean.sh"
trap 'bash "$REPO_ROOT/hack/deploy.sh" undeploy || log "removing the deployment failed: run make undeploy"' EXIT
bash "$REPO_ROOT/hack/deploy.sh" prometheus
bash "$REPO_ROOT/hack/deploy.sh" lease
export KUBECONFIG KIND
log "soak on cluster $KIND_CLUSTER: $minutes minutes"
eval "set -- ${SOAK_ARGS:-}"
"$PY" -m bench.soak --kubeconfig "$KUBECONFIG" --kwok "$kwok" --kwok-stages "${KWOK_STAGES[@]}" \
  --image "${IMG:-dynamic-scheduler:dev}" --minutes "$minutes" "$@"
