#!/usr/bin/env bash
# Job: train MNIST with self-checkpointing. Usage: train-mnist.sh [DATA [EPOCHS [TARGET]]]
# Exit 85 after each checkpoint but the last (HTCondor's checkpoint_exit_code: it saves
# mnist.ckpt and restarts the job, which resumes); otherwise gpuaccept's code. Writes report.json,
# env.json and, when training finished, mnist_cnn.pt.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=job-lib.sh
source "$here/job-lib.sh"

data=${1:-MNIST_data.tar.gz}
epochs=${2:-20}
target=${3:-0.99}
status=0
if gpuaccept_activate; then
  gpuaccept_record_env
  gpuaccept train mnist --data "$data" --epochs "$epochs" --target-accuracy "$target" \
    --save-model mnist_cnn.pt --checkpoint mnist.ckpt --checkpoint-every 1 \
    --checkpoint-exit-code 85 --report-dir reports --no-history || status=$?
  if [[ "$status" -eq 85 ]]; then
    exit 85 # a checkpoint, not an outcome: no report yet
  fi
  gpuaccept_take_report reports report.json
else
  status=3
  gpuaccept_record_env
fi
gpuaccept_ensure_report report.json "train mnist" "$status"
exit "$status"
