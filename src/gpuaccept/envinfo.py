"""Environment capture: what ran where (stack, GPUs, pixi environment and lock, scheduler ids).

Unknown values are None, never placeholder strings; every probe is isolated, so one failing
probe leaves its field None and never aborts the capture.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any


def _probe(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception:
        return None


def _torch() -> dict[str, Any]:
    import torch

    return {
        "version": torch.__version__,
        "cuda": torch.version.cuda,
        "arch_list": torch.cuda.get_arch_list() if torch.cuda.is_available() else [],
        "debug_build": bool(torch.version.debug),
    }


def _gpus() -> list[dict[str, Any]]:
    from gpuaccept.hardware import list_cuda_gpus

    return [asdict(gpu) for gpu in list_cuda_gpus()]


def _driver() -> dict[str, Any]:
    from gpuaccept.hardware import driver_versions

    driver, cuda = driver_versions()
    return {"version": driver, "cuda": f"{cuda[0]}.{cuda[1]}" if cuda else None}


def _find_upwards(name: str, start: Path) -> Path | None:
    for directory in (start, *start.parents):
        if (directory / name).is_file():
            return directory / name
    return None


def _pixi() -> dict[str, Any]:
    manifest = os.environ.get("PIXI_PROJECT_MANIFEST")
    root = Path(manifest).parent if manifest else None
    lock = (root / "pixi.lock") if root else _find_upwards("pixi.lock", Path.cwd())
    lock_sha = hashlib.sha256(lock.read_bytes()).hexdigest() if lock and lock.is_file() else None
    return {
        "environment": os.environ.get("PIXI_ENVIRONMENT_NAME"),
        "manifest": manifest,
        "lock_sha256": lock_sha,
    }


def _condor_job_ad() -> dict[str, Any]:
    path = os.environ.get("_CONDOR_JOB_AD")
    if not path:
        return {}
    wanted = {"ClusterId", "ProcId", "GlobalJobId", "RemoteHost"}
    found: dict[str, Any] = {}
    for line in Path(path).read_text(errors="replace").splitlines():
        key, _, value = line.partition(" = ")
        if key.strip() in wanted:
            found[key.strip()] = value.strip().strip('"')
    return found


def _scheduler() -> dict[str, Any]:
    return {
        "htcondor": _probe(_condor_job_ad) or None,
        "htcondor_assigned_gpus": os.environ.get("_CONDOR_AssignedGPUs"),  # noqa: SIM112 HTCondor spells it so
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


def capture_environment() -> dict[str, Any]:
    """A JSON-ready description of this process's stack and place."""
    return {
        "python": {"version": platform.python_version(), "executable": sys.executable},
        "system": {
            "hostname": _probe(socket.gethostname),
            "kernel": _probe(platform.release),
            "architecture": _probe(platform.machine),
            "os": _probe(platform.system),
            "cores": _probe(os.cpu_count),
        },
        "torch": _probe(_torch),
        "driver": _probe(_driver),
        "gpus": _probe(_gpus),
        "pixi": _probe(_pixi),
        "scheduler": _probe(_scheduler),
    }


def stack_sha256(environment: dict[str, Any]) -> str:
    """A digest of the software stack and GPU models in a capture, not of the host it ran on.

    Two nodes with the same lock, torch, driver and GPU models share it, so a saved model can be
    traced to the stack that trained it; hostnames and job ids are left out on purpose.
    """
    stack = {
        "python": (environment.get("python") or {}).get("version"),
        "torch": environment.get("torch"),
        "driver": environment.get("driver"),
        "pixi_lock_sha256": (environment.get("pixi") or {}).get("lock_sha256"),
        "gpus": sorted(str((gpu or {}).get("name")) for gpu in (environment.get("gpus") or [])),
    }
    canonical = json.dumps(stack, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
