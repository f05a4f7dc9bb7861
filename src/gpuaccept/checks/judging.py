"""Turning measured figures into Measurements with verdicts, and findings into a CheckResult."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuaccept.actions import Cause, finding_records
from gpuaccept.checks.context import CheckContext
from gpuaccept.references import CPU_MODEL, ModelReferences
from gpuaccept.results import CheckResult, Measurement, Status, Verdict, nan_figure_failures


@dataclass(frozen=True)
class Target:
    """A device a check measures: its index (None on the CPU) and the name it reports."""

    index: int | None
    name: str
    uuid: str | None = None
    pci_device_id: int | None = None  # NVML's, when NVML can name the GPU
    mig: bool = False  # a MIG instance: whole-GPU references do not apply

    @property
    def label(self) -> str:
        return "cpu" if self.index is None else f"gpu{self.index}"


def measurement_targets(context: CheckContext) -> list[Target]:
    """The GPU the suite gave this check, else every GPU this process can use; the CPU in CPU
    mode."""
    if context.cpu_mode:
        return [Target(None, "cpu")]
    from gpuaccept.probe.hardware import list_cuda_gpus
    from gpuaccept.probe.nvml_health import nvml_identity

    return [
        Target(gpu.index, gpu.name, gpu.uuid, *nvml_identity(gpu.index, gpu.uuid))
        for gpu in list_cuda_gpus()
        if context.device_index is None or gpu.index == context.device_index
    ]


def target_model(context: CheckContext, target: Target) -> str | None:
    """The reference model a target is judged as (by PCI device id, then name)."""
    if context.cpu_mode:
        return CPU_MODEL
    if target.mig:
        return None
    return context.references.model_for(target.name, target.pci_device_id)


def target_references(context: CheckContext, target: Target) -> ModelReferences | None:
    """The references.toml row a target is judged by (None for an unknown GPU or a slice)."""
    key = target_model(context, target)
    return context.references.models.get(key) if key is not None else None


def torch_device(target: Target) -> Any:
    import torch

    return torch.device("cpu") if target.index is None else torch.device("cuda", target.index)


@dataclass
class Findings:
    """What a check found: failures make it FAIL, warnings make it WARN."""

    name: str
    area: str
    measurements: list[Measurement] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    unknown_models: set[str] = field(default_factory=set)
    # how a failing figure is named when its device label alone does not say (a GPU pair)
    where: dict[int, str] = field(default_factory=dict)
    # what was measured but not judged, and why (CheckResult.not_judged; the verdict says it)
    not_judged: dict[str, str] = field(default_factory=dict)

    def judge(
        self,
        context: CheckContext,
        target: Target,
        metric: str,
        value: float,
        unit: str,
        where: str | None = None,
        share: tuple[float, str] | None = None,
    ) -> Measurement:
        """Record a figure judged against the reference for the target's model; `share` holds it
        to that share of the reference, and says why in the reference's source."""
        model = target_model(context, target)
        if model is None:
            self.unknown_models.add(
                f"{target.name} (a MIG instance)" if target.mig else target.name
            )
        reference = context.references.lookup(model, metric)
        if reference is not None and share is not None:
            fraction, why = share
            reference = reference.model_copy(
                update={
                    "value": reference.value * fraction,
                    "source": f"{reference.source}; x {fraction:g}: {why}",
                }
            )
        measurement = Measurement(
            name=metric,
            value=value,
            unit=unit,
            device_index=target.index,
            device_name=target.name,
            reference=reference,
            reference_model=model,
            verdict=reference.judge(value) if reference else Verdict.UNCHECKED,
        )
        self.measurements.append(measurement)
        if where is not None:
            self.where[len(self.measurements) - 1] = where
        return measurement

    def record(self, target: Target, metric: str, value: float, unit: str) -> Measurement:
        """Record a figure that has no reference by nature (reported, never judged)."""
        measurement = Measurement(
            name=metric, value=value, unit=unit, device_index=target.index, device_name=target.name
        )
        self.measurements.append(measurement)
        return measurement

    def record_node(self, metric: str, value: float, unit: str) -> Measurement:
        """Record a figure of the node as a whole (no device, CPU or GPU, is named)."""
        measurement = Measurement(name=metric, value=value, unit=unit)
        self.measurements.append(measurement)
        return measurement

    def conclude(self, ok_message: str) -> CheckResult:
        """The check's result; its details keep every finding with its cause (`findings`),
        which the action plan (gpuaccept.actions) reads."""
        failures = list(self.failures)
        failures += [
            Cause(text, "cause", "measurement-failed")
            for text in nan_figure_failures(self.measurements)
        ]
        for number, m in enumerate(self.measurements):
            if m.verdict is Verdict.FAIL and m.reference is not None:
                where = self.where.get(number) or (
                    "cpu" if m.device_index is None else f"gpu{m.device_index}"
                )
                text = (
                    f"{where} {m.name} {m.value:.4g} {m.unit} below floor {m.reference.floor:.4g} "
                    f"({m.reference.lower_fraction:g} x {m.reference.value:g}, {m.reference_model})"
                )
                failures.append(Cause(text, "cause", "below-floor"))
        warnings = list(self.warnings)
        if self.unknown_models:
            warnings.append(
                f"no reference for {', '.join(sorted(self.unknown_models))}: performance "
                "unchecked, judged on correctness only (record one with --record-baseline)"
            )
        if failures:
            status, message = Status.FAIL, "; ".join(failures)
        elif warnings:
            status, message = Status.WARN, "; ".join(warnings)
        else:
            status, message = Status.PASS, ok_message
        return CheckResult(
            name=self.name,
            area=self.area,
            status=status,
            message=message,
            measurements=self.measurements,
            details=(
                {**self.details, "findings": finding_records(failures, warnings)}
                if failures or warnings
                else self.details
            ),
            not_judged=self.not_judged,
        )
