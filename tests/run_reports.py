"""Building RunReports for history and report tests: real model objects, chosen figures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gpuaccept.results import CheckResult, Measurement, Reference, RunReport, Status
from gpuaccept.verdict import judge_run

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)


def judged_report(
    *, interrupted_by: int | None = None, interrupted_check: str | None = None, **fields: Any
) -> RunReport:
    """A RunReport of these fields with its verdict judged from its checks, as a run stores it."""
    fields.setdefault("tool_version", "0.1.0")
    fields["verdict"] = judge_run(
        fields["checks"],
        kind=fields["command"],
        device_mode=fields["device_mode"],
        level=fields["level"],
        interrupted_by=interrupted_by,
        interrupted_check=interrupted_check,
    )
    return RunReport(**fields)


def rejudged(report: RunReport, **update: Any) -> RunReport:
    """`report` with `update` applied and its verdict judged again (model_copy would keep the
    old verdict, which validation then refuses)."""
    fields = {**dict(report), **update}
    fields.pop("verdict")
    return judged_report(**fields)


def gpu_report(
    host: str,
    tflops: list[float],
    *,
    model: str = "NVIDIA H100 80GB HBM3",
    hours: float = 0.0,
    passed: bool = True,
    command: str = "accept",
    train_seconds: float = 12.0,
    extra_environment: dict[str, Any] | None = None,
) -> RunReport:
    """An accept run on `host` with one bf16 matmul figure per GPU (index = list position)."""
    started = T0 + timedelta(hours=hours)
    reference = Reference(value=800.0, lower_fraction=0.8, unit="TFLOPS", source="test")
    measurements = [
        Measurement(
            name="matmul_bf16_tflops",
            value=value,
            unit="TFLOPS",
            device_index=index,
            device_name=model,
            reference=reference,
            reference_model=model,
            verdict=reference.judge(value),
        )
        for index, value in enumerate(tflops)
    ]
    checks = [
        CheckResult(
            name="compute",
            area="COMPUTE",
            status=Status.PASS if passed else Status.FAIL,
            message="ok" if passed else "gpu0 below floor",
            duration_seconds=1.5,
            measurements=measurements,
        ),
        CheckResult(
            name="train",
            area="TRAIN",
            status=Status.PASS,
            message="ok",
            measurements=[Measurement(name="train_elapsed", value=train_seconds, unit="s")],
        ),
    ]
    environment: dict[str, Any] = {
        "system": {"hostname": host},
        "gpus": [
            {"index": i, "name": model, "uuid": f"GPU-{host}-{i}"} for i in range(len(tflops))
        ],
        **(extra_environment or {}),
    }
    return judged_report(
        tool_version="0.1.0",
        command=command,
        level="standard",
        device_mode="cuda",
        started_at=started.isoformat(),
        finished_at=(started + timedelta(minutes=3)).isoformat(),
        duration_seconds=180.0,
        checks=checks,
        environment=environment,
    )


def soft_failure(
    node: str, hours: float, passed: bool = False, check: str = "compute", **environment: Any
) -> RunReport:
    """An accept run of `node` `hours` after T0 (standard when it passes, quick when it fails) whose
    failure is soft: `check` below its floor, the finding's cause `below-floor`, so its
    recommended action is a rerun."""
    report = gpu_report(
        node,
        [790.0 if passed else 500.0],
        passed=passed,
        hours=hours,
        extra_environment=environment,
    )
    if passed:
        return report
    checks = [
        c.model_copy(
            update={
                "name": check,
                "details": {
                    "findings": [
                        {
                            "status": "fail",
                            "text": "gpu0 matmul_bf16_tflops 500 TFLOPS below floor 640",
                            "kind": "cause",
                            "code": "below-floor",
                            "gpu": None,
                        }
                    ]
                },
            }
        )
        if c.name == "compute"
        else c
        for c in report.checks
    ]
    return rejudged(report, checks=checks, level="quick")


def measurement_count(report: RunReport) -> int:
    return sum(len(check.measurements) for check in report.checks)


def history_with(path: Path, *reports: RunReport) -> Path:
    """A history database at `path` holding `reports` (imported as a test would)."""
    from gpuaccept.store.history import History

    with History.open(path) as history:
        history.append([(report, "test") for report in reports])
    return path
