"""train: a small model on synthetic learnable data must learn on every device."""

from __future__ import annotations

from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings, measurement_targets, torch_device
from gpuaccept.measure.training_smoke import SmokeSpec, build_model, train_smoke
from gpuaccept.results import CheckResult


def smoke_spec(context: CheckContext, epochs: int) -> SmokeSpec:
    settings = context.settings
    return SmokeSpec(
        samples=settings.smoke_samples, epochs=epochs, batch_size=settings.smoke_batch_size
    )


def run(context: CheckContext) -> CheckResult:
    limit = context.settings.smoke_max_loss_ratio
    spec = smoke_spec(context, context.settings.smoke_epochs)
    findings = Findings("train", "TRAIN")
    findings.details = {"max_loss_ratio": limit, "epochs": spec.epochs, "samples": spec.samples}
    for target in measurement_targets(context):
        device = torch_device(target)
        outcome = train_smoke(build_model(spec, device), spec, device)
        findings.record(target, "loss_final_over_initial", outcome.loss_ratio, "ratio")
        findings.record(
            target,
            "train_samples_per_second",
            spec.samples * spec.epochs / outcome.seconds,
            "samples/s",
        )
        if not outcome.loss_ratio < limit:
            findings.failures.append(
                f"{target.label}: loss fell only to {outcome.loss_ratio:.2f} of its start "
                f"({outcome.initial_loss:.3f} -> {outcome.final_loss:.3f}) in {outcome.steps} "
                f"steps; must fall below {limit:g}"
            )
    return findings.conclude(f"loss fell below {limit:g} of its start in {spec.epochs} epoch(s)")
