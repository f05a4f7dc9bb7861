#!/usr/bin/env bash
# Slurm HealthCheckProgram (or Prolog): a quick acceptance of this node; a node that fails is
# drained with the failing checks as the reason. A node that passes is left alone (a drain set
# by an operator for another reason is never lifted here).
#
#   slurm.conf:  HealthCheckProgram=/opt/gpuaccept/slurm/healthcheck.sh
#                HealthCheckInterval=3600
#                HealthCheckNodeState=IDLE
#
# slurmd runs it as root with a bare environment: gpuaccept is found through $GPUACCEPT_ACTIVATE
# or /opt/gpuaccept/activate.sh (see tasks/job-lib.sh), never in the current directory. GPUACCEPT_HEALTHCHECK_ARGS adds accept
# options (e.g. "--expect-gpus 8"). The report lands in $GPUACCEPT_RESULTS (default
# /var/lib/gpuaccept/reports) for `gpuaccept history import`.
# Exit 0: passed, or not judged (drained only on a FAILURE verdict: a run that judged nothing,
# was interrupted, or could not start says so in the log and leaves the node as it is); 1:
# failed, and drained (or it says why the drain failed).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../tasks/job-lib.sh
source "$here/../tasks/job-lib.sh"

node=${SLURMD_NODENAME:-$(hostname -s)}
results=${GPUACCEPT_RESULTS:-/var/lib/gpuaccept/reports}
if ! mkdir -p "$results" 2>/dev/null || [[ ! -d $results || ! -w $results ]]; then
  # the results path is ours to fix, not the node's fault: not judged, never drained
  echo "healthcheck: GPUACCEPT_RESULTS=$results is not a directory this user can write; $node not judged, not drained" >&2
  exit 0
fi
if ! gpuaccept_activate --no-cwd; then
  echo "healthcheck: gpuaccept not found; $node not judged" >&2
  exit 0
fi
# shellcheck disable=SC2086  # GPUACCEPT_HEALTHCHECK_ARGS is a list of options
output=$(timeout "${GPUACCEPT_HEALTHCHECK_TIMEOUT:-600}" gpuaccept accept --level quick \
  --report-dir "$results" --no-history ${GPUACCEPT_HEALTHCHECK_ARGS:-} 2>&1) && status=0 || status=$?
echo "$output"
# The verdict is the run's own, as its [RESULT] line renders it (gpuaccept/verdict.py): exit 1
# also means NOT JUDGED, which is no reason to drain.
# "[RESULT] FAILURE: inventory, health" -> "inventory, health"
failed=$(printf '%s\n' "$output" | sed -n 's/^\[RESULT\] FAILURE: //p' | tail -n 1)
if [[ $status -ne 1 || -z $failed ]]; then
  # 0: fit. 1 without a FAILURE verdict: nothing was judged. 2, 3, 124: gpuaccept could not
  # judge the node (input, environment, timeout). For the operator to see in the log, not a
  # hardware verdict to drain on.
  [[ $status -eq 0 ]] || echo "healthcheck: $node not judged (gpuaccept exited $status); not drained" >&2
  exit 0
fi
reason="gpuaccept quick: $failed"
# bounded: a controller that cannot be reached must not hold slurmd's health check for ever
if ! timeout 60 scontrol update NodeName="$node" State=DRAIN Reason="${reason:0:200}"; then
  echo "healthcheck: $node failed ($reason) but could not be drained: scontrol failed or took over 60 s" >&2
  exit 1
fi
echo "healthcheck: drained $node: $reason" >&2
exit 1
