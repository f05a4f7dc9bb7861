"""health: NVML's view of each GPU (ECC, retired pages, row remapping, throttling, PCIe link)."""

from __future__ import annotations

from dataclasses import asdict

from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings
from gpuaccept.probe.hardware import (
    GpuHealth,
    list_cuda_gpus,
    load_nvml,
    nvml_missing_reason,
    read_gpu_health,
)
from gpuaccept.results import CheckResult, Status


def judge_health(health: GpuHealth) -> tuple[list[str], list[str]]:
    """(failures, warnings) for one GPU's snapshot; unknown facts are neither."""
    tag = f"gpu{health.index}"
    failures, warnings = [], []
    if health.ecc_uncorrectable_volatile:
        failures.append(f"{tag}: {health.ecc_uncorrectable_volatile} uncorrectable ECC error(s)")
    if health.retired_pages_pending:
        failures.append(f"{tag}: page retirement pending (reset the GPU)")
    if health.remapped_rows_failed:
        failures.append(f"{tag}: row remapping failed (the GPU needs service)")
    if health.remapped_rows_pending:
        failures.append(f"{tag}: row remapping pending (reset the GPU)")
    if health.throttle_reasons:
        warnings.append(f"{tag}: clocks held back by {', '.join(health.throttle_reasons)}")
    width, width_max = health.pcie_width_current, health.pcie_width_max
    if width is not None and width_max is not None and width < width_max:
        warnings.append(f"{tag}: PCIe link x{width} of x{width_max}")
    gpu_gen, system_gen = health.pcie_gen_max_gpu, health.pcie_gen_max_system
    if gpu_gen is not None and system_gen is not None and system_gen < gpu_gen:
        warnings.append(f"{tag}: PCIe slot allows Gen{system_gen}, the GPU supports Gen{gpu_gen}")
    if health.persistence_mode is False:
        warnings.append(f"{tag}: persistence mode off")
    return failures, warnings


def run(context: CheckContext) -> CheckResult:
    if context.cpu_mode:
        return CheckResult(
            name="health", area="HEALTH", status=Status.SKIP, message="CPU mode: no GPU to read"
        )
    nvml = load_nvml()
    if nvml is None:
        return CheckResult(
            name="health",
            area="HEALTH",
            status=Status.SKIP,
            message=f"NVML unavailable: {nvml_missing_reason()}",
        )
    findings = Findings("health", "HEALTH")
    snapshots = []
    for gpu in list_cuda_gpus():
        health = read_gpu_health(nvml, gpu.index, gpu.uuid)
        snapshots.append(asdict(health))
        failures, warnings = judge_health(health)
        findings.failures += failures
        findings.warnings += warnings
    findings.details = {"gpus": snapshots}
    return findings.conclude(f"{len(snapshots)} GPU(s): no ECC, retirement or link faults")
