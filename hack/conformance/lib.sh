# shellcheck shell=bash
# shellcheck disable=SC2034  # settings for the scripts that source this file
# Settings shared by the conformance scripts. Source after common.sh.

CONFORMANCE_MOD_DIR=$REPO_ROOT/hack/conformance

# e2e.test and agnhost live beside the tools, keyed like tools_key: by the
# module they are built from and by the recipe, so that any change to either
# builds them again and a stale binary is never used.
e2e_key() {
  cat "$CONFORMANCE_MOD_DIR"/go.{mod,sum} "$CONFORMANCE_MOD_DIR/build.sh" | sha256sum | cut -c1-12
}
E2E_DIR=$CACHE_ROOT/tools/${KUBE_VERSION}-e2e-$(e2e_key)
E2E_BIN=$E2E_DIR/bin

# The specs a run selects, as ginkgo regular expressions over a spec's full
# text (several --ginkgo.focus are ORed, then --ginkgo.skip removes); never
# those that need a feature gate that is off by default, which the stock
# cluster does not enable (the framework tags them [Feature:OffByDefault]).
# CONFORMANCE_SUITE picks the selection:
#   scheduling (make conformance): every spec of SchedulerPredicates and
#     SchedulerPreemption, and every conformance spec of sig-scheduling
#     (LimitRange's too);
#   dra (make conformance-dra): every spec tagged [DRA]: the control plane's
#     (the scheduler, the resourceclaim controller, the API) and the kubelet's,
#     whose test driver runs inside e2e.test behind a proxy pod on each node
#     (CDI is on in the node image's containerd).
# CONFORMANCE_FOCUS (one regular expression) replaces the focus, for a quick
# look at a few specs.
CONFORMANCE_SUITE=${CONFORMANCE_SUITE:-scheduling}
case $CONFORMANCE_SUITE in
  scheduling)
    E2E_FOCUS=(
      '\[sig-scheduling\] SchedulerPredicates '
      '\[sig-scheduling\] SchedulerPreemption '
      '\[sig-scheduling\] .*\[Conformance\]'
    )
    SUITE_TITLE='[sig-scheduling]'
    # One process: most of its specs are [Serial] (preemption fills the nodes).
    SUITE_PROCS=1
    SUITE_TARGET=conformance
    SUITE_RESULTS=$REPO_ROOT/conformance/results
    ;;
  dra)
    E2E_FOCUS=('\[DRA\]')
    SUITE_TITLE='[DRA]'
    # Its specs wait on pods and drivers far more than they use the machine:
    # three processes take a third of the time ([Serial] ones still run alone).
    SUITE_PROCS=3
    SUITE_TARGET=conformance-dra
    SUITE_RESULTS=$REPO_ROOT/conformance/results/dra
    ;;
  *) die "CONFORMANCE_SUITE=$CONFORMANCE_SUITE: expected scheduling or dra" ;;
esac
# CONFORMANCE_PROCS: how many ginkgo processes run the specs (both schedulers
# get the same).
E2E_PROCS=${CONFORMANCE_PROCS:-$SUITE_PROCS}
[[ $E2E_PROCS =~ ^[1-9][0-9]?$ ]] || die "CONFORMANCE_PROCS=$E2E_PROCS: expected a number of processes from 1 to 99"
if [[ -n ${CONFORMANCE_FOCUS:-} ]]; then
  E2E_FOCUS=("$CONFORMANCE_FOCUS")
fi
E2E_SKIP='\[Feature:OffByDefault\]|\[Alpha\]'
# ginkgo's shuffle seed: every run takes the specs in the same order.
E2E_SEED=${CONFORMANCE_SEED:-1}

LEASE_NS=kube-system
LEASE_NAME=kube-scheduler
OUR_NS=crane-system
OUR_SELECTOR=app.kubernetes.io/name=dynamic-scheduler
# What our replicas write on the Lease besides the holder identity
# (scheduler/cluster/leaderelection.py, HOLDER_ANNOTATION).
OUR_HOLDER_ANNOTATION=dynamic-scheduler.io/holder
