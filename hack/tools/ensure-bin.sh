#!/usr/bin/env bash
# Prints the path of a pinned tool (kind, kubectl, ...), building just that
# one from hack/tools/go.mod when `make tools` has not built the whole set.
# Online users get kind and kubectl in a minute without the Kubernetes build
# (and make bench its kwok, kube-scheduler and rawbinder).
source "$(dirname "$0")/../lib/common.sh"
name=${1:?usage: ensure-bin.sh kind|kubectl|kwok|kwokctl|kube-scheduler|rawbinder}
if [[ -x $TOOLS_BIN/$name && -f $TOOLS_DIR/.complete ]]; then echo "$TOOLS_BIN/$name"; exit 0; fi
case $name in
  kind) pkg=sigs.k8s.io/kind ;;
  kubectl) pkg=k8s.io/kubernetes/cmd/kubectl ;;
  kwok) pkg=sigs.k8s.io/kwok/cmd/kwok ;;
  kwokctl) pkg=sigs.k8s.io/kwok/cmd/kwokctl ;;
  kube-scheduler) pkg=k8s.io/kubernetes/cmd/kube-scheduler ;;
  rawbinder) pkg=./rawbinder ;;
  *) die "ensure-bin.sh: no single-tool build for '$name': run make tools" ;;
esac
out=$CACHE_ROOT/bin/$(basename "$TOOLS_DIR")/$name
if [[ ! -x $out ]]; then
  need go "install Go 1.26 or newer to build $name (or put $name on PATH)"
  log "building $name from hack/tools/go.mod"
  mkdir -p "$(dirname "$out")"
  [[ $KUBE_VERSION =~ ^v([0-9]+)\.([0-9]+) ]]
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=${BASH_REMATCH[1]} -X k8s.io/component-base/version.gitMinor=${BASH_REMATCH[2]}"
  (cd "$TOOLS_MOD_DIR" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out.partial" "$pkg") \
    || die "go build of $name failed (output above)"
  mv "$out.partial" "$out"
fi
echo "$out"
