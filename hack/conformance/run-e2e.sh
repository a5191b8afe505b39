#!/usr/bin/env bash
# One run of the selected e2e specs (hack/conformance/lib.sh) against the
# cluster, with whichever scheduler holds the Lease: ginkgo's verbose output in
# DIR/e2e.log, its JUnit report in DIR/junit_01.xml, and DIR/started, seconds
# and exit-code for the report. A progress line on stderr whenever a spec
# finishes. Exits with e2e.test's code: 1 when specs failed (the report tells
# which), and anything else when the suite itself could not run (2: no JUnit
# report, 3: the suite's set-up failed).
#   hack/conformance/run-e2e.sh NAME DIR
source "$(dirname "$0")/../lib/common.sh"
source "$REPO_ROOT/hack/lib/cluster.sh"
source "$REPO_ROOT/hack/conformance/lib.sh"
name=${1:?usage: run-e2e.sh NAME DIR}
dir=${2:?usage: run-e2e.sh NAME DIR}
[[ -f $E2E_DIR/.complete ]] || die "e2e.test is not built: run hack/conformance/build.sh"
mkdir -p "$dir"
out=$dir/e2e.log

framework=(
  --kubeconfig="$KUBECONFIG" --provider=skeleton --kubectl-path="$KUBECTL"
  --report-dir="$dir" --e2e-output-dir="$dir"
)
ginkgo=(
  # The same order in both runs (the framework shuffles the specs), so that
  # each scheduler meets the cluster in the same states.
  --seed="$E2E_SEED"
  --skip="$E2E_SKIP"
  # Longer than any run can take: a run that fails every preemption spec waits
  # out each one's timeouts (ginkgo's default for the whole suite is 1 h).
  --timeout=3h
  -v --no-color --silence-skips
)
for f in "${E2E_FOCUS[@]}"; do ginkgo+=(--focus="$f"); done

date -u +%Y-%m-%dT%H:%M:%SZ >"$dir/started"
start=$SECONDS
if (( E2E_PROCS > 1 )); then
  [[ -x $E2E_BIN/ginkgo ]] || die "ginkgo is not built: run hack/conformance/build.sh"
  "$E2E_BIN/ginkgo" --procs="$E2E_PROCS" "${ginkgo[@]}" "$E2E_BIN/e2e.test" -- "${framework[@]}" >"$out" 2>&1 &
else
  # e2e.test itself takes ginkgo's settings as --ginkgo.<name>.
  for a in "${ginkgo[@]}"; do a=${a#-}; framework+=("--ginkgo.${a#-}"); done
  "$E2E_BIN/e2e.test" "${framework[@]}" >"$out" 2>&1 &
fi
pid=$!
# An interrupted harness stops its e2e.test too.
trap 'kill "$pid" 2>/dev/null || true' EXIT

# finished: one line per spec that ran, "<ginkgo's end line><TAB><spec text>".
# A spec ends with "• [<seconds> seconds]", "• [FAILED] [...]" (or TIMEDOUT,
# PANICKED, ...), or "S [SKIPPED] [...]" for a spec that skipped itself. In one
# process, ginkgo -v prints a spec's text (and labels) on the line after a
# delimiter as it starts and that end line as it ends; in several, the end
# line first, then the text, once the spec is over. The labels' suffix,
# "[sig-scheduling, Serial, ...]", is dropped.
finished() {
  awk -v parallel=$(( E2E_PROCS > 1 )) '
    /^(•|S \[SKIPPED\]) .*seconds\]$/ { end = $0; if (!parallel) print end "\t" name; next }
    /^\[sig-/ { name = $0; sub(/ \[sig-[^]]*\]$/, "", name); if (parallel && end != "") { print end "\t" name; end = "" } }' "$out"
}
seen=0
while kill -0 "$pid" 2>/dev/null; do
  sleep 5
  total=$(sed -n 's/^Will run \([0-9]*\) of [0-9]* specs$/\1/p' "$out" | head -1)
  n=0
  while IFS=$'\t' read -r end text; do
    n=$((n + 1))
    (( n > seen )) || continue
    case $end in
      "• ["[0-9]*) state=passed ;;
      "S "*) state=skipped ;;
      *) state=$(sed 's/^• \[\([A-Z]*\)\].*/\1/' <<<"$end" | tr '[:upper:]' '[:lower:]') ;;
    esac
    secs=$(sed 's/.*\[\([0-9.]*\) seconds\]$/\1/' <<<"$end")
    log "$name: [$n/${total:-?}] $state in ${secs%.*}s: ${text#\[sig-scheduling\] }"
  done < <(finished)
  seen=$n
done
rc=0
wait "$pid" || rc=$?
trap - EXIT
echo "$((SECONDS - start))" >"$dir/seconds"
echo "$rc" >"$dir/exit-code"
summary=$(grep -E '^(Ran [0-9]+ of [0-9]+ Specs|(SUCCESS|FAIL)! -- )' "$out" | tr '\n' ' ')
log "$name: e2e.test exited $rc after $(( (SECONDS - start) / 60 )) min: ${summary:-no summary (see $out)}"
if [[ ! -s $dir/junit_01.xml ]]; then
  tail -15 "$out" >&2
  log "$name: e2e.test wrote no JUnit report"
  (( rc > 1 )) || rc=2
elif grep -Eq 'name="\[(Synchronized)?BeforeSuite\]"[^>]* status="(failed|timedout|panicked|interrupted|aborted)"' "$dir/junit_01.xml"; then
  # ginkgo exits 1 for this too, but then no spec ran as it should.
  log "$name: the suite's set-up failed (see its [SynchronizedBeforeSuite] in $out)"
  rc=3
fi
exit "$rc"
