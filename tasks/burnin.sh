#!/usr/bin/env bash
# Job: burn the node's GPUs in. Usage: burnin.sh [DURATION [WINDOW [WINDOWS_PER_RUN]]]
# Checkpoints to burnin.ckpt after every window. Every WINDOWS_PER_RUN windows (default 12, an
# hour of 5-minute windows) but the last, exits 85: HTCondor's checkpoint_exit_code saves
# burnin.ckpt and restarts the job, which resumes at the next window (an eviction loses at most
# the windows since). Writes report.json and env.json when the burn-in ends; otherwise
# gpuaccept's code.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=job-lib.sh
source "$here/job-lib.sh"

duration=${1:-24h}
window=${2:-5m}
per_run=${3:-12}
status=0
if gpuaccept_activate; then
  gpuaccept_record_env
  gpuaccept_run gpuaccept burnin --duration "$duration" --window "$window" \
    --checkpoint burnin.ckpt --checkpoint-every "$per_run" --checkpoint-exit-code 85 \
    --report-dir reports --no-history
  status=$job_status
  if [[ "$status" -eq 85 ]]; then
    exit 85 # a checkpoint, not an outcome: no report yet
  fi
  gpuaccept_take_report reports report.json
else
  status=3
  gpuaccept_record_env
fi
gpuaccept_ensure_report report.json burnin "$status"
exit "$status"
