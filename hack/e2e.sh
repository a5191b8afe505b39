#!/usr/bin/env bash
# make e2e: cluster up (or reused with KEEP_CLUSTER=1), image built and loaded,
# the e2e suites (pytest e2e/ $E2E_ARGS), cluster down. On failure the suites
# export the node logs and the scheduler's logs to _artifacts/.
source "$(dirname "$0")/lib/common.sh"
source "$REPO_ROOT/hack/lib/cluster.sh"
start=$SECONDS
# The image builds while the cluster comes up (both mostly wait on docker); its
# output is shown once the nodes exist, so the two logs don't interleave.
image_log=$(mktemp)
bash "$REPO_ROOT/hack/images/scheduler-image.sh" >"$image_log" 2>&1 &
image_pid=$!
# The nodes' readiness is waited for while the images load (hack/kind/ready.sh).
if ! KIND_UP_WAIT=0 bash "$REPO_ROOT/hack/kind/up.sh"; then
  kill "$image_pid" 2>/dev/null || true
  wait "$image_pid" 2>/dev/null || true
  rm -f "$image_log"
  die "the cluster did not come up (see above)"
fi
teardown() {
  if [[ ${KEEP_CLUSTER:-0} != 1 ]]; then bash "$REPO_ROOT/hack/kind/down.sh"; fi
  log "e2e wall time: $((SECONDS - start))s"
}
trap teardown EXIT
image_ok=1
wait "$image_pid" || image_ok=0
cat "$image_log" >&2
rm -f "$image_log"
(( image_ok )) || die "building the scheduler image failed (see above)"
bash "$REPO_ROOT/hack/kind/load.sh" &
load_pid=$!
if ! bash "$REPO_ROOT/hack/kind/ready.sh"; then
  kill "$load_pid" 2>/dev/null || true
  wait "$load_pid" 2>/dev/null || true
  die "the cluster did not become ready (see above)"
fi
wait "$load_pid" || die "loading the images into the cluster failed (see above)"
# A reused cluster may hold what make bench left (kwok nodes, its namespaces).
bash "$REPO_ROOT/hack/bench-clean.sh"
export KIND KUBECTL KUBECONFIG KIND_CLUSTER
DS_DEPLOY_VALUES=$(bash "$REPO_ROOT/hack/deploy-values.sh")
export DS_DEPLOY_VALUES
# E2E_ARGS is split as the shell would (quotes kept): E2E_ARGS='-k "lease or static"'.
eval "set -- ${E2E_ARGS:-}"
# Every suite but the fault suites (make e2e-faults: they add about 12 minutes) unless
# E2E_ARGS names test files (E2E_ARGS=e2e/test_static.py).
paths=(e2e --ignore=e2e/test_faults.py --ignore=e2e/test_faults_prometheus.py)
for a in "$@"; do [[ $a == e2e/* ]] && paths=(); done
# --durations: the slowest steps, so a slow suite shows in every log.
"$REPO_ROOT/.venv/bin/python" -m pytest "${paths[@]}" -p no:cacheprovider --durations=15 "$@"
