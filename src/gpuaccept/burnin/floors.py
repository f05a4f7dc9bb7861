"""What each GPU's burn-in rate is held to where no peer can hold it (issue #30 §3): the floor the
accept checks hold the same GPU model to in references.toml (`compute`'s bf16 and fp32 matmul at
8192^3, `memory`'s device copy counted as read + write), for the stressors that run the same
work (`burnin.stress`: an 8192^3 GEMM, a 1 GiB copy).

A window below it warns and does not fail: under sustained load the GEMM runs below the short
benchmark the reference was measured with (one H200, 2026-11-26: 664 TFLOPS in a 15 s burn-in
window against 799 in `accept`'s compute check, docs/results/2026-11-26-nvidia-h200-*), so a
healthy GPU can sit near the floor while it heats; `accept`'s compute and memory checks fail a GPU
below it. Peers (`judging.stragglers`) and the run's own first window (the drift rule) still fail.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpuaccept.references import ReferenceTable

STRESSOR_METRICS = {
    "gemm-bf16": "matmul_bf16_tflops",
    "gemm-fp32": "matmul_fp32_tflops",
    "hbm": "membw_copy_gbps",
}


# The model's physical peak for each stressor's work (references.toml `peaks`, vendor dense
# figures): the fp32 GEMM runs with TF32 off (burnin/stress.py), so its peak is fp32's; the copy
# is counted read + write, which the memory's one bandwidth bounds.
STRESSOR_PEAKS = {
    "gemm-bf16": "bf16_tflops",
    "gemm-fp32": "fp32_tflops",
    "hbm": "membw_gbps",
}


@dataclass(frozen=True)
class RateFloor:
    value: float
    said: str  # where it comes from, in the words a finding uses
    # the most the model can do at this work (None: references.toml gives no peak); a figure
    # above it is not a measurement (a checkpoint edited by hand, a broken timer)
    peak: float | None = None
    peak_said: str = ""


def reference_floors(
    references: ReferenceTable, gpus: Iterable[tuple[str, str, int | None]]
) -> dict[str, dict[str, RateFloor]]:
    """stressor -> device label -> floor, for (label, name, PCI device id) of each GPU whose
    model references.toml knows; a GPU it does not know (or a MIG slice) has none."""
    floors: dict[str, dict[str, RateFloor]] = {}
    for label, name, pci_device_id in gpus:
        key = references.model_for(name, pci_device_id)
        model = references.models.get(key) if key is not None else None
        if model is None:
            continue
        for stressor, metric in STRESSOR_METRICS.items():
            reference = model.metrics.get(metric)
            if reference is None:
                continue
            peak_key = STRESSOR_PEAKS.get(stressor)
            peak = model.peaks.get(peak_key) if peak_key is not None else None
            floors.setdefault(stressor, {})[label] = RateFloor(
                reference.floor,
                f"{reference.lower_fraction:g} x the {model.display} reference "
                f"{reference.value:g} {reference.unit} ({metric}, references.toml)",
                peak,
                f"the {model.display}'s peak {peak:g} {reference.unit} ({peak_key}, "
                "references.toml)"
                if peak is not None
                else "",
            )
    return floors


def below_floor(
    throughput: Mapping[str, float], floors: Mapping[str, RateFloor] | None
) -> list[tuple[str, float, RateFloor]]:
    """(device, rate, floor) of each device whose rate is below its floor (a NaN rate is below)."""
    if not floors:
        return []
    return [
        (device, rate, floors[device])
        for device, rate in sorted(throughput.items())
        if device in floors and not rate >= floors[device].value
    ]
