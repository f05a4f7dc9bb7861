"""The rules tying each submit file to the pixi.toml target it runs. Each returns problems."""

from __future__ import annotations

import re
from typing import Any

from tests.htcondor.submit_files import TARGETS, expand_text
from tests.pixi_invariants import environment_platforms, workspace_platforms

# HTCondor's Arch for each conda subdir.
ARCH_OF_SUBDIR = {"linux-64": "X86_64", "linux-aarch64": "aarch64"}
# The oldest compute capability conda-forge's pytorch-gpu compiles for each CUDA (FIELD-NOTES:
# CUDA 12.9 builds 5.0-9.0, 10.0, 12.0+PTX; CUDA 13.0 builds 7.5-9.0, 10.0, 11.0, 12.0+PTX).
CAPABILITY_FLOOR_OF_CUDA = {"12.9": 5.0, "13.0": 7.5}
IMAGE = "docker://ghcr.io/acme/gpuaccept@sha256:" + "0" * 64


def macros(text: str) -> dict[str, str]:
    found = {}
    for line in text.splitlines():
        match = re.match(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*=\s*(.*?)\s*$", line)
        if match:
            found[match.group(1).lower()] = match.group(2)
    return found


def check_target_facts(text: str, manifest: dict[str, Any]) -> list[str]:
    """Each target's platform, Arch, driver floor and capability floor agree with pixi.toml."""
    values = macros(text)
    platforms = {p.name: p for p in workspace_platforms(manifest)}
    problems = []
    for target in TARGETS:
        name = values.get(f"{target}_platform")
        platform = platforms.get(name or "")
        if platform is None or platform.cuda is None:
            problems.append(f"{target}: platform {name!r} is not a CUDA platform of pixi.toml")
            continue
        if environment_platforms(manifest, target) != {platform.name}:
            problems.append(f"{target}: pixi environment {target!r} is not {platform.name} alone")
        if values.get(f"{target}_arch") != ARCH_OF_SUBDIR[platform.subdir]:
            problems.append(f"{target}: Arch must be {ARCH_OF_SUBDIR[platform.subdir]}")
        if values.get(f"{target}_min_driver_cuda") != platform.cuda:
            problems.append(f"{target}: driver floor must be CUDA {platform.cuda}, the lock's")
        floor = CAPABILITY_FLOOR_OF_CUDA.get(platform.cuda)
        if floor is None or float(values.get(f"{target}_min_capability", "0")) != floor:
            problems.append(f"{target}: capability floor must be {floor} for CUDA {platform.cuda}")
    return problems


def check_job_requirements(text: str, manifest: dict[str, Any]) -> list[str]:
    """The expanded job ad of each target requires its Arch, driver and capability floors."""
    if len(re.findall(r"(?im)^\s*requirements\s*=", text)) != 1:
        return ["exactly one requirements line (a second silently replaces the first)"]
    platforms = {p.name: p for p in workspace_platforms(manifest)}
    values = macros(text)
    problems = []
    for target in TARGETS:
        platform = platforms[values[f"{target}_platform"]]
        ad = expand_text(text, IMAGE=IMAGE, GPUACCEPT_TARGET=target, MACHINES=_one_machine())[0]
        requirements = str(ad["Requirements"])
        arch = ARCH_OF_SUBDIR[platform.subdir]
        if f'(Arch == "{arch}")' not in requirements:
            problems.append(f"{target}: Requirements do not pin Arch == {arch}")
        floors = [float(v) for v in re.findall(r"GPUs_DriverVersion >= ([0-9.E+-]+)", requirements)]
        if not floors or max(floors) < float(str(platform.cuda)):
            problems.append(f"{target}: no GPUs_DriverVersion floor of at least {platform.cuda}")
        if ad.get("GPUsMinCapability") != CAPABILITY_FLOOR_OF_CUDA[str(platform.cuda)]:
            problems.append(f"{target}: gpus_minimum_capability is not the build's floor")
        if "GPUsMinMemory" not in ad or ad["GPUsMinMemory"] > 40536:
            problems.append(f"{target}: default GPU memory floor must admit an A100-40GB")
    return problems


def _one_machine() -> str:
    return "tests/htcondor/machines.txt"
