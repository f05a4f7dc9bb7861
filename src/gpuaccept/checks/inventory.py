"""inventory: the GPUs this process can use against the count it was promised, and every GPU
NVML lists but cannot reach (one that fell off the bus fails the node with NVML's reason)."""

from __future__ import annotations

from dataclasses import asdict

from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings
from gpuaccept.probe.hardware import list_cuda_gpus, nvml_gpu_count, nvml_unreachable_gpus
from gpuaccept.results import CheckResult


def run(context: CheckContext) -> CheckResult:
    findings = Findings("inventory", "INVENTORY")
    gpus = list_cuda_gpus()
    nvml_count = nvml_gpu_count()
    unreachable = nvml_unreachable_gpus()
    findings.details = {
        "gpus": [asdict(gpu) for gpu in gpus],
        "nvml_gpu_count": nvml_count,
        "nvml_unreachable": unreachable,
        "expected": asdict(context.expected) if context.expected else None,
    }
    findings.failures += [f"{problem} (listed but unreachable)" for problem in unreachable]
    if context.cpu_mode and gpus:
        # --device cpu on a GPU node: the run measures the CPU twins; the GPUs are not judged
        findings.record_node("gpus_usable", 0, "GPUs")
        return findings.conclude(
            f"CPU mode (--device cpu): {len(gpus)} GPU(s) present, not measured in this run"
        )
    findings.record_node("gpus_usable", len(gpus), "GPUs")
    names = ", ".join(sorted({gpu.name for gpu in gpus})) or "none"
    hidden = ""
    if nvml_count is not None and nvml_count > len(gpus):
        hidden = (
            f"; NVML sees {nvml_count} NVIDIA GPU(s) that torch cannot use "
            "(CPU build of torch, or a driver too old for its CUDA?)"
        )
    expected = context.expected
    if expected is not None and len(gpus) < expected.count:
        findings.failures.append(
            f"expected {expected.count} GPU(s) ({expected.source}) but torch can use "
            f"{len(gpus)}{hidden}"
        )
    elif expected is None and not gpus and nvml_count:
        findings.failures.append(f"no usable GPU{hidden}")
    elif expected is not None and len(gpus) > expected.count:
        findings.warnings.append(
            f"{len(gpus)} GPUs usable but {expected.count} assigned ({expected.source}): "
            "is device isolation missing?"
        )
    if not gpus and not findings.failures:
        return findings.conclude("CPU mode: no GPU found and none expected")
    promised = f" of {expected.count} expected ({expected.source})" if expected else ""
    return findings.conclude(f"{len(gpus)} GPU(s) usable{promised}: {names}")
