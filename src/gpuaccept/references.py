"""Expected figures per GPU model: the shipped table, user baselines over it, and recording one.

A metric with no reference is *unchecked*, never passed (ReFrame's rule).
"""

from __future__ import annotations

import json
import re
import statistics
import tomllib
from importlib.resources import files
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpuaccept.errors import InputError
from gpuaccept.output_files import write_text_atomically
from gpuaccept.results import Reference, RunReport

CPU_MODEL = "cpu"
MATMUL_DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16")

METRIC_UNITS: dict[str, str] = {
    **{f"matmul_{dtype}_tflops": "TFLOPS" for dtype in MATMUL_DTYPES},
    "membw_copy_gbps": "GB/s",
    "h2d_pinned_gbps": "GB/s",
    "d2h_pinned_gbps": "GB/s",
    "allreduce_busbw_gbps": "GB/s",
    "p2p_gbps": "GB/s",
    # the LLM workload (checks/workload.py), per preset: its floors hold only for the preset as
    # shipped (shape and batch); a variant of one is reported, not judged
    **{f"llm_{preset}_tokens_per_second_per_gpu": "tokens/s" for preset in ("tiny", "1b", "8b")},
    **{f"llm_{preset}_tflops_per_gpu": "TFLOPS" for preset in ("tiny", "1b", "8b")},
    **{f"llm_{preset}_mfu": "ratio" for preset in ("tiny", "1b", "8b")},
}
DEFAULT_BASELINE_LOWER_FRACTION = 0.9


# gpuaccept's own choices where no vendor figure exists (see references.toml's header)
DEFAULT_POWER_LOAD_FRACTION = 0.8
DEFAULT_CLOCK_LOAD_FRACTION = 0.6


class ModelReferences(BaseModel):
    """One GPU model: how it is recognised, its peaks, its figures and its hardware facts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    display: str
    pci_device_ids: list[str] = Field(default_factory=list)  # "0x2330": NVML's device id >> 16
    match: list[str] = Field(default_factory=list)
    form_factor: str | None = None
    nvlink_links: int | None = Field(default=None, ge=0)  # None: not checked (optional bridges)
    switch_fabric: bool = False  # NVSwitch system: the fabric manager must register the GPU
    # what a PCIe link can be (Linux, gregkh/linux 0b52ed5e include/linux/pci.h: enum pci_bus_speed,
    # PCIE_SPEED_2_5GT to PCIE_SPEED_64_0GT, Gen1 to Gen6; enum pcie_link_width, "Values from Link
    # Status register, PCIe r3.1, sec 7.8.8": x1, x2, x4, x8, x12, x16, x32)
    pcie_gen: int | None = Field(default=None, ge=1, le=6)
    pcie_width: Literal[1, 2, 4, 8, 12, 16, 32] | None = None
    power_load_fraction: float = Field(default=DEFAULT_POWER_LOAD_FRACTION, gt=0, le=1)
    clock_load_fraction: float = Field(default=DEFAULT_CLOCK_LOAD_FRACTION, gt=0, le=1)
    peaks: dict[str, float] = Field(default_factory=dict)
    metrics: dict[str, Reference] = Field(default_factory=dict)


def pci_device_key(pci_device_id: int) -> str:
    """NVML's 32-bit pciDeviceId (device << 16 | vendor) as the table keys it: '0x2330'."""
    return f"0x{(pci_device_id >> 16) & 0xFFFF:04x}"


_MIG_NAME = re.compile(r"\bMIG\b")


class ReferenceTable(BaseModel):
    """References keyed by model; a device name maps to a model by regex or by exact name."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    models: dict[str, ModelReferences]

    def model_for(self, device_name: str, pci_device_id: int | None = None) -> str | None:
        """The model key for a GPU: by PCI device id (NVML's), else by the name torch reports;
        None for an unknown GPU or a MIG instance (whole-GPU figures do not fit a slice)."""
        if _MIG_NAME.search(device_name):
            return None
        if device_name in self.models:
            return device_name
        if pci_device_id is not None:
            wanted = pci_device_key(pci_device_id)
            for key, model in self.models.items():
                if wanted in (known.lower() for known in model.pci_device_ids):
                    return key
        for key, model in self.models.items():
            if any(re.search(pattern, device_name, re.IGNORECASE) for pattern in model.match):
                return key
        return None

    def lookup(self, model: str | None, metric: str) -> Reference | None:
        if model is None or model not in self.models:
            return None
        return self.models[model].metrics.get(metric)

    def with_overrides(self, overrides: dict[str, dict[str, Reference]]) -> ReferenceTable:
        """A new table where each overridden (model, metric) replaces the shipped one."""
        models = dict(self.models)
        for name, metrics in overrides.items():
            key = self.model_for(name) or name
            base = models.get(key, ModelReferences(display=name))
            models[key] = base.model_copy(update={"metrics": {**base.metrics, **metrics}})
        return ReferenceTable(models=models)


def load_shipped_references() -> ReferenceTable:
    text = files("gpuaccept.data").joinpath("references.toml").read_text(encoding="utf-8")
    return ReferenceTable.model_validate(tomllib.loads(text))


class _BaselineEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # allow_inf_nan=False: an infinite floor fails every node, a NaN one none
    value: float = Field(gt=0, allow_inf_nan=False)
    lower_fraction: float = Field(default=DEFAULT_BASELINE_LOWER_FRACTION, gt=0, le=1)
    upper_fraction: float | None = Field(default=None, ge=1, allow_inf_nan=False)
    source: str = ""


class _BaselineFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = Field(default=1, ge=1, le=1)
    models: dict[str, dict[str, _BaselineEntry]]


_MAX_BASELINE_BYTES = 16 * 1024 * 1024  # thousands of models; a larger file is not a baseline


def load_baseline(path: Path) -> dict[str, dict[str, Reference]]:
    """Read and validate a baseline TOML file; any fault raises InputError naming the file."""
    from gpuaccept.input_files import first_validation_error, read_toml_input

    raw = read_toml_input(path, "baseline", f"baseline {path}", _MAX_BASELINE_BYTES)
    try:
        parsed = _BaselineFile.model_validate(raw)
    except ValidationError as error:
        raise InputError(f"baseline {path}: {first_validation_error(error)}") from None
    if not parsed.models:
        raise InputError(f"baseline {path}: [models] holds no model")
    overrides: dict[str, dict[str, Reference]] = {}
    for model, metrics in parsed.models.items():
        for metric, entry in metrics.items():
            if metric not in METRIC_UNITS:
                known = ", ".join(sorted(METRIC_UNITS))
                raise InputError(
                    f"baseline {path}: models.{model}.{metric}: unknown metric (known: {known})"
                )
            overrides.setdefault(model, {})[metric] = Reference(
                value=entry.value,
                lower_fraction=entry.lower_fraction,
                upper_fraction=entry.upper_fraction,
                unit=METRIC_UNITS[metric],
                source=entry.source or f"baseline {path.name}",
            )
    return overrides


def without_metrics(table: ReferenceTable) -> ReferenceTable:
    """The same models with no figures: every measurement is unchecked (correctness only)."""
    return ReferenceTable(
        models={k: m.model_copy(update={"metrics": {}}) for k, m in table.models.items()}
    )


def baseline_figures(reports: list[RunReport]) -> dict[str, dict[str, float]]:
    """{device name: {metric: median over runs}} of every referenceable metric in the reports.

    Keyed by the device name torch reports ("cpu" in CPU mode); with several GPUs of one model
    the median also runs across them.
    """
    samples: dict[str, dict[str, list[float]]] = {}
    for report in reports:
        for check in report.checks:
            for m in check.measurements:
                if m.name not in METRIC_UNITS:
                    continue
                key = CPU_MODEL if report.device_mode == "cpu" else (m.device_name or "unknown")
                samples.setdefault(key, {}).setdefault(m.name, []).append(m.value)
    return {
        key: {metric: statistics.median(values) for metric, values in metrics.items()}
        for key, metrics in samples.items()
    }


def write_baseline(
    path: Path,
    figures: dict[str, dict[str, float]],
    note: str,
    lower_fraction: float = DEFAULT_BASELINE_LOWER_FRACTION,
) -> None:
    """Write {model: {metric: value}} as a baseline file, atomically (temp file, then rename)."""
    # Hand-formatted: the format is flat, and JSON string escapes are valid TOML basic strings.
    lines = ["# gpuaccept baseline, recorded by `gpuaccept accept --record-baseline`", ""]
    lines.append("schema_version = 1")
    for model, metrics in sorted(figures.items()):
        lines += ["", f"[models.{json.dumps(model)}]"]
        for metric, value in sorted(metrics.items()):
            lines.append(
                f"{metric} = {{ value = {value:.6g}, lower_fraction = {lower_fraction}, "
                f"source = {json.dumps(note)} }}"
            )
    write_text_atomically(path, "\n".join(lines) + "\n")
