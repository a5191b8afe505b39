#!/usr/bin/env bash
# Checks that the expected scheduler leads, before (and after) a run: that the
# Lease kube-system/kube-scheduler is held, renewed within its leaseDuration,
# by one of ours (the lease method's pod, whose writes carry our holder
# annotation) or by kube-scheduler (the kube-scheduler static pod's node, no
# annotation of ours). Before a run it waits up to 90 s for that, and for ours
# until the holder logs that it schedules (a takeover schedules only after its
# safe wait); after a run it waits 10 s at most (a renewal late on a busy
# machine). Prints the holder identity; a Lease held by anyone else is an
# error: the run would not test, or did not test, the scheduler it is
# reported for.
#   hack/conformance/lease.sh ours|kube-scheduler before|after
source "$(dirname "$0")/../lib/common.sh"
source "$REPO_ROOT/hack/lib/cluster.sh"
source "$REPO_ROOT/hack/conformance/lib.sh"
want=${1:?usage: lease.sh ours|kube-scheduler before|after}
when=${2:?usage: lease.sh ours|kube-scheduler before|after}
[[ $want == ours || $want == kube-scheduler ]] || die "lease.sh: unknown scheduler '$want'"
case $when in
  before) timeout=90 ;;
  after) timeout=10 ;;
  *) die "lease.sh: expected before or after, not '$when'" ;;
esac

# holder_of: "<class> <identity>" of the Lease now, class ours, kube-scheduler,
# expired, nobody or other.
holder_of() {
  local fields identity ann renew duration host ours ks_nodes
  fields=$(kubectl -n "$LEASE_NS" get lease "$LEASE_NAME" -o jsonpath="{.spec.holderIdentity}{'|'}{.metadata.annotations.${OUR_HOLDER_ANNOTATION//./\\.}}{'|'}{.spec.renewTime}{'|'}{.spec.leaseDurationSeconds}") \
    || { echo "nobody -"; return; }
  IFS='|' read -r identity ann renew duration <<<"$fields"
  [[ -n $identity ]] || { echo "nobody -"; return; }
  if [[ -z $renew ]] || (( $(date -u +%s) - $(date -u -d "$renew" +%s) > ${duration:-15} )); then
    echo "expired $identity"; return
  fi
  host=${identity%_*}  # client-go's identity is <hostname>_<uuid>
  if [[ $ann == "$identity" ]]; then
    ours=$(kubectl -n "$OUR_NS" get pods -l "$OUR_SELECTOR" -o jsonpath='{.items[*].metadata.name}')
    [[ " $ours " == *" $host "* ]] && { echo "ours $identity"; return; }
  else
    ks_nodes=$(kubectl -n kube-system get pods -l component=kube-scheduler -o jsonpath='{.items[*].spec.nodeName}')
    [[ " $ks_nodes " == *" $host "* ]] && { echo "kube-scheduler $identity"; return; }
  fi
  echo "other $identity"
}

deadline=$((SECONDS + timeout))
while :; do
  read -r class identity < <(holder_of)
  [[ $class == "$want" ]] && break
  (( SECONDS < deadline )) || die "Lease $LEASE_NS/$LEASE_NAME is held by $identity ($class), not by $want ($when the run, waited ${timeout}s)"
  sleep 2
done
if [[ $want == ours && $when == before ]]; then
  pod=${identity%_*}
  # Not grep -q: an early exit would fail the pipeline (pipefail) on a long log.
  until kubectl -n "$OUR_NS" logs "$pod" 2>/dev/null | grep -F 'Started leading; scheduling' >/dev/null; do
    (( SECONDS < deadline )) || die "ours holds the Lease ($identity) but $OUR_NS/$pod has not started scheduling after ${timeout}s"
    sleep 2
  done
fi
log "Lease $LEASE_NS/$LEASE_NAME is held by $want: $identity"
echo "$identity"
