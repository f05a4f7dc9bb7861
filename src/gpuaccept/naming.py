"""How figures read everywhere: readable metric names, run titles and one number format.

One place, so the console, the bench tables and summaries, Markdown and HTML never disagree on
how 11570 or 0.0531 is printed, and no raw key like `collectives/allreduce_algbw_gbps` reaches a
reader. It sits beside the results model (it reads only that), so the sweeps that write a
summary and the writers that print one use it without a layer reaching across another.
"""

from __future__ import annotations

import math
import re

from gpuaccept.results import Measurement, RunReport, Verdict, device_label

_DTYPE = r"(fp64|fp32|tf32|bf16|fp16|fp8)"
_NAMED: list[tuple[str, str]] = [
    (rf"^matmul_{_DTYPE}_tflops$", r"matmul \1"),
    (rf"^gemm_{_DTYPE}_mismatched_elements$", r"GEMM \1 repeats differing"),
    (rf"^sustained_{_DTYPE}_last_over_first$", r"sustained \1 (last/first window)"),
    (r"^membw_(copy|scale|add|triad)_gbps$", r"memory \1 bandwidth"),
    (r"^(h2d|d2h)_(pinned|pageable)_gbps$", r"\1 \2"),
    (r"^allreduce_busbw_gbps$", "all-reduce bus bandwidth"),
    (r"^allreduce_algbw_gbps$", "all-reduce algorithm bandwidth"),
    (r"^allreduce_wrong_elements$", "all-reduce wrong elements"),
    (r"^(all_reduce|all_gather|reduce_scatter|broadcast)_avg_busbw_gbps$", r"\1 average busbw"),
    (r"^nbody_(fp32|fp64)_gflops$", r"n-body \1"),
    (r"^rank(\d+)_loss_final_over_initial$", r"rank \1 loss (final/initial)"),
    (r"^loss_final_over_initial$", "loss (final/initial)"),
    (r"^train_samples_per_second$", "training throughput"),
    (r"^gpus_usable$", "GPUs usable"),
    (r"^pattern_bytes_tested$", "memory pattern-tested"),
    (r"^test_accuracy$", "test accuracy"),
    (r"^final_loss$", "final loss"),
    (r"^train_elapsed$", "training time"),
    (r"^images_per_second$", "images/s"),
]
_UNIT_SUFFIX = re.compile(r"_(tflops|gflops|gbps|seconds|ratio|elements|bytes|percent)$")


def metric_title(name: str) -> str:
    """`matmul_bf16_tflops` -> `matmul bf16`; a `check/metric` key loses its check part."""
    name = name.rpartition("/")[2]
    for pattern, title in _NAMED:
        if re.match(pattern, name):
            return re.sub(pattern, title, name)
    return _UNIT_SUFFIX.sub("", name).replace("_", " ")


def format_number(value: float | int | None) -> str:
    """Four significant figures at most, thousands separated, no exponent in the usual range."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    if magnitude >= 0.001:
        return f"{value:.3g}"
    return f"{value:.2e}"


def figure_text(measurement: Measurement) -> str:
    """`gpu0 matmul bf16 782 TFLOPS` (the device is left out for the CPU and node figures)."""
    device = (
        "" if measurement.device_index is None else f"{device_label(measurement.device_index)} "
    )
    title = metric_title(measurement.name)
    # a unit the title already says ("GPUs usable 0 GPUs") or that is no unit ("0.124 ratio")
    # is left out
    unit = measurement.unit
    if unit in ("ratio", "") or unit.lower() in title.lower().split():
        return f"{device}{title} {format_number(measurement.value)}"
    return f"{device}{title} {format_number(measurement.value)} {unit}"


def run_title(report: RunReport) -> str:
    """What was run, as a person would have typed it: `gpuaccept accept --level standard`,
    `gpuaccept bench nbody`, `gpuaccept bench` (every benchmark), `gpuaccept train mnist`,
    `gpuaccept burnin --duration 24h`."""
    if report.command == "bench":
        what = "gpuaccept bench" if report.level == "all" else f"gpuaccept bench {report.level}"
    elif report.command == "train-mnist":
        what = f"gpuaccept train mnist --model {report.level}"
    elif report.command == "burnin":
        what = f"gpuaccept burnin --duration {report.level}"
    else:
        what = f"gpuaccept {report.command} --level {report.level}"
    mode = "CPU mode, not a GPU acceptance" if report.device_mode == "cpu" else "GPU"
    return f"{what} ({mode})"


def chart_title(metric: str) -> str:
    """A readable chart title that matplotlib prints as it is (no $...$ mathtext)."""
    return metric_title(metric).replace("$", r"\$")


def floor_verdict_text(measurement: Measurement) -> str:
    """A figure's verdict against its reference floor, as people read it: `pass`, `fail`, or
    `no reference` (stored as "unchecked", which read as if the figure had not been checked)."""
    if measurement.verdict is Verdict.UNCHECKED:
        return "no reference"
    return measurement.verdict.value


# words that are names, written as their owners write them
_ACRONYMS = {
    "nvml": "NVML",
    "gpu": "GPU",
    "gpus": "GPUs",
    "cpu": "CPU",
    "pcie": "PCIe",
    "xid": "XID",
    "ecc": "ECC",
    "nccl": "NCCL",
    "dcgm": "DCGM",
    "mig": "MIG",
    "sm": "SM",
    "hbm": "HBM",
    "uuid": "UUID",
    "id": "id",
    "dtypes": "dtypes",
    "ddp": "DDP",
    "nvlink": "NVLink",
}


# a key's last word when it is a unit, as the unit is written
_UNIT_WORDS = {
    "w": "W",
    "mhz": "MHz",
    "s": "s",
    "seconds": "s",
    "us": "us",
    "ms": "ms",
    "gbps": "GB/s",
    "percent": "%",
    "c": "°C",
    "bytes": "bytes",
    "mib": "MiB",
    "gib": "GiB",
    "tflops": "TFLOPS",
}


def detail_title(key: str) -> str:
    """A details key as a label: `nvml_gpu_count` -> `NVML GPU count`, `power_max_w` ->
    `power max (W)`."""
    words = str(key).replace("_", " ").split()
    if not words:
        return str(key)
    unit = _UNIT_WORDS.get(words[-1].lower()) if len(words) > 1 else None
    if unit is not None:
        words = words[:-1]
    title = " ".join(_ACRONYMS.get(word.lower(), word) for word in words)
    return f"{title} ({unit})" if unit else title
