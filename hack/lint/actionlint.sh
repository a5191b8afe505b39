#!/usr/bin/env bash
# Prints the path of actionlint (make lint checks .github/workflows with it), building it
# first from the pinned module hack/lint/go.mod when this version is not in the cache.
source "$(dirname "$0")/../lib/common.sh"
mod=$REPO_ROOT/hack/lint
key=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-12)
out=$CACHE_ROOT/lint/$key/actionlint
if [[ ! -x $out ]]; then
  need go "install Go 1.26 or newer to build actionlint (or put actionlint on PATH)"
  log "building actionlint from hack/lint/go.mod"
  mkdir -p "$(dirname "$out")"
  (cd "$mod" && CGO_ENABLED=0 go build -trimpath -o "$out.partial" github.com/rhysd/actionlint/cmd/actionlint) \
    || die "go build of actionlint failed (output above)"
  mv "$out.partial" "$out"
fi
echo "$out"
