#!/usr/bin/env bash
# Slurm HealthCheckProgram (or Prolog): a quick acceptance of this node, and the verdict acted on
# through `gpuaccept act slurm` (docs/actions.md), which guards every drain:
# - a failing node is drained with the reason "gpuaccept quick: ACTION: CHECKS", unless the circuit
#   breaker refuses (gpuaccept drained 2% of the nodes in the last hour: exit 4, not drained, and
#   the breaker stays tripped until `gpuaccept act breaker reset --by NAME --why TEXT`), the
#   stack is a regression, or its failure is soft (recommended action: rerun, e.g. a figure
#   below its floor) and it has not failed two runs in a row yet (counted from the earlier
#   reports in $GPUACCEPT_RESULTS);
# - a node gpuaccept drained is checked at $GPUACCEPT_RESUME_LEVEL (default standard) instead,
#   and resumed when it passes; a node DOWN, FAIL, in maintenance, reserved, rebooting, or
#   drained by anyone else is never changed here.
# gpuaccept's records (the breaker's trip, held regressions) are $GPUACCEPT_ACT_STATE: set it to
# one file on shared storage for every node, so that the breaker counts the whole cluster.
#
#   slurm.conf:  HealthCheckProgram=/opt/gpuaccept/slurm/healthcheck.sh
#                HealthCheckInterval=3600
#                HealthCheckNodeState=ANY      (drained nodes too, so they can come back)
#
# slurmd runs it as root with a bare environment: gpuaccept is found through $GPUACCEPT_ACTIVATE
# or /opt/gpuaccept/activate.sh (see tasks/job-lib.sh), never in the current directory.
# GPUACCEPT_HEALTHCHECK_ARGS adds accept options (e.g. "--expect-gpus 8", or "--evidence DIR":
# the vendor archive of a failure, within the timeout: docs/actions.md); GPUACCEPT_ACT is
# act's mode: enforce (default), shadow (say what it would do, change nothing) or report;
# GPUACCEPT_ACT_ARGS adds act options (e.g. "--breaker-share 0.05 --partition gpu"). The report
# lands in $GPUACCEPT_RESULTS (default /var/lib/gpuaccept/reports) for `gpuaccept history import`.
# Exit 0: passed (resumed if gpuaccept had drained it), or not judged (a run that judged nothing,
# was interrupted, or could not start says so in the log and leaves the node as it is, as does
# a setting of this script's that is not one, refused before the run); 1:
# failed, and drained (or it says why not); 4: failed, and the breaker refused the drain.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../tasks/job-lib.sh
source "$here/../tasks/job-lib.sh"

node=${SLURMD_NODENAME:-$(hostname -s)}
# A setting that is ours to fix is not the node's fault: not judged, never drained (exit 0: a
# Prolog's non-zero exit drains the node). Checked before the run: a typo read after it would
# cost the run, and leave a failed node undrained; `timeout 0` would never end it.
not_judged() {
  echo "healthcheck: $1; $node not judged, not drained" >&2
  exit 0
}
results=${GPUACCEPT_RESULTS:-/var/lib/gpuaccept/reports}
if ! mkdir -p "$results" 2>/dev/null || [[ ! -d $results || ! -w $results ]]; then
  not_judged "GPUACCEPT_RESULTS=$results is not a directory this user can write"
fi
case ${GPUACCEPT_ACT:-enforce} in
  enforce | shadow | report) ;;
  *) not_judged "GPUACCEPT_ACT=$GPUACCEPT_ACT is not one of enforce, shadow, report" ;;
esac
case ${GPUACCEPT_RESUME_LEVEL:-standard} in
  quick | standard | full) ;;
  *) not_judged "GPUACCEPT_RESUME_LEVEL=$GPUACCEPT_RESUME_LEVEL is not one of quick, standard, full" ;;
esac
limit=${GPUACCEPT_HEALTHCHECK_TIMEOUT:-600}
if [[ ! $limit =~ ^[0-9]{1,7}(\.[0-9]+)?[smhd]?$ || $limit =~ ^0*(\.0*)?[smhd]?$ ]]; then
  not_judged "GPUACCEPT_HEALTHCHECK_TIMEOUT=$limit is not a time above zero (600, 10m, 1h)"
fi
if ! gpuaccept_activate --no-cwd; then
  echo "healthcheck: gpuaccept not found; $node not judged" >&2
  exit 0
fi
# A node gpuaccept drained is re-validated at the level that may return it to service.
level=quick
reason=$(timeout 60 sinfo -h -n "$node" -o %E 2>/dev/null | head -n 1 || true)
if [[ $reason =~ ^gpuaccept\ (quick|standard|full):\  ]]; then
  level=${GPUACCEPT_RESUME_LEVEL:-standard}
fi
# shellcheck disable=SC2086  # GPUACCEPT_HEALTHCHECK_ARGS is a list of options
output=$(timeout "$limit" gpuaccept accept --level "$level" \
  --report-dir "$results" --no-history ${GPUACCEPT_HEALTHCHECK_ARGS:-} 2>&1) && status=0 || status=$?
echo "$output"
# The verdict is the run's own, as its [RESULT] line renders it (gpuaccept/verdict.py): exit 1
# also means NOT JUDGED, which is no reason to drain.
# "[RESULT] FAILURE: inventory, health" -> "inventory, health"
failed=$(printf '%s\n' "$output" | sed -n 's/^\[RESULT\] FAILURE: //p' | tail -n 1)
report=$(printf '%s\n' "$output" | sed -n 's/^\[REPORT\] //p' | tail -n 1)
if [[ $status -ne 0 && ( $status -ne 1 || -z $failed ) ]] || [[ -z $report ]]; then
  # 1 without a FAILURE verdict: nothing was judged. 2, 3, 124: gpuaccept could not judge the
  # node (input, environment, timeout). For the operator to see in the log, not a hardware
  # verdict to act on.
  echo "healthcheck: $node not judged (gpuaccept exited $status); not drained" >&2
  exit 0
fi
# shellcheck disable=SC2086  # GPUACCEPT_ACT_ARGS is a list of options
acted=$(gpuaccept act slurm "$report" --node "$node" --act "${GPUACCEPT_ACT:-enforce}" \
  --resume-level "${GPUACCEPT_RESUME_LEVEL:-standard}" ${GPUACCEPT_ACT_ARGS:-} 2>&1) && code=0 || code=$?
echo "$acted"
case $code in
  0 | 1 | 4) ;;
  *)
    # act could not reach Slurm, or refused its input: the verdict stands, unacted on
    if [[ $status -eq 1 ]]; then
      echo "healthcheck: $node failed (gpuaccept $level: $failed) but could not be drained: $(tail -n 1 <<<"$acted")" >&2
      exit 1
    fi
    echo "healthcheck: $node passed; its state was not changed: $(tail -n 1 <<<"$acted")" >&2
    exit 0
    ;;
esac
echo "healthcheck: $(sed -n 's/^\[ACT\] //p' <<<"$acted" | tail -n 1)" >&2
exit "$code"
