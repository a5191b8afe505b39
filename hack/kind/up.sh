#!/usr/bin/env bash
# make kind-up: a kind cluster from kind-config.yaml (1 control plane, 2 workers),
# or the existing one of the same name. Online it uses the stock kindest/node
# image of the pinned release; with OFFLINE=1 it builds and uses the offline
# node image (make node-image); KIND_NODE_IMAGE overrides both. Returns when
# every node is Ready and CoreDNS and kube-proxy run (hack/kind/ready.sh). A cluster that fails to
# come up is deleted again (its logs are exported first), unless KIND_RETAIN=1.
source "$(dirname "$0")/../lib/common.sh"
source "$REPO_ROOT/hack/lib/cluster.sh"

bash "$REPO_ROOT/hack/docker/ensure-docker.sh"

# Every kubelet, kube-proxy and containerd of every node takes inotify instances
# from the host's per-user limit (128 by default); with two or three clusters on
# one machine it runs out and kube-proxy exits with "too many open files"
# (kind's known issue). Raise it where we may, else say how.
want_inotify=512
have_inotify=$(cat /proc/sys/fs/inotify/max_user_instances 2>/dev/null || echo "$want_inotify")
if (( have_inotify < want_inotify )); then
  if sysctl -qw fs.inotify.max_user_instances=$want_inotify 2>/dev/null; then
    log "raised fs.inotify.max_user_instances from $have_inotify to $want_inotify (kind's too-many-open-files issue)"
  else
    log "warning: fs.inotify.max_user_instances is $have_inotify; with more than one cluster kube-proxy may fail with" \
        "'too many open files': sudo sysctl fs.inotify.max_user_instances=$want_inotify"
  fi
fi

if cluster_exists; then
  log "cluster $KIND_CLUSTER exists; reusing it (make kind-down to start over)"
  mkdir -p "$CLUSTER_DIR"
  "$KIND" export kubeconfig --name "$KIND_CLUSTER" --kubeconfig "$KUBECONFIG" >/dev/null 2>&1 \
    || die "cannot get the kubeconfig of cluster $KIND_CLUSTER"
else
  if [[ -n ${KIND_NODE_IMAGE:-} ]]; then
    image=$KIND_NODE_IMAGE
  elif [[ $OFFLINE == 1 ]]; then
    bash "$REPO_ROOT/hack/tools/build.sh"
    image=$(bash "$REPO_ROOT/hack/images/node-image.sh" | tail -1)
  else
    image=$KIND_STOCK_NODE_IMAGE
  fi
  need_disk /var/lib/docker 6
  mkdir -p "$CLUSTER_DIR"
  log "creating cluster $KIND_CLUSTER with $image"
  start=$SECONDS
  if ! "$KIND" create cluster --name "$KIND_CLUSTER" --image "$image" --config "$KIND_CONFIG" \
        --kubeconfig "$KUBECONFIG" --retain --wait 0s; then
    logs=$REPO_ROOT/_artifacts/kind-up-$(date +%s)
    "$KIND" export logs "$logs" --name "$KIND_CLUSTER" >/dev/null 2>&1 || true
    [[ ${KIND_RETAIN:-0} == 1 ]] || "$KIND" delete cluster --name "$KIND_CLUSTER" >/dev/null 2>&1 || true
    die "kind create cluster failed (node logs: $logs)"
  fi
  log "cluster created in $((SECONDS - start))s"
fi

# KIND_UP_WAIT=0: return once the nodes exist (make e2e loads its images meanwhile).
[[ ${KIND_UP_WAIT:-1} == 0 ]] || bash "$REPO_ROOT/hack/kind/ready.sh"
