#!/usr/bin/env bash
# Builds upstream's e2e test binary (e2e.test, the Go test binary of
# k8s.io/kubernetes/test/e2e), agnhost (the program of the tests' agnhost
# image) and ginkgo's command (runs e2e.test in parallel) at the Kubernetes release hack/tools/go.mod pins, from the module in
# this folder, into the tools cache ($E2E_BIN). Built only when missing: about
# 2 minutes on 2 cores once `make tools` has warmed Go's build cache (most of
# the packages are the tools'), much longer cold. Prints the folder of the two
# binaries.
source "$(dirname "$0")/../lib/common.sh"
source "$REPO_ROOT/hack/conformance/lib.sh"

if [[ -f $E2E_DIR/.complete ]]; then
  log "e2e.test ${KUBE_VERSION} up to date in $E2E_BIN"
  echo "$E2E_BIN"; exit 0
fi
need go "install Go 1.26 or newer (https://go.dev/doc/install)"
# The module must be hack/tools/go.mod's, so that the tests are those of the
# release the cluster runs (gen-go-mod.sh writes it).
diff -q <(grep '^replace ' "$TOOLS_MOD_DIR/go.mod") <(grep '^replace ' "$CONFORMANCE_MOD_DIR/go.mod") >/dev/null \
  && grep -q "^[[:space:]]*k8s.io/kubernetes ${KUBE_VERSION}[[:space:]]" "$CONFORMANCE_MOD_DIR/go.mod" \
  || die "hack/conformance/go.mod does not match hack/tools/go.mod (Kubernetes ${KUBE_VERSION}): run hack/conformance/gen-go-mod.sh"
mkdir -p "$CACHE_ROOT/tools"
# A lock of its own: `make tools` may run beside this (it does not touch $E2E_DIR).
exec 9>"$CACHE_ROOT/tools/.e2e.lock"
flock -n 9 || { log "another build of e2e.test is running; waiting for it"; flock 9; }
if [[ -f $E2E_DIR/.complete ]]; then
  log "e2e.test ${KUBE_VERSION} up to date in $E2E_BIN"
  echo "$E2E_BIN"; exit 0
fi
need_disk "$CACHE_ROOT" 3

# Not named *.partial: `make tools` removes those at its start.
staging=$E2E_DIR.building
rm -rf "$staging"
mkdir -p "$staging/bin"
cd "$CONFORMANCE_MOD_DIR"
# readonly: go.mod and go.sum are complete and committed; a build never edits them.
export GOFLAGS=-mod=readonly CGO_ENABLED=0

# The version stamps hack/tools/build.sh gives the Kubernetes binaries, so that
# `e2e.test --version` and the suite's log name the release. The build date is
# the release's (its .info file in the module cache).
[[ $KUBE_VERSION =~ ^v([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] || die "unexpected Kubernetes version $KUBE_VERSION"
major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
info=$(go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/^[[:space:]]*"Info": "\(.*\)",*$/\1/p')
build_date=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info" 2>/dev/null || true)
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X ${pkg}.gitVersion=${KUBE_VERSION} -X ${pkg}.gitMajor=${major} -X ${pkg}.gitMinor=${minor}"
  ldflags+=" -X ${pkg}.gitTreeState=clean${build_date:+ -X ${pkg}.buildDate=${build_date}}"
done

start=$SECONDS
log "building e2e.test for Kubernetes ${KUBE_VERSION} (about 2 min after make tools, much longer cold)"
# -vet=off: go test -c would vet the whole package first, minutes for nothing.
nice go test -c -trimpath -vet=off -ldflags "$ldflags" -o "$staging/bin/e2e.test" k8s.io/kubernetes/test/e2e \
  || die "go test -c k8s.io/kubernetes/test/e2e failed (output above)"
log "building agnhost"
nice go build -trimpath -ldflags "$ldflags" -o "$staging/bin/agnhost" k8s.io/kubernetes/test/images/agnhost \
  || die "go build of agnhost failed (output above)"
# ginkgo's command runs the specs of one selection in several processes
# (CONFORMANCE_PROCS), at the version the tests are built with.
log "building ginkgo"
nice go build -trimpath -ldflags "-s -w" -o "$staging/bin/ginkgo" github.com/onsi/ginkgo/v2/ginkgo \
  || die "go build of ginkgo failed (output above)"
"$staging/bin/e2e.test" --version >/dev/null 2>&1 || die "the e2e.test just built does not run"
touch "$staging/.complete"
rm -rf "$E2E_DIR"
mv "$staging" "$E2E_DIR"
log "e2e.test, agnhost and ginkgo built in $((SECONDS - start))s into $E2E_BIN"
echo "$E2E_BIN"
