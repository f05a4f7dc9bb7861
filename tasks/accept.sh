#!/usr/bin/env bash
# Job: the acceptance suite on the GPUs HTCondor assigned. Usage: accept.sh [LEVEL]
# Writes report.json and env.json; exits with gpuaccept's code (0 fit, 1 failed, 2 input, 3 env).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=job-lib.sh
source "$here/job-lib.sh"

level=${1:-standard}
status=0
if gpuaccept_activate; then
  gpuaccept_record_env
  # The GPU count to expect comes from $_CONDOR_AssignedGPUs; history stays with the submitter.
  gpuaccept_run gpuaccept accept --level "$level" --report-dir reports --no-history
  status=$job_status
  gpuaccept_take_report reports report.json
else
  status=3
  gpuaccept_record_env
fi
gpuaccept_ensure_report report.json accept "$status"
exit "$status"
