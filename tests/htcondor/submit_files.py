"""Expanding our submit files with HTCondor's own code, and the machine ads they must (not) match.

`htcondor.Submit(text).jobs()` (htcondor 24.12) builds the job ClassAd condor_submit would build,
Requirements included. Variables given on condor_submit's command line act as if placed at the top
of the file, so `expand(..., IMAGE=...)` prepends them the same way.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ.setdefault("CONDOR_CONFIG", "/dev/null")  # no pool configuration: offline expansion

# htcondor2 first: it registers HTCondor's ClassAd functions (countMatches, ...) that classad2
# evaluates; without it matching silently fails.
import htcondor2  # noqa: F401

# isort: split
import classad2

import htcondor

# what `htcondor.Submit` raises where condor_submit stops (an `error :` line, a bad macro)
HTCondorValueError = htcondor.HTCondorValueError

REPO = Path(__file__).resolve().parents[2]
SUBMIT_DIR = REPO / "htcondor"
CONTAINER_JOBS = [
    "accept.sub",
    "train-mnist.sub",
    "bench.sub",
    "bench-multigpu.sub",
    "sweep.sub",
    "burnin.sub",
]
ALL_JOBS = [*CONTAINER_JOBS, "accept-vanilla.sub"]
TARGETS = ("cuda12", "gb10")
IMAGE = "docker://ghcr.io/acme/gpuaccept@sha256:" + "0" * 64


def expand_text(text: str, **variables: str) -> list[Any]:
    """The job ads of a submit description, as classad2 ads (run from the repository root)."""
    header = "".join(f"{name} = {value}\n" for name, value in variables.items())
    cwd = Path.cwd()
    os.chdir(REPO)
    try:
        ads = list(htcondor.Submit(header + text).jobs())
    finally:
        os.chdir(cwd)
    return [classad2.parseOne(str(ad)) for ad in ads]


def expand(name: str, **variables: str) -> list[Any]:
    variables.setdefault("IMAGE", IMAGE)
    if name == "sweep.sub":
        variables.setdefault("MACHINES", "tests/htcondor/machines.txt")
    return expand_text((SUBMIT_DIR / name).read_text(), **variables)


def machine_ad(
    *,
    name: str = "gpu01.example.org",
    arch: str = "X86_64",
    driver: float = 12.9,
    gpus: int = 1,
    capability: float = 9.0,
    memory_mib: int = 81559,
    device: str = "NVIDIA H100 80GB HBM3",
    container: bool = True,
) -> Any:
    """A partitionable-slot machine ad with nested per-GPU ads, as HTCondor 24 publishes them."""
    ids = [f"GPU_{name.split('.')[0]}{i:02d}" for i in range(gpus)]
    nested = "".join(
        f'GPUs_{i} = [ Id = "{i}"; DeviceName = "{device}"; Capability = {capability}; '
        f"GlobalMemoryMb = {memory_mib}; DriverVersion = {driver}; "
        f"MaxSupportedVersion = {int(driver * 1000)} ];\n"
        for i in ids
    )
    container_attrs = (
        "HasContainer = true; HasDockerURL = true; HasSingularity = true;" if container else ""
    )
    text = f"""[
      MyType = "Machine"; Name = "slot1@{name}"; Machine = "{name}";
      Arch = "{arch}"; OpSys = "LINUX"; Cpus = 64; Memory = 512000; Disk = 500000000;
      HasFileTransfer = true; HasSelfCheckpointTransfers = true; FileSystemDomain = "{name}";
      CondorVersion = "$CondorVersion: 24.12.24 2026-09-24 BuildID: 801234 $";
      {container_attrs}
      GPUs = {gpus}; TotalGPUs = {gpus};
      AvailableGPUs = {{ {", ".join(f"GPUs_{i}" for i in ids)} }};
      {nested}
      GPUs_Capability = {capability}; GPUs_DriverVersion = {driver};
      GPUs_GlobalMemoryMb = {memory_mib}; GPUs_DeviceName = "{device}";
      Requirements = true; START = true
    ]"""
    return classad2.parseOne(text)


def matches(job: Any, machine: Any) -> bool:
    return bool(job.symmetricMatch(machine))
