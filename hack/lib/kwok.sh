# shellcheck shell=bash
# kwok's own Stages of the pinned release (what kwokctl loads): nodes Ready with
# Lease heartbeats, pods Running once bound, deleted pods gone. Sets the array
# KWOK_STAGES; needs common.sh (TOOLS_MOD_DIR, die) and make tools.
kwok_stages() {
  local dir
  dir=$(cd "$TOOLS_MOD_DIR" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' sigs.k8s.io/kwok) \
    || die "cannot find the kwok module source: run make tools"
  KWOK_STAGES=("$dir"/kustomize/stage/node/fast/node-initialize.yaml
               "$dir"/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
               "$dir"/kustomize/stage/pod/fast/pod-ready.yaml
               "$dir"/kustomize/stage/pod/fast/pod-delete.yaml)
  local f
  for f in "${KWOK_STAGES[@]}"; do [[ -f $f ]] || die "kwok Stage file missing: $f"; done
}
