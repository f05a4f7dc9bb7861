"""memory: device memory bandwidth against the reference; at level full, a write/verify
pattern test over most of the free memory."""

from __future__ import annotations

from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings, measurement_targets, torch_device
from gpuaccept.measure.membw import measure_stream_gbps, memory_pattern_test
from gpuaccept.results import CheckResult

PATTERN_CHUNK_BYTES = 1024**3
# A GPU that shares its memory with the CPU (cudaDeviceProp.integrated: Tegra and other SoCs)
# reports as free what the OS reports as free (NVIDIA, cuMemGetInfo_v2: "the amount of memory on
# the device that is free according to the OS ... The integrated GPU on Tegra shares memory with
# CPU and other component of the SoC"; cuda-python's driver docs, read 2026-11-27): 0.9 of it
# would leave the host, its page cache and this run's own processes a tenth. The pattern test
# takes half there (gpuaccept's choice, said in the check's details).
INTEGRATED_PATTERN_FRACTION = 0.5


def pattern_budget(
    free_bytes: int, fraction: float, max_bytes: int, *, integrated: bool
) -> tuple[int, str | None]:
    """The bytes the pattern test writes on a GPU with `free_bytes` free, and why it takes less
    than `fraction` of them (None when it does not)."""
    why = None
    if integrated and fraction > INTEGRATED_PATTERN_FRACTION:
        fraction = INTEGRATED_PATTERN_FRACTION
        why = (
            f"memory shared with the CPU: {fraction:g} of what the OS reports free, not "
            "more, so the host keeps room"
        )
    return min(int(free_bytes * fraction), max_bytes), why


def run(context: CheckContext) -> CheckResult:
    import torch

    settings = context.settings
    findings = Findings("memory", "MEMORY")
    for target in measurement_targets(context):
        device = torch_device(target)
        figure = measure_stream_gbps(
            device, "copy", settings.membw_bytes, warmup=2, repeats=settings.membw_repeats
        )
        findings.judge(context, target, "membw_copy_gbps", figure.median_gbps, "GB/s")
        if settings.pattern_fraction <= 0:
            continue
        if device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(device)
            integrated = bool(getattr(torch.cuda.get_device_properties(device), "is_integrated", 0))
            budget, why = pattern_budget(
                free, settings.pattern_fraction, settings.pattern_max_bytes, integrated=integrated
            )
            if why is not None:
                findings.details.setdefault("pattern_budget", {})[target.label] = why
        else:
            budget = settings.pattern_max_bytes
        pattern = memory_pattern_test(device, budget, PATTERN_CHUNK_BYTES)
        findings.record(target, "pattern_bytes_tested", pattern.bytes_tested, "bytes")
        if pattern.mismatched_bytes:
            findings.failures.append(
                f"{target.label}: {pattern.mismatched_bytes} byte(s) read back wrong in "
                f"{pattern.bytes_tested / 1e9:.2f} GB of pattern tests"
            )
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return findings.conclude("bandwidth within reference")
