#!/usr/bin/env bash
# make conformance: upstream Kubernetes' own [sig-scheduling] e2e specs (the
# selection is in hack/conformance/lib.sh) on the kind cluster, once with ours
# as default-scheduler (the lease method) and once with kube-scheduler, and
# the comparison table in conformance/results/latest.{md,json}.
#
# The cluster comes up (or is reused with KEEP_CLUSTER=1, which also keeps it
# afterwards); offline (OFFLINE=1) the test images are built and loaded first.
# Ours runs first, then `restore` gives scheduling back and kube-scheduler
# runs: that way the restore is exercised on every run, and kube-scheduler's
# results after it show it really is the scheduler again; the cluster is left
# as it was found. (kube-scheduler first would leave ours deployed at the end
# and the restore proven by nothing.) Before and after each run the Lease
# holder is checked (hack/conformance/lease.sh): a run under the wrong
# scheduler is an error, never a result. Failing specs are results; anything
# else that fails is one `error:` line and exit code 1. The ginkgo output,
# JUnit reports and both schedulers' logs stay in _artifacts/conformance-<time>/.
source "$(dirname "$0")/../lib/common.sh"
source "$REPO_ROOT/hack/lib/cluster.sh"
source "$REPO_ROOT/hack/conformance/lib.sh"
PY=${PY:-$REPO_ROOT/.venv/bin/python}
[[ -x $PY ]] || die "$PY not found: run make venv"
docker info >/dev/null 2>&1 || die "docker is not running: run make docker"

start=$SECONDS
stamp=$(date -u +%Y%m%dT%H%M%SZ)
art=${ARTIFACTS:-$REPO_ROOT/_artifacts}/conformance-$stamp
# A partial selection (CONFORMANCE_FOCUS) is not the table the README shows.
results=${CONFORMANCE_RESULTS:-$([[ -n ${CONFORMANCE_FOCUS:-} ]] && echo "$art" || echo "$SUITE_RESULTS")}
mkdir -p "$art"
timings=()
# step N TEXT: a progress line; timed LABEL CMD...: runs CMD, notes its wall time.
step() { log "[$1/7] $2"; }
timed() {
  local label=$1 t0=$SECONDS; shift
  "$@"
  timings+=("${label}=$((SECONDS - t0))")
  log "$label: $((SECONDS - t0))s"
}
# run_logged CMD...: a deploy command, its output on stderr and in commands.log.
run_logged() { "$@" 2>&1 | tee -a "$art/commands.log" >&2; }

# run_with NAME: the Lease checked, one run into $art/NAME, the Lease checked
# again. e2e.test's exit code 1 means failed specs, which are results.
run_with() {
  local name=$1 rc=0 t0=$SECONDS
  mkdir -p "$art/$name"
  bash "$CONFORMANCE_MOD_DIR/lease.sh" "$name" before >"$art/$name/holder"
  bash "$CONFORMANCE_MOD_DIR/run-e2e.sh" "$name" "$art/$name" || rc=$?
  timings+=("run_$name=$((SECONDS - t0))")
  (( rc == 0 || rc == 1 )) || die "$name: e2e.test could not run the specs (exit $rc; $art/$name/e2e.log)"
  bash "$CONFORMANCE_MOD_DIR/lease.sh" "$name" after >"$art/$name/holder-after" 2>"$art/$name/holder-after.log" \
    || die "the run with $name does not count, the Lease changed hands: $(sed -n 's/^error: //p' "$art/$name/holder-after.log")"
}

# kube-scheduler exits whenever it loses its Lease; the kubelet waits longer
# before each restart (up to 5 minutes) and a restore would wait that out. A
# kubelet restart ends the back-off (README, Troubleshooting), as the e2e
# suites do before each restore.
end_kube_scheduler_backoff() {
  local reason node
  read -r node reason < <(kubectl -n kube-system get pods -l component=kube-scheduler \
    -o jsonpath='{.items[0].spec.nodeName} {.items[0].status.containerStatuses[0].state.waiting.reason}') || true
  [[ ${reason:-} == CrashLoopBackOff ]] || return 0
  log "kube-scheduler waits out a CrashLoopBackOff: restarting the kubelet on $node"
  echo "--- $(date -u +%H:%M:%S) kube-scheduler in CrashLoopBackOff: kubelet restarted on $node" >>"$art/commands.log"
  docker exec "$node" systemctl restart kubelet
  kubectl -n kube-system wait --for=condition=Ready pod -l component=kube-scheduler --timeout=120s >/dev/null \
    || die "kube-scheduler did not become Ready after the kubelet's restart on $node"
}

# save_logs NAME NAMESPACE SELECTOR: every container's log (and the previous
# one's, after a restart) of those pods, into $art/NAME/logs/.
save_logs() {
  local name=$1 ns=$2 selector=$3 pod
  mkdir -p "$art/$name/logs"
  for pod in $(kubectl -n "$ns" get pods -l "$selector" -o jsonpath='{.items[*].metadata.name}'); do
    kubectl -n "$ns" logs "$pod" --all-containers --timestamps >"$art/$name/logs/$pod.log" 2>&1 || true
    kubectl -n "$ns" logs "$pod" --all-containers --timestamps --previous >"$art/$name/logs/$pod.previous.log" 2>/dev/null \
      || rm -f "$art/$name/logs/$pod.previous.log"
  done
}

cluster_up=0
teardown() {
  local rc=$?
  if (( cluster_up )); then
    # A harness that stopped part-way keeps what the schedulers logged.
    if (( rc != 0 )); then
      save_logs ours-at-exit "$OUR_NS" "$OUR_SELECTOR" 2>/dev/null || true
      save_logs kube-scheduler-at-exit kube-system component=kube-scheduler 2>/dev/null || true
    fi
    "$KIND" export logs "$art/kind-logs" --name "$KIND_CLUSTER" >/dev/null 2>&1 || true
    if [[ ${KEEP_CLUSTER:-0} != 1 ]]; then bash "$REPO_ROOT/hack/kind/down.sh"; fi
  fi
  log "conformance wall time: $((SECONDS - start))s (artifacts: $art)"
  exit "$rc"
}
trap teardown EXIT

step 1 "tools and e2e.test"
if [[ $OFFLINE == 1 ]]; then timed tools bash "$REPO_ROOT/hack/tools/build.sh"; fi
timed e2e_test_build bash "$CONFORMANCE_MOD_DIR/build.sh" >/dev/null

step 2 "images"
e2e_images=()
if [[ $OFFLINE == 1 ]]; then
  timed e2e_images bash "$CONFORMANCE_MOD_DIR/images.sh" >"$art/e2e-images.txt"
  mapfile -t e2e_images <"$art/e2e-images.txt"
fi
# The commit the scheduler image is built from: the results are that code's (taken
# now, as the tree may change while the specs run).
commit=$(git -C "$REPO_ROOT" describe --always --dirty 2>/dev/null || echo unknown)
timed scheduler_image bash "$REPO_ROOT/hack/images/scheduler-image.sh"

step 3 "cluster $KIND_CLUSTER"
cluster_up=1
timed kind_up env KIND_UP_WAIT=0 bash "$REPO_ROOT/hack/kind/up.sh"
t0=$SECONDS
bash "$REPO_ROOT/hack/kind/load.sh"
if (( ${#e2e_images[@]} )); then
  log "loading ${e2e_images[*]} into $KIND_CLUSTER"
  "$KIND" load docker-image --name "$KIND_CLUSTER" "${e2e_images[@]}" >"$art/kind-load.log" 2>&1 \
    || { tail -5 "$art/kind-load.log" >&2; die "kind load docker-image ${e2e_images[*]} failed"; }
  # Offline, a spec whose image is missing on a node would fail for that
  # alone: check every node holds every image the specs run, pause included.
  "$E2E_BIN/e2e.test" --list-images 2>/dev/null | grep '/pause:' >"$art/pause-images.txt" \
    || die "e2e.test --list-images names no pause image"
  mapfile -t needed < <(cat "$art/e2e-images.txt" "$art/pause-images.txt")
  for node in $("$KIND" get nodes --name "$KIND_CLUSTER"); do
    have=$(docker exec "$node" ctr -n k8s.io images ls -q 2>/dev/null)
    for img in "${needed[@]}"; do
      grep -qxF "$img" <<<"$have" || die "$img is not on node $node (offline, its pods could not start)"
    done
  done
fi
bash "$REPO_ROOT/hack/kind/ready.sh"
timings+=("load_and_ready=$((SECONDS - t0))")
node_image=$(docker inspect -f '{{.Config.Image}}' "${KIND_CLUSTER}-control-plane" 2>/dev/null || echo unknown)

step 4 "ours as default-scheduler (lease method)"
timed deploy_lease run_logged bash "$REPO_ROOT/hack/deploy.sh" lease

step 5 "the specs with ours"
run_with ours
save_logs ours "$OUR_NS" "$OUR_SELECTOR"

step 6 "kube-scheduler back, the specs with kube-scheduler"
end_kube_scheduler_backoff
timed restore run_logged bash "$REPO_ROOT/hack/deploy.sh" restore
run_with kube-scheduler
save_logs kube-scheduler kube-system component=kube-scheduler

step 7 "report"
focus_args=()
for f in "${E2E_FOCUS[@]}"; do focus_args+=(--focus "$f"); done
context=(kubernetes="$KUBE_VERSION" cluster="$KIND_CLUSTER" node_image="$node_image" offline="$OFFLINE" commit="$commit"
  date="$(date -u +%Y-%m-%d)" seed="$E2E_SEED" artifacts="${art#"$REPO_ROOT"/}")
"$PY" "$CONFORMANCE_MOD_DIR/report.py" --out "$results" "${focus_args[@]}" --skip "$E2E_SKIP" \
  --title "$SUITE_TITLE" --target "$SUITE_TARGET" \
  --run ours="$art/ours" --run kube-scheduler="$art/kube-scheduler" \
  --environment "$CONFORMANCE_MOD_DIR/environment.tsv" \
  "${context[@]/#/--context=}" "${timings[@]/#/--timing=}" || exit 1  # report.py says why, on one error: line
cp "$results/latest.json" "$results/latest.md" "$art/" 2>/dev/null || true
log "results: $results/latest.md"
grep -E '^- (ours|kube-scheduler):' "$results/latest.md" >&2 || true
