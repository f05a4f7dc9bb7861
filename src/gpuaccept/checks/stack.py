"""stack: driver vs the CUDA runtime of this torch, kernels for each GPU, NCCL and cuDNN."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings
from gpuaccept.probe.hardware import driver_versions, list_cuda_gpus
from gpuaccept.results import CheckResult


@dataclass(frozen=True)
class ArchSupport:
    kind: str  # "exact", "binary-compatible", "ptx-only" or "none"
    detail: str


def _parse_arch(entry: str) -> tuple[str, tuple[int, int], str] | None:
    match = re.fullmatch(r"(sm|compute)_(\d+)(\d)([a-z]?)", entry)
    if match is None:
        return None
    return match.group(1), (int(match.group(2)), int(match.group(3))), match.group(4)


def classify_arch_support(capability: tuple[int, int], arch_list: list[str]) -> ArchSupport:
    """How this torch runs on a GPU of `capability`, given torch.cuda.get_arch_list()."""
    parsed = [p for p in (_parse_arch(entry) for entry in arch_list) if p]
    major, minor = capability
    label = f"{major}.{minor}"
    if any(kind == "sm" and cc == capability for kind, cc, _ in parsed):
        return ArchSupport("exact", f"SASS for sm_{major}{minor}")
    # SASS runs on any later minor of the same major; arch-specific ('a') builds do not.
    compatible = [
        cc
        for kind, cc, suffix in parsed
        if kind == "sm" and not suffix and cc[0] == major and cc[1] <= minor
    ]
    if compatible:
        best = max(compatible)
        return ArchSupport(
            "binary-compatible", f"sm_{best[0]}{best[1]} SASS runs on {label} (same major)"
        )
    ptx = [cc for kind, cc, _ in parsed if kind == "compute" and cc <= capability]
    if ptx:
        best = max(ptx)
        return ArchSupport(
            "ptx-only", f"only compute_{best[0]}{best[1]} PTX, JIT-compiled for {label} at load"
        )
    return ArchSupport(
        "none", f"no kernels for {label} in {' '.join(arch_list) or 'an empty list'}"
    )


def run(context: CheckContext) -> CheckResult:
    import torch
    import torch.distributed as dist

    findings = Findings("stack", "STACK")
    details: dict[str, object] = {
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "distributed": dist.is_available(),
        "gloo": dist.is_available() and dist.is_gloo_available(),
    }
    findings.details = details
    if context.cpu_mode:
        if not details["gloo"]:
            findings.failures.append("torch.distributed with gloo is unavailable")
        build = "CPU build" if torch.version.cuda is None else f"CUDA {torch.version.cuda} build"
        return findings.conclude(f"CPU mode: torch {torch.__version__} ({build}), gloo available")

    runtime = torch.version.cuda or "?"
    driver, driver_cuda = driver_versions()
    arch_list = torch.cuda.get_arch_list()
    nccl = torch.cuda.nccl.version() if dist.is_nccl_available() else None
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    details.update(
        driver=driver,
        driver_cuda=".".join(map(str, driver_cuda)) if driver_cuda else None,
        arch_list=arch_list,
        nccl=".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl,
        cudnn=cudnn,
    )
    runtime_version = tuple(int(part) for part in runtime.split(".")[:2])
    if driver_cuda is None:
        findings.warnings.append("driver's CUDA version unknown (no NVML, no driver query)")
    elif driver_cuda < runtime_version:
        said = f"driver {driver or '?'} supports CUDA {driver_cuda[0]}.{driver_cuda[1]}"
        if driver_cuda[0] == runtime_version[0]:
            findings.warnings.append(
                f"{said}, torch needs {runtime}: runs by minor-version compatibility, "
                "without PTX JIT"
            )
        else:
            findings.failures.append(f"{said}, but torch is built for CUDA {runtime}")
    per_gpu = {}
    for gpu in list_cuda_gpus():
        support = classify_arch_support(gpu.capability, arch_list)
        per_gpu[f"gpu{gpu.index}"] = {"kind": support.kind, "detail": support.detail}
        if support.kind == "none":
            findings.failures.append(f"gpu{gpu.index} ({gpu.name}): {support.detail}")
        elif support.kind == "ptx-only":
            findings.warnings.append(f"gpu{gpu.index} ({gpu.name}): {support.detail}")
    details["kernels"] = per_gpu
    if nccl is None:
        findings.failures.append("NCCL is not available in this torch")
    if cudnn is None:
        findings.warnings.append("cuDNN is not available")
    kinds = ", ".join(sorted({v["kind"] for v in per_gpu.values()})) or "no GPU"
    return findings.conclude(
        f"driver {driver or '?'} (CUDA {details['driver_cuda'] or '?'}), torch "
        f"{torch.__version__} CUDA {runtime}, kernels {kinds}, NCCL {details['nccl']}, "
        f"cuDNN {cudnn}"
    )
