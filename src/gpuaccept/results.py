"""The one data model every writer reads: RunReport holds CheckResults holding Measurements.

Pydantic models, frozen, with units in field names; the JSON report is `RunReport` dumped as is,
and its schema (docs/report-schema.json) is generated from these classes.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from gpuaccept.actions import ActionPlan, ActionRules
from gpuaccept.verdict import HISTORY_CHECK as HISTORY_CHECK
from gpuaccept.verdict import Outcome, RunVerdict, Status, drop_check, judge_run
from gpuaccept.verdict import verdict_fitness as verdict_fitness

__all__ = [
    "REPORT_SCHEMA_VERSION",
    "CheckResult",
    "Measurement",
    "Outcome",
    "Reference",
    "RunReport",
    "RunVerdict",
    "Status",
    "Verdict",
]

# 2: the run's verdict is stored (`verdict`); version 1 reports are read, their verdict judged
# from their checks on reading (they never recorded an interruption).
REPORT_SCHEMA_VERSION = 2
READABLE_SCHEMA_VERSIONS = (1, 2)


# Clocks of a cluster's nodes agree within minutes (NTP); a report dated further ahead than this
# is from a clock that is wrong, and would otherwise stay "the newest" for years. Here, below the
# readers, the comparisons and the burn-in's checkpoint that all date a run by it.
FUTURE_SKEW_SECONDS = 300.0


def device_label(index: int | None) -> str:
    """How a figure's device is named in tables and comparisons: `gpu3`, or `cpu` for CPU twins."""
    return "cpu" if index is None else f"gpu{index}"


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    UNCHECKED = "unchecked"  # no reference: never counted as a pass


class _Frozen(BaseModel):
    # NaN and infinities are written as the strings "NaN" / "Infinity" (valid JSON that reads back
    # as the same float), never as null, which would not validate as a figure again.
    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="strings")


class Reference(_Frozen):
    """An expected figure with tolerances (ReFrame style): pass within value x [lower, upper]."""

    value: float = Field(gt=0)
    lower_fraction: float = Field(gt=0, le=1, description="fail below value x lower_fraction")
    upper_fraction: float | None = Field(
        default=None, ge=1, description="fail above value x upper_fraction (None: no ceiling)"
    )
    unit: str
    source: str = ""

    @property
    def floor(self) -> float:
        return self.value * self.lower_fraction

    def judge(self, measured: float) -> Verdict:
        if measured < self.floor:
            return Verdict.FAIL
        if self.upper_fraction is not None and measured > self.value * self.upper_fraction:
            return Verdict.FAIL
        return Verdict.PASS


STRICT_FIGURES = "strict_figures"  # validation context: refuse, never mend, a stored figure


class Measurement(_Frozen):
    """One measured figure, the reference it was judged against (if any) and the verdict."""

    name: str
    value: float
    unit: str
    # a GPU's index: bounded, so a forged 10**20 is refused, never an OverflowError in SQLite
    device_index: int | None = Field(default=None, ge=0, le=1 << 16)
    device_name: str | None = None
    reference: Reference | None = None
    reference_model: str | None = None
    verdict: Verdict = Verdict.UNCHECKED

    @field_validator("value")
    @classmethod
    def _not_infinite(cls, value: float, info: ValidationInfo) -> float:
        """No figure is infinite: no chart, median or comparison can hold one. A report read
        from a file (`STRICT_FIGURES` in the validation context) is refused for one; a figure
        measured now as infinite (a rate over no time, a loss that blew up) is a measurement
        that failed: NaN, which `nan_figure_failures` fails, never a crash of the check."""
        if not math.isinf(value):
            return value
        if info.context and info.context.get(STRICT_FIGURES):
            raise ValueError(f"a figure is finite (or NaN for a failed measurement), not {value}")
        return math.nan


def nan_figure_failures(measurements: list[Measurement]) -> list[str]:
    """A figure that came out NaN is a failed measurement, never a pass (checks and sweeps)."""
    return [
        f"{'cpu' if m.device_index is None else f'gpu{m.device_index}'} {m.name}: measured NaN "
        "(the measurement itself failed)"
        for m in measurements
        if math.isnan(m.value)
    ]


class CheckResult(_Frozen):
    name: str
    area: str
    status: Status
    message: str
    duration_seconds: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    measurements: list[Measurement] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)
    not_judged: dict[str, str] = Field(
        default_factory=dict,
        description="what this check measured but did not judge ('speed'), and why (no floor "
        "for this GPU at this configuration): the run's verdict says it beside its outcome",
    )

    @field_validator("details")
    @classmethod
    def _table_shape(cls, value: dict[str, Any]) -> dict[str, Any]:
        """A benchmark's table, when there is one, as the writers read it: `columns` a list of
        [row key, header] string pairs, `rows` a list of objects."""
        columns, rows = value.get("columns"), value.get("rows")
        if columns is not None and not (
            isinstance(columns, list)
            and all(
                isinstance(c, list | tuple) and len(c) == 2 and all(isinstance(x, str) for x in c)
                for c in columns
            )
        ):
            raise ValueError("details.columns must be a list of [key, header] string pairs")
        if rows is not None and not (
            isinstance(rows, list) and all(isinstance(row, dict) for row in rows)
        ):
            raise ValueError("details.rows must be a list of objects")
        return value


def check_line(check: CheckResult) -> str:
    """A check's line as every console and log shows it: `[AREA] STATUS name (1.2 s): message`.
    Here, beside the model, so the suite that says it as it runs and the writers share one."""
    return (
        f"[{check.area}] {check.status.value.upper()} {check.name} "
        f"({check.duration_seconds:.1f} s): {check.message}"
    )


# The environment capture's sections (record/environment.py): objects, and lists of objects.
_OBJECT_SECTIONS = frozenset(
    {"system", "python", "torch", "cuda", "pixi", "git", "container", "scheduler"}
)
_LIST_SECTIONS = frozenset({"gpus", "packages"})


class RunReport(_Frozen):
    schema_version: int = REPORT_SCHEMA_VERSION
    tool: str = "gpuaccept"
    tool_version: str
    command: str
    level: str
    device_mode: str = Field(description="'cuda' for a GPU acceptance, 'cpu' for CPU mode")
    started_at: str = Field(description="ISO 8601, UTC")
    finished_at: str
    duration_seconds: float = Field(ge=0, allow_inf_nan=False)
    checks: list[CheckResult]
    verdict: RunVerdict = Field(
        description="computed once from the checks when the run ends; every writer renders it"
    )
    environment: dict[str, Any] = Field(default_factory=dict)
    actions: ActionPlan | None = Field(
        default=None,
        description="what to do about the findings (gpuaccept.actions), planned once when the "
        "run ends; absent from reports written before it existed",
    )

    @model_validator(mode="before")
    @classmethod
    def _verdict_of_version_1(cls, data: Any) -> Any:
        """A version 1 report stored no verdict: judge it from its checks, as written then."""
        if isinstance(data, dict) and data.get("schema_version") == 1 and "verdict" not in data:
            checks = [CheckResult.model_validate(c) for c in data.get("checks") or []]
            data = {
                **data,
                "schema_version": REPORT_SCHEMA_VERSION,
                "verdict": judge_run(
                    checks,
                    kind=str(data.get("command")),
                    device_mode=str(data.get("device_mode")),
                    level=str(data.get("level")),
                ),
            }
        return data

    @model_validator(mode="after")
    def _verdict_matches_checks(self) -> RunReport:
        """The stored verdict is the one its checks give: a report that says PASS over a failed
        check (edited, or written by a broken writer) is refused, never rendered."""
        if self.schema_version != REPORT_SCHEMA_VERSION:
            raise ValueError(
                f"schema_version {self.schema_version}: this gpuaccept writes "
                f"{REPORT_SCHEMA_VERSION} and reads {READABLE_SCHEMA_VERSIONS}"
            )
        stored = self.verdict
        expected = judge_run(
            self.checks,
            kind=self.command,
            device_mode=self.device_mode,
            level=self.level,
            interrupted_by=stored.interrupted_by,
            interrupted_check=stored.interrupted_check,
        )
        if stored != expected:
            differ = [
                f"{field}={getattr(stored, field)!r} (its checks give {getattr(expected, field)!r})"
                for field in type(stored).model_fields
                if getattr(stored, field) != getattr(expected, field)
            ]
            raise ValueError(
                f"the stored verdict is not the one its checks give: {'; '.join(differ)}"
            )
        return self

    @property
    def action_plan(self) -> ActionPlan:
        """`actions.plan_of(report)`, kept while callers move to it: the stored plan, or the
        built-in tables' plan of a report written before plans were stored."""
        from gpuaccept.actions import plan_of

        return plan_of(self)

    @field_validator("started_at", "finished_at")
    @classmethod
    def _iso_time(cls, value: str) -> str:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an ISO 8601 time") from None
        if moment.tzinfo is None:
            raise ValueError(f"{value!r} has no time zone (reports are in UTC)")
        return value

    @field_validator("environment")
    @classmethod
    def _environment_shape(cls, value: dict[str, Any]) -> dict[str, Any]:
        """The capture's shape as every writer reads it: its sections are objects, `gpus` and
        `packages` lists of objects (or null). A report that validates must also render."""
        for key, section in value.items():
            if key in _LIST_SECTIONS:
                if section is not None and not (
                    isinstance(section, list) and all(isinstance(item, dict) for item in section)
                ):
                    raise ValueError(f"environment.{key} must be a list of objects or null")
            elif section is not None and not isinstance(section, dict | str | int | float | bool):
                raise ValueError(f"environment.{key} must be an object, a value or null")
            elif key in _OBJECT_SECTIONS and section is not None and not isinstance(section, dict):
                raise ValueError(f"environment.{key} must be an object or null")
        return value

    @classmethod
    def completed(
        cls,
        *,
        command: str,
        level: str,
        device_mode: str,
        started: datetime,
        monotonic_start: float,
        checks: list[CheckResult],
        environment: dict[str, Any],
        interrupted_by: int | None = None,
        interrupted_check: str | None = None,
        rules: ActionRules | None = None,
    ) -> RunReport:
        """The report of a run that began at `started` (wall) / `monotonic_start` and ends now,
        with its verdict and its actions (planned by `rules`, else the built-in tables): judged
        here, once, and stored."""
        from gpuaccept import __version__
        from gpuaccept.actions import plan_actions

        return cls(
            tool_version=__version__,
            command=command,
            level=level,
            device_mode=device_mode,
            started_at=started.isoformat(),
            finished_at=datetime.now(UTC).isoformat(),
            duration_seconds=time.monotonic() - monotonic_start,
            checks=checks,
            verdict=judge_run(
                checks,
                kind=command,
                device_mode=device_mode,
                level=level,
                interrupted_by=interrupted_by,
                interrupted_check=interrupted_check,
            ),
            environment=environment,
            actions=plan_actions(checks, rules),
        )

    @property
    def captured_gpus(self) -> list[dict[str, Any]]:
        """The GPUs the run's capture lists (UUID, PCI address, serial...): what ties a finding
        that names a PCI address (a kernel-log XID) to the GPU's UUID."""
        gpus = self.environment.get("gpus")
        return [g for g in gpus if isinstance(g, dict)] if isinstance(gpus, list) else []

    @property
    def out_of_service_uuids(self) -> list[str]:
        """`actions.out_of_service_uuids(report)`, kept while callers move to it."""
        from gpuaccept.actions import out_of_service_uuids

        return out_of_service_uuids(self)

    @property
    def hostname(self) -> str | None:
        """The node the run captured, if its environment says."""
        system = self.environment.get("system")
        host = system.get("hostname") if isinstance(system, dict) else None
        return str(host) if host is not None else None


def stored_drop(report: RunReport) -> CheckResult | None:
    """The run's own `history` check when it found the node slower than it was (WARN or FAIL)."""
    return drop_check(report.checks)
