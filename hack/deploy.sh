#!/usr/bin/env bash
# make deploy-lease | deploy-static | deploy-shadow | prometheus | undeploy | restore: the
# `dynamic-scheduler deploy/restore` commands against the kind cluster, with
# the images this machine has: $IMG, and offline the Debian-built Prometheus
# (whose build has no Kubernetes discovery, hence discovery: static).
#   hack/deploy.sh lease|static|shadow|prometheus|restore|undeploy [extra flags...]
source "$(dirname "$0")/lib/common.sh"
source "$REPO_ROOT/hack/lib/cluster.sh"
what=${1:?usage: deploy.sh lease|static|shadow|prometheus|restore|undeploy [flags]}; shift
PY=${PY:-$REPO_ROOT/.venv/bin/python}
cluster_exists || die "no cluster $KIND_CLUSTER: run make kind-up"

values=$(bash "$REPO_ROOT/hack/deploy-values.sh")
export KIND KUBECONFIG
case $what in
  lease|prometheus|shadow) exec "$PY" -m scheduler deploy "$what" -f "$values" --kubeconfig "$KUBECONFIG" "$@" ;;
  static) exec "$PY" -m scheduler deploy static -f "$values" --kubeconfig "$KUBECONFIG" \
            --kind-cluster "$KIND_CLUSTER" --kind-bin "$KIND" "$@" ;;
  restore) exec "$PY" -m scheduler restore -f "$values" --kubeconfig "$KUBECONFIG" \
             --kind-cluster "$KIND_CLUSTER" --kind-bin "$KIND" "$@" ;;
  undeploy) exec "$PY" -m scheduler restore all -f "$values" --kubeconfig "$KUBECONFIG" \
             --kind-cluster "$KIND_CLUSTER" --kind-bin "$KIND" "$@" ;;
  *) die "unknown deploy target '$what'" ;;
esac
