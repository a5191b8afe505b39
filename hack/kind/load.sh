#!/usr/bin/env bash
# make kind-load: load the scheduler image (and, offline, the Prometheus image)
# into every node of the cluster, so pods start without a registry.
source "$(dirname "$0")/../lib/common.sh"
source "$REPO_ROOT/hack/lib/cluster.sh"
cluster_exists || die "no cluster $KIND_CLUSTER: run make kind-up"
images=("${IMG:-dynamic-scheduler:dev}")
if [[ ${OFFLINE:-0} == 1 ]]; then
  images+=("$(bash "$REPO_ROOT/hack/images/offline-images.sh" | sed -n 's/^PROMETHEUS_IMAGE=//p')")
fi
for img in "${images[@]}"; do
  docker image inspect "$img" >/dev/null 2>&1 || die "image $img not found: run make image"
done
# One call: one archive, loaded into the nodes side by side.
log "loading ${images[*]} into $KIND_CLUSTER"
"$KIND" load docker-image --name "$KIND_CLUSTER" "${images[@]}" >/dev/null \
  || die "kind load docker-image ${images[*]} failed"
