# shellcheck shell=bash
# shellcheck disable=SC2034  # settings for the scripts that source this file
# Shared helpers for the hack/ scripts. Source it; do not run it.
# Every script fails with one line that says what is missing and what to do.

set -o errexit -o nounset -o pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE_ROOT=${DS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dynamic-scheduler}
TOOLS_MOD_DIR=$REPO_ROOT/hack/tools

log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# need CMD HINT: stop unless CMD is on PATH.
need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found: $2"; }

# need_disk DIR GIB: stop unless DIR's filesystem has GIB GiB free.
need_disk() {
  local dir=$1 gib=$2 free
  mkdir -p "$dir"
  free=$(df -Pk "$dir" | awk 'NR==2 {print int($4/1024/1024)}')
  (( free >= gib )) || die "only ${free} GiB free under $dir, ${gib} GiB needed: free some space or set DS_CACHE_DIR to a larger disk"
}

# tools_version MODULE: the version of MODULE pinned in hack/tools/go.mod
# (the replacement's version where a replace applies).
tools_version() {
  (cd "$TOOLS_MOD_DIR" && GOFLAGS=-mod=mod go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' "$1")
}

# Versions and the cache key of the tool binaries. The key changes whenever
# go.mod, go.sum or the build recipe change, so a stale cache is never used.
KUBE_VERSION=$(sed -n 's/^[[:space:]]*k8s.io\/kubernetes \(v[0-9.]*\).*/\1/p' "$TOOLS_MOD_DIR/go.mod" | head -1)
[[ -n $KUBE_VERSION ]] || die "cannot read the k8s.io/kubernetes version from hack/tools/go.mod"
tools_key() {
  local sources
  mapfile -t sources < <(find "$TOOLS_MOD_DIR" -name '*.go' | sort)
  cat "$TOOLS_MOD_DIR"/go.{mod,sum} "$TOOLS_MOD_DIR"/local-path/go.{mod,sum} "$REPO_ROOT/hack/tools/build.sh" \
    "${sources[@]}" | sha256sum | cut -c1-12
}
TOOLS_DIR=$CACHE_ROOT/tools/${KUBE_VERSION}-$(tools_key)
TOOLS_BIN=$TOOLS_DIR/bin
