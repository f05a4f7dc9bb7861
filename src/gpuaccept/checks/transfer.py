"""transfer: pinned host-to-device and device-to-host bandwidth against the reference
(PCIe generation, or NVLink-C2C on Grace). CPU mode copies between host buffers."""

from __future__ import annotations

from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings, measurement_targets, torch_device
from gpuaccept.measure.transfer import DIRECTIONS, measure_transfer_gbps
from gpuaccept.results import CheckResult


def run(context: CheckContext) -> CheckResult:
    settings = context.settings
    findings = Findings("transfer", "TRANSFER")
    for target in measurement_targets(context):
        device = torch_device(target)
        for direction in DIRECTIONS:
            figure = measure_transfer_gbps(
                device, direction, settings.transfer_bytes, True, 2, settings.transfer_repeats
            )
            findings.judge(context, target, f"{direction}_pinned_gbps", figure.median_gbps, "GB/s")
    return findings.conclude("host-device bandwidth within reference")
