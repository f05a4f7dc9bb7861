#!/usr/bin/env bash
# Slurm job step: burn in the GPUs Slurm gave this node. Usage: slurm-burnin.sh [DURATION [WINDOW]]
# Progress is checkpointed after every window to $GPUACCEPT_RESULTS (default results/) as
# burnin-JOBID-NODE.ckpt: a preempted and requeued job (same job id) resumes at the next window.
# The report goes beside it as burnin-JOBID-NODE.json, whatever happens (a preemption leaves an
# INTERRUPTED report, replaced when the requeued job ends). Exit: gpuaccept's code.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=job-lib.sh
source "$here/job-lib.sh"

duration=${1:-24h}
window=${2:-5m}
gpuaccept_slurm_paths burnin
report=$slurm_report
work=$slurm_work
status=0
if gpuaccept_activate; then
  gpuaccept_run gpuaccept burnin --duration "$duration" --window "$window" \
    --checkpoint "$slurm_stem.ckpt" --report-dir "$work" --no-history
  status=$job_status
  gpuaccept_take_report "$work" "$report"
else
  status=3
fi
gpuaccept_ensure_report "$report" burnin "$status"
exit "$status"
