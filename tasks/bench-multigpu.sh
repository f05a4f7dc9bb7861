#!/usr/bin/env bash
# Job: collectives across every assigned GPU, then the DDP smoke. Usage: bench-multigpu.sh
# Writes report.json (collectives), ddp.json and env.json; exits with the worse of the two codes.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=job-lib.sh
source "$here/job-lib.sh"

status=0
ddp_status=0
if gpuaccept_activate; then
  gpuaccept_record_env
  # One rank per visible GPU, NCCL; nccl-tests style table in the output file.
  gpuaccept bench collectives --json report.json --no-history || status=$?
  gpuaccept accept --level standard --only ddp --report-dir ddp-reports --no-history ||
    ddp_status=$?
  gpuaccept_take_report ddp-reports ddp.json
else
  status=3
  ddp_status=3
  gpuaccept_record_env
fi
gpuaccept_ensure_report report.json "bench collectives" "$status"
gpuaccept_ensure_report ddp.json "accept --only ddp" "$ddp_status"
exit $((status > ddp_status ? status : ddp_status))
