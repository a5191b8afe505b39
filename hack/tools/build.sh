#!/usr/bin/env bash
# make tools: build every pinned binary of hack/tools/go.mod into the cache
# ($TOOLS_BIN, outside the checkout, keyed by versions and recipe). A second
# run with nothing changed only checks the stamp and returns.
source "$(dirname "$0")/../lib/common.sh"

if [[ -f $TOOLS_DIR/.complete ]]; then
  log "tools ${KUBE_VERSION} up to date in $TOOLS_BIN"
  exit 0
fi
mkdir -p "$CACHE_ROOT/tools"
exec 9>"$CACHE_ROOT/tools/.lock"
flock -n 9 || { log "another build of the tools is running; waiting for it"; flock 9; }
if [[ -f $TOOLS_DIR/.complete ]]; then
  log "tools ${KUBE_VERSION} up to date in $TOOLS_BIN"
  exit 0
fi
rm -rf "$CACHE_ROOT"/tools/*.partial  # left by an interrupted build

need go "install Go 1.26 or newer (https://go.dev/doc/install; on Debian the golang-go package is too old)"
gover=$(go env GOVERSION)
[[ $gover =~ ^go1\.([0-9]+) ]] && (( BASH_REMATCH[1] >= 26 )) \
  || die "$gover is too old: the pinned tools need Go 1.26 or newer"
need gcc "runc needs cgo: apt-get install gcc libseccomp-dev"
[[ -f /usr/include/seccomp.h ]] || die "libseccomp headers missing (runc needs them): apt-get install libseccomp-dev"
need_disk "$CACHE_ROOT" 6

staging="$TOOLS_DIR.partial"
rm -rf "$staging"
mkdir -p "$staging/bin"
cd "$TOOLS_MOD_DIR"
export GOFLAGS=-mod=mod

# The same version stamps upstream's hack/lib/version.sh sets, so that
# `kubectl version` and `kubeadm version` report the release and kubeadm's
# version-skew and image defaults work.
[[ $KUBE_VERSION =~ ^v([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] || die "unexpected Kubernetes version $KUBE_VERSION"
major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
build_date=$(go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/^[[:space:]]*"Time": "\(.*\)",*$/\1/p' | head -1)
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X ${pkg}.gitVersion=${KUBE_VERSION} -X ${pkg}.gitMajor=${major} -X ${pkg}.gitMinor=${minor}"
  ldflags+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=${build_date}"
done
ldflags+=" -X go.etcd.io/etcd/api/v3/version.GitSHA=$(tools_version go.etcd.io/etcd/server/v3)"
ldflags+=" -X github.com/coredns/coredns/coremain.GitCommit=$(tools_version github.com/coredns/coredns)"

mapfile -t static_tools < <(sed -n '/^tool (/,/^)/{/^\t/p}' go.mod | tr -d '\t' | grep -v '^github.com/opencontainers/runc$')
static_tools+=(./nodenet)
start=$SECONDS
log "building ${#static_tools[@]} static tools for Kubernetes ${KUBE_VERSION} (cold: 20-30 min on 2 cores)"
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$staging/bin/" "${static_tools[@]}" \
  || die "go build of the pinned tools failed (output above)"
log "building local-path-provisioner (module hack/tools/local-path)"
(cd local-path && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$staging/bin/" github.com/rancher/local-path-provisioner) \
  || die "go build of local-path-provisioner failed (output above)"
log "building runc (cgo, seccomp)"
CGO_ENABLED=1 go build -trimpath -tags seccomp -ldflags "-s -w -X main.version=$(tools_version github.com/opencontainers/runc)" \
  -o "$staging/bin/runc" github.com/opencontainers/runc \
  || die "go build of runc failed (output above)"

# etcd's main package is its module root (go.etcd.io/etcd/server/v3), which
# go build names "server".
mv "$staging/bin/server" "$staging/bin/etcd"
touch "$staging/.complete"
rm -rf "$TOOLS_DIR"
mv "$staging" "$TOOLS_DIR"
log "tools built in $((SECONDS - start))s into $TOOLS_BIN"
