#!/usr/bin/env bash
# Slurm Prolog: `gpuaccept preflight` on each node of a job before it starts (docs/preflight-and-
# sweep.md). A failing node is drained through `act slurm`'s guards with gpuaccept's own reason
# ("gpuaccept quick: ACTION: CHECKS [stack ...]") and the job is requeued, not held; a passing node
# lets the job start.
#
#   slurm.conf:  Prolog=/opt/gpuaccept/slurm/preflight-prolog.sh
#                PrologFlags=Alloc       (run at allocation, before the batch script: slurm.conf(5))
#                PrologTimeout=120       (past it Slurm drains the node and requeues the job)
#
# Exit 0 (the job goes on, or gpuaccept requeued it itself): passed; not judged (a setting of
# this script's that is not one, gpuaccept not found or refusing its input: said in slurmd's
# log, the node left as it is); failed with the node drained, or left in service by a guard,
# and the job requeued. Exit 1: failed and the job could not be requeued by gpuaccept: Slurm's
# own Prolog failure then drains the node (keeping gpuaccept's reason where it drained it
# already) and requeues the job held (SchedMD/slurm doc/man/man5/slurm.conf.5:3717-3720).
#
# slurmd runs it as root with a bare environment: gpuaccept is found through $GPUACCEPT_ACTIVATE
# or /opt/gpuaccept/activate.sh (tasks/job-lib.sh), never in the current directory. Settings:
# GPUACCEPT_PREFLIGHT_ARGS adds preflight options ("--budget 20 --expect-gpus 8 --gang");
# GPUACCEPT_ACT is the mode (enforce, the default; shadow: say, change nothing; report);
# GPUACCEPT_ACT_ARGS adds the guards' options (e.g. "--breaker-share 0.05 --partition gpu");
# GPUACCEPT_ACT_STATE is the guards' records (one file on shared storage for the whole cluster);
# reports land in $GPUACCEPT_RESULTS/preflight (default /var/lib/gpuaccept/reports/preflight).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../tasks/job-lib.sh
source "$here/../tasks/job-lib.sh"

node=${SLURMD_NODENAME:-$(hostname -s)}
job=${SLURM_JOB_ID:-}
not_judged() {
  echo "preflight: $1; $node not judged, job ${job:-?} goes on" >&2
  exit 0
}
[[ $job =~ ^[0-9]+$ ]] || not_judged "SLURM_JOB_ID=${job} is not a job id (not run as a Prolog?)"
results=${GPUACCEPT_RESULTS:-/var/lib/gpuaccept/reports}/preflight
if ! mkdir -p "$results" 2>/dev/null || [[ ! -d $results || ! -w $results ]]; then
  not_judged "$results is not a directory this user can write"
fi
case ${GPUACCEPT_ACT:-enforce} in
  enforce | shadow | report) ;;
  *) not_judged "GPUACCEPT_ACT=$GPUACCEPT_ACT is not one of enforce, shadow, report" ;;
esac
if ! gpuaccept_activate --no-cwd; then
  not_judged "gpuaccept not found"
fi
# The budget bounds the checks; the drain and the requeue are bounded by act's own timeouts
# (60 s a call): `timeout` is the last word should anything still hang.
# shellcheck disable=SC2086  # the *_ARGS are lists of options
timeout 300 gpuaccept preflight --act "${GPUACCEPT_ACT:-enforce}" --node "$node" --job "$job" \
  --report-dir "$results" ${GPUACCEPT_PREFLIGHT_ARGS:-} ${GPUACCEPT_ACT_ARGS:-} && status=0 || status=$?
case $status in
  0) exit 0 ;;
  1) exit 1 ;; # failed, the job not requeued by gpuaccept: Slurm's own path keeps it off
  *)
    # 2 input, 3 environment, 124 timeout, 130/143 a signal: gpuaccept could not judge the node;
    # for the operator to read in slurmd's log, not a hardware verdict to drain on
    not_judged "gpuaccept preflight exited $status"
    ;;
esac
