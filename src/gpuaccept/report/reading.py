"""Reading stored JSON reports back into the results model, with errors that name the file."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from gpuaccept.errors import InputError
from gpuaccept.results import READABLE_SCHEMA_VERSIONS, STRICT_FIGURES, RunReport

MAX_REPORT_BYTES = 256 * 1024 * 1024
# Clocks of a cluster's nodes agree within minutes (NTP); a report dated further ahead than this
# is from a clock that is wrong, and would otherwise stay "the newest" for years.
FUTURE_SKEW_SECONDS = 300.0


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
        return RunReport.model_validate(data, context={STRICT_FIGURES: True})
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise InputError(f"report {path}: invalid at {where}: {first['msg']}") from None
