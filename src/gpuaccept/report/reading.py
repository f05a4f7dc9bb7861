"""Reading stored JSON reports back into the results model, with errors that name the file.

Every report gpuaccept reads from outside (a file, the history's stored text) goes through
`validated_report`: the model validates its fields, and the reader holds the stored action plan
to the one its checks give (issue #51 §2: the report validates its fields; planning actions is
the caller's job, and a reader is the caller that must refuse an edited plan).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import InitErrorDetails

from gpuaccept.errors import InputError
from gpuaccept.results import FUTURE_SKEW_SECONDS as FUTURE_SKEW_SECONDS
from gpuaccept.results import READABLE_SCHEMA_VERSIONS, STRICT_FIGURES, RunReport

MAX_REPORT_BYTES = 256 * 1024 * 1024


def edited_plan(report: RunReport) -> str | None:
    """Why the report's stored actions cannot be trusted, or None. Actions planned by this
    gpuaccept's own tables are the ones its checks give now: a report whose `replace` was
    edited into `none` is refused. A site's tables are not in the report: their plan is held to
    its shape (the node's action the most severe) by the model alone."""
    from gpuaccept.actions import builtin_rules, plan_actions

    plan = report.actions
    if plan is not None and plan.rules == builtin_rules().label:
        expected = plan_actions(report.checks)
        if plan != expected:
            return (
                f"the stored actions are not the ones its checks give: {plan.action.value!r}"
                f" (its checks give {expected.action.value!r})"
                if plan.action is not expected.action
                else "the stored actions are not the ones its checks give"
            )
    return None


def validated_report(
    data: str | bytes | dict[str, Any], context: dict[str, Any] | None = None
) -> RunReport:
    """A stored report (JSON text, or the object it decodes to) as the model, its stored plan
    held to its checks. Every fault is pydantic's ValidationError, an edited plan's too (at the
    top level, as the model's own validators say theirs), so each reader says it as it says any
    other fault of the report."""
    if isinstance(data, dict):
        report = RunReport.model_validate(data, context=context)
    else:
        report = RunReport.model_validate_json(data, context=context)
    fault = edited_plan(report)
    if fault is not None:
        error: InitErrorDetails = {
            "type": "value_error",
            "loc": (),
            "input": data,
            "ctx": {"error": ValueError(fault)},
        }
        raise ValidationError.from_exception_data(RunReport.__name__, [error])
    return report


def dated_in_future(report: RunReport, now: float | None = None) -> str | None:
    """Why `report` cannot be trusted as of `now` (its start is after now, beyond the skew);
    None when its date is possible."""
    import time
    from datetime import datetime

    now = time.time() if now is None else now
    started = datetime.fromisoformat(report.started_at).timestamp()
    if started > now + FUTURE_SKEW_SECONDS:
        return f"dated {report.started_at}, after now: its clock is ahead"
    return None


def load_report(path: Path) -> RunReport:
    """A RunReport from a gpuaccept JSON report; InputError naming the file otherwise."""
    from gpuaccept.input_files import refuse_special_file

    refuse_special_file(path, "report")
    try:
        size = path.stat().st_size
        if path.is_dir():
            raise InputError(f"report {path}: is a directory")
        if size > MAX_REPORT_BYTES:
            raise InputError(f"report {path}: {size} bytes, larger than any gpuaccept report")
        raw = path.read_bytes()
    except OSError as error:
        raise InputError(f"report {path}: cannot read: {error.strerror}") from None
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"report {path}: not JSON ({error})") from None
    except RecursionError:
        raise InputError(f"report {path}: nested too deeply to be a gpuaccept report") from None
    try:
        # "\ud800" escapes decode to lone surrogates, which no writer can encode later
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(
            f"report {path}: holds text that is not valid Unicode (a lone surrogate escape)"
        ) from None
    except RecursionError:
        raise InputError(f"report {path}: nested too deeply to be a gpuaccept report") from None
    if not isinstance(data, dict) or data.get("tool") != "gpuaccept":
        raise InputError(f'report {path}: not a gpuaccept report (no "tool": "gpuaccept")')
    version = data.get("schema_version")
    if version not in READABLE_SCHEMA_VERSIONS or isinstance(version, bool):
        raise InputError(
            f"report {path}: schema version {version!r}, this gpuaccept reads "
            f"{', '.join(map(str, READABLE_SCHEMA_VERSIONS))}"
        )
    try:
        return validated_report(data, context={STRICT_FIGURES: True})
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise InputError(f"report {path}: invalid at {where}: {first['msg']}") from None
