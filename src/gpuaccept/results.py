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

from pydantic import BaseModel, ConfigDict, Field, field_validator

REPORT_SCHEMA_VERSION = 1


def device_label(index: int | None) -> str:
    """How a figure's device is named in tables and comparisons: `gpu3`, or `cpu` for CPU twins."""
    return "cpu" if index is None else f"gpu{index}"


class Status(StrEnum):
    PASS = "pass"
    WARN = "warn"  # passed, with something an operator should look at
    FAIL = "fail"  # the node is not fit: a figure below its reference, a wrong result
    ERROR = "error"  # the check itself could not complete (exception, timeout, crash)
    SKIP = "skip"  # not run, with the reason in the message

    @property
    def is_failure(self) -> bool:
        return self in (Status.FAIL, Status.ERROR)


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


class Measurement(_Frozen):
    """One measured figure, the reference it was judged against (if any) and the verdict."""

    name: str
    value: float
    unit: str
    device_index: int | None = None
    device_name: str | None = None
    reference: Reference | None = None
    reference_model: str | None = None
    verdict: Verdict = Verdict.UNCHECKED


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
    duration_seconds: float = 0.0
    measurements: list[Measurement] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)

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
    duration_seconds: float
    checks: list[CheckResult]
    environment: dict[str, Any] = Field(default_factory=dict)

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
    ) -> RunReport:
        """The report of a run that began at `started` (wall) / `monotonic_start` and ends now."""
        from gpuaccept import __version__

        return cls(
            tool_version=__version__,
            command=command,
            level=level,
            device_mode=device_mode,
            started_at=started.isoformat(),
            finished_at=datetime.now(UTC).isoformat(),
            duration_seconds=time.monotonic() - monotonic_start,
            checks=checks,
            environment=environment,
        )

    @property
    def hostname(self) -> str | None:
        """The node the run captured, if its environment says."""
        system = self.environment.get("system")
        host = system.get("hostname") if isinstance(system, dict) else None
        return str(host) if host is not None else None

    @property
    def failed_checks(self) -> list[str]:
        return [check.name for check in self.checks if check.status.is_failure]

    @property
    def passed(self) -> bool:
        return not self.failed_checks

    @property
    def judged(self) -> bool:
        """False when every check was skipped: nothing was judged, which is not a pass."""
        return any(check.status is not Status.SKIP for check in self.checks)

    @property
    def verdict(self) -> str:
        """'pass', 'fail', or 'not judged' (every check skipped)."""
        if not self.passed:
            return "fail"
        return "pass" if self.judged else "not judged"
