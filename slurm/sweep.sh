#!/usr/bin/env bash
# Accept every node of a partition: one accept-node job per node, each pinned to its node and
# exclusive, so a bad node is named by its own report.
#
#   slurm/sweep.sh PARTITION [LEVEL] [extra sbatch options...]
#   slurm/sweep.sh gpu quick --gpus-per-node=8
#
# Prints one "NODE JOBID" line per job. Reports: results/accept-JOBID-NODE.json; then
#   gpuaccept history import results/accept-*.json && gpuaccept history fleet
set -euo pipefail
partition=${1:?usage: sweep.sh PARTITION [LEVEL] [sbatch options...]}
level=${2:-standard}
shift $(($# >= 2 ? 2 : 1))
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p results
# nodes that can take a job now (drained and down nodes are the scheduler's business)
mapfile -t nodes < <(sinfo -h -N -p "$partition" -t idle,mixed -o '%N' | sort -u)
if [[ ${#nodes[@]} -eq 0 ]]; then
  echo "sweep: no idle or mixed node in partition $partition" >&2
  exit 1
fi
for node in "${nodes[@]}"; do
  job=$(sbatch --parsable --partition="$partition" --nodelist="$node" --exclusive \
    --job-name="gpuaccept-$node" "$@" "$here/accept-node.sbatch" "$level")
  echo "$node ${job%%;*}"
done
