#!/usr/bin/env bash
# Slurm job step: the acceptance suite on the GPUs Slurm gave this node. Usage: slurm-accept.sh [LEVEL]
# The report goes to $GPUACCEPT_RESULTS (default results/) as accept-JOBID-NODE.json, whatever
# happens (a job that could not run leaves a report saying why). Exit: gpuaccept's code.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=job-lib.sh
source "$here/job-lib.sh"

level=${1:-standard}
gpuaccept_slurm_paths
report=$slurm_report
work=$slurm_work
status=0
if gpuaccept_activate; then
  # The GPU count to expect comes from $SLURM_GPUS_ON_NODE; history is imported from results/.
  gpuaccept_run gpuaccept accept --level "$level" --report-dir "$work" --no-history
  status=$job_status
  gpuaccept_take_report "$work" "$report"
else
  status=3
fi
gpuaccept_ensure_report "$report" accept "$status"
exit "$status"
