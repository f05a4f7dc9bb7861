"""A training outcome as the one results model: a CheckResult judged against --target-accuracy."""

from __future__ import annotations

import math
from dataclasses import asdict

from gpuaccept.mnist.data import MnistData
from gpuaccept.mnist.train import TrainConfig, TrainOutcome
from gpuaccept.results import CheckResult, Measurement, Status


def training_check(
    outcome: TrainOutcome,
    config: TrainConfig,
    data: MnistData,
    target_accuracy: float | None,
    duration_seconds: float,
) -> CheckResult:
    """PASS when the final test accuracy reaches the target (or no target was set), else FAIL."""
    final = outcome.records[-1]
    accuracy = outcome.final_accuracy  # measured on the final model, not read from a record
    run_records = [r for r in outcome.records if r.epoch > outcome.resumed_from_epoch]
    throughput = (
        sum(r.images_per_second for r in run_records) / len(run_records) if run_records else None
    )
    measurements = [
        Measurement(name="test_accuracy", value=accuracy * 100, unit="%"),
        Measurement(name="final_loss", value=final.loss, unit="nats"),
        Measurement(name="train_elapsed", value=final.elapsed_seconds, unit="s"),
    ]
    if throughput is not None:
        measurements.insert(
            1, Measurement(name="images_per_second", value=throughput, unit="img/s")
        )
    reached = [r for r in outcome.records if target_accuracy and r.test_accuracy >= target_accuracy]
    if reached:
        measurements.append(
            Measurement(name="time_to_target", value=reached[0].elapsed_seconds, unit="s")
        )
    summary = (
        f"test accuracy {accuracy:.2%} after {final.epoch} epoch{'' if final.epoch == 1 else 's'}, "
        f"{outcome.step_mode.split(' (')[0]} steps"
    )
    if abs(accuracy - final.test_accuracy) > 0.005:
        # what the records claim and what the model scores differ: a checkpoint's records that
        # nothing here produced; the measured figure decides, and the difference is said
        summary += f" (the records claimed {final.test_accuracy:.2%})"
    diverged = [r for r in outcome.records if not math.isfinite(r.loss)]
    if diverged:
        # a loss that is NaN or infinite means the model learned nothing trustworthy, whatever
        # the accuracy (and with no target, a pass here would be a lie)
        status, message = (
            Status.FAIL,
            f"{summary}: training diverged (loss {diverged[0].loss} at epoch {diverged[0].epoch})",
        )
    elif target_accuracy is None:
        status, message = (
            Status.PASS,
            f"{summary}; no --target-accuracy: the accuracy was not gated",
        )
    elif accuracy >= target_accuracy:
        first = (
            f" at epoch {reached[0].epoch} ({reached[0].elapsed_seconds:.1f} s)" if reached else ""
        )
        status, message = Status.PASS, f"{summary}, target {target_accuracy:.2%} reached{first}"
    else:
        status, message = Status.FAIL, f"{summary}, below the target {target_accuracy:.2%}"
    return CheckResult(
        name="mnist",
        area="TRAIN",
        status=status,
        message=message,
        duration_seconds=duration_seconds,
        measurements=measurements,
        details={
            "recipe": asdict(config.recipe),
            "epochs": config.epochs,
            "seed": config.seed,
            "bf16": config.bf16,
            "channels_last": config.channels_last,
            "target_accuracy": target_accuracy,
            "data_source": data.source,
            "data_sha256": data.sha256,
            "train_images": len(data.train_labels),
            "test_images": len(data.test_labels),
            "resumed_from_epoch": outcome.resumed_from_epoch,
            "step_mode": outcome.step_mode,
            "epochs_run": [asdict(record) for record in outcome.records],
        },
    )
