#!/usr/bin/env bash
# Slurm job step, one per node: torchrun starts this node's ranks (one per GPU) and they meet the
# other nodes' at $GPUACCEPT_RDZV_ENDPOINT (c10d). Usage: slurm-multinode.sh [LEVEL]
# Each node's report goes to $GPUACCEPT_RESULTS (default results/) as accept-JOBID-NODE.json.
# GPUACCEPT_NPROC: ranks per node (default: the GPUs Slurm gave, else 2 CPU twins);
# GPUACCEPT_PAIRWISE=1 adds the pair-wise all-reduce that names a slow node.
# GPUACCEPT_ISOLATE_MIN_BUSBW=GBPS adds --isolate --min-busbw GBPS: the bad nodes found in
# O(log N) rounds, each group of nodes held to that floor; GPUACCEPT_TOPOLOGY=FILE guides it
# along the switches (`NODE SWITCH` lines, or `scontrol show topology > FILE`).
# GPUACCEPT_MIN_ALLGATHER_BUSBW=GBPS, GPUACCEPT_MIN_ALLTOALL_BUSBW=GBPS add --min-allgather-busbw
# and --min-alltoall-busbw: all-gather and all-to-all held to those floors across nodes (and in
# every isolation round), as the all-reduce is to GPUACCEPT_ISOLATE_MIN_BUSBW's.
# GPUACCEPT_RAILS=1 adds --rails: every rail (local rank k of every node) at once, the
# inter-node network alone; a rail below the rails' best fails.
# GPUACCEPT_LOCAL_ADDR: the address the other nodes reach this one at (torchrun --local-addr),
# where the hostname resolves to the wrong network or not at all; default: torchrun's lookup.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=job-lib.sh
source "$here/job-lib.sh"

level=${1:-standard}
gpuaccept_slurm_paths
report=$slurm_report
work=$slurm_work
nproc=${GPUACCEPT_NPROC:-${SLURM_GPUS_ON_NODE:-2}}
if ! [[ $nproc =~ ^[1-9][0-9]{0,3}$ ]]; then
  # torchrun would stop on it with a traceback after the rendezvous; one line, before anything
  echo "slurm-multinode.sh: error: GPUACCEPT_NPROC=$nproc: expected the processes per node, 1 to 9999" >&2
  exit 2
fi
extra=()
case "${GPUACCEPT_PAIRWISE:-0}" in
  0) ;;
  1) extra+=(--pairwise) ;;
  *)
    # "yes" or "true" ran the job without the pair-wise stage, unsaid
    echo "slurm-multinode.sh: error: GPUACCEPT_PAIRWISE=$GPUACCEPT_PAIRWISE: expected 1 (pair-wise) or 0" >&2
    exit 2
    ;;
esac
case "${GPUACCEPT_RAILS:-0}" in
  0) ;;
  1) extra+=(--rails) ;;
  *)
    echo "slurm-multinode.sh: error: GPUACCEPT_RAILS=$GPUACCEPT_RAILS: expected 1 (rails) or 0" >&2
    exit 2
    ;;
esac
if [[ -n "${GPUACCEPT_ISOLATE_MIN_BUSBW:-}" ]]; then
  if ! [[ $GPUACCEPT_ISOLATE_MIN_BUSBW =~ ^[0-9]{1,6}(\.[0-9]{1,6})?$ ]]; then
    echo "slurm-multinode.sh: error: GPUACCEPT_ISOLATE_MIN_BUSBW=$GPUACCEPT_ISOLATE_MIN_BUSBW: expected a bus bandwidth in GB/s" >&2
    exit 2
  fi
  extra+=(--isolate --min-busbw "$GPUACCEPT_ISOLATE_MIN_BUSBW")
  if [[ -n "${GPUACCEPT_TOPOLOGY:-}" ]]; then
    extra+=(--topology "$GPUACCEPT_TOPOLOGY")  # read and checked by accept, before any work
  fi
elif [[ -n "${GPUACCEPT_TOPOLOGY:-}" ]]; then
  echo "slurm-multinode.sh: error: GPUACCEPT_TOPOLOGY guides GPUACCEPT_ISOLATE_MIN_BUSBW: set both, or neither" >&2
  exit 2
fi
for name in GPUACCEPT_MIN_ALLGATHER_BUSBW GPUACCEPT_MIN_ALLTOALL_BUSBW; do
  value=${!name:-}
  [[ -n $value ]] || continue
  if ! [[ $value =~ ^[0-9]{1,6}(\.[0-9]{1,6})?$ ]]; then
    echo "slurm-multinode.sh: error: $name=$value: expected a bus bandwidth in GB/s" >&2
    exit 2
  fi
  case $name in
    GPUACCEPT_MIN_ALLGATHER_BUSBW) extra+=(--min-allgather-busbw "$value") ;;
    *) extra+=(--min-alltoall-busbw "$value") ;;
  esac
done
local_addr=()
if [[ -n "${GPUACCEPT_LOCAL_ADDR:-}" ]]; then
  # a host name or address: printable, no spaces, at most 253 characters (RFC 1035); torchrun
  # and perftest would take anything else and fail later, with a traceback or a timeout
  if ! LC_ALL=C bash -c '[[ $1 =~ ^[!-~]{1,253}$ ]]' _ "$GPUACCEPT_LOCAL_ADDR"; then
    printf 'slurm-multinode.sh: error: GPUACCEPT_LOCAL_ADDR=%q: expected a host name or address\n' "${GPUACCEPT_LOCAL_ADDR:0:40}" >&2
    exit 2
  fi
  local_addr=(--local-addr "$GPUACCEPT_LOCAL_ADDR")
fi
status=0
why=""
if [[ -z "${GPUACCEPT_RDZV_ENDPOINT:-}" ]]; then
  # a report saying why, not a silent exit: the rendezvous is set by accept-multinode.sbatch
  echo "slurm-multinode: GPUACCEPT_RDZV_ENDPOINT is not set (accept-multinode.sbatch sets it)" >&2
  status=2
  why="GPUACCEPT_RDZV_ENDPOINT was not set"
elif ! LC_ALL=C bash -c '[[ $1 =~ ^[!-~]{1,253}:([0-9]{1,5})$ ]] && ((10#${BASH_REMATCH[1]} >= 1 && 10#${BASH_REMATCH[1]} <= 65535))' _ "$GPUACCEPT_RDZV_ENDPOINT"; then
  # torchrun would take it and fail at the rendezvous with a traceback, or wait there
  printf 'slurm-multinode: GPUACCEPT_RDZV_ENDPOINT=%q is not HOST:PORT (a port 1 to 65535)\n' "${GPUACCEPT_RDZV_ENDPOINT:0:60}" >&2
  status=2
  why="GPUACCEPT_RDZV_ENDPOINT is not HOST:PORT"
elif gpuaccept_activate; then
  gpuaccept_run env GPUACCEPT_NODE_NAME="${SLURMD_NODENAME:-$(hostname -s)}" \
    torchrun --nnodes="${SLURM_JOB_NUM_NODES:-1}" \
    --nproc-per-node="$nproc" --rdzv-backend=c10d --rdzv-endpoint="$GPUACCEPT_RDZV_ENDPOINT" \
    --rdzv-id="${SLURM_JOB_ID:-gpuaccept}" "${local_addr[@]}" --no-python \
    gpuaccept accept --level "$level" --report-dir "$work" --no-history "${extra[@]}"
  status=$job_status
  gpuaccept_take_report "$work" "$report"
else
  status=3
fi
gpuaccept_ensure_report "$report" accept "$status" "$why"
exit "$status"
