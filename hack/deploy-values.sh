#!/usr/bin/env bash
# Writes the values overrides for this machine's images (manifests/values.yaml
# holds every other default) and prints the file's path.
source "$(dirname "$0")/lib/common.sh"
source "$REPO_ROOT/hack/lib/cluster.sh"
out=$CLUSTER_DIR/deploy-values.yaml
mkdir -p "$CLUSTER_DIR"
{
  echo "image: {name: \"${IMG:-dynamic-scheduler:dev}\"}"
  if [[ -n ${PROMETHEUS_IMAGE:-} ]]; then
    echo "prometheus: {image: {name: \"$PROMETHEUS_IMAGE\"}}"
  elif [[ $OFFLINE == 1 ]]; then
    prom=$(bash "$REPO_ROOT/hack/images/offline-images.sh" | sed -n 's/^PROMETHEUS_IMAGE=//p')
    echo "prometheus: {image: {name: \"$prom\"}, discovery: static}"
  fi
} >"$out"
echo "$out"
