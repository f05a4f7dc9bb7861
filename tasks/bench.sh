#!/usr/bin/env bash
# Job: the benchmark sweeps on one GPU. Usage: bench.sh [all|matmul|membw|transfer|nbody]
# Writes report.json and env.json; exits with gpuaccept's code.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=job-lib.sh
source "$here/job-lib.sh"

benchmark=${1:-all}
status=0
if gpuaccept_activate; then
  gpuaccept_record_env
  if [[ "$benchmark" == all ]]; then
    gpuaccept bench --json report.json --no-history || status=$?
  else
    gpuaccept bench "$benchmark" --json report.json --no-history || status=$?
  fi
else
  status=3
  gpuaccept_record_env
fi
gpuaccept_ensure_report report.json bench "$status"
exit "$status"
