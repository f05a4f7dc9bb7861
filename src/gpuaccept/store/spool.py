"""The spool: runs kept on the node while their history server cannot be reached (issue #33 §2).

A run whose PostgreSQL history is down still writes its report; its record waits here, one
JSON report per file named by the report's digest, until a later run or `gpuaccept history push`
delivers it. Delivery appends each report in its own transaction and only then removes the file:
a delivery cut short leaves the rest for the next one, and a report delivered twice (two runs
delivering at once, a crash between the commit and the removal) is stored once, as `history
import` stores a report once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from gpuaccept.errors import InputError
from gpuaccept.results import RunReport
from gpuaccept.store.history import History, report_sha256

SPOOL_ENV = "GPUACCEPT_SPOOL"


class SpoolError(InputError):
    """The spool cannot be used as asked (exit 2)."""


def spool_dir(environ: dict[str, str] | None = None) -> Path:
    """$GPUACCEPT_SPOOL, else `gpuaccept/spool` in the user's data directory (XDG)."""
    from gpuaccept.data_home import user_data_path

    return user_data_path(SPOOL_ENV, "spool", environ)


def check_spool(directory: Path | None = None) -> Path:
    """The spool, created if need be and able to take a file: checked before a run whose history
    cannot be reached, so that its record has somewhere to go."""
    from gpuaccept.output_files import OutputError, check_output_directory

    directory = directory or spool_dir()
    try:
        check_output_directory(directory, shown=f"spool {directory} (${SPOOL_ENV})")
    except OutputError as error:
        raise SpoolError(str(error)) from None
    return directory


def spool_report(report: RunReport, directory: Path | None = None) -> Path:
    """Keep `report` in the spool (written whole, by its digest: the same run spooled twice is one
    file); the file's path."""
    from gpuaccept.output_files import OutputError, write_text_atomically

    directory = check_spool(directory)
    path = directory / f"{report_sha256(report)}.json"
    try:
        write_text_atomically(path, report.model_dump_json(indent=2))
    except (OutputError, OSError) as error:
        raise SpoolError(f"spool {directory}: cannot keep the run: {error}") from None
    return path


@dataclass
class Delivery:
    """What one delivery of the spool did."""

    delivered: list[tuple[Path, int, bool]] = field(default_factory=list)  # file, run, new
    refused: list[tuple[Path, str]] = field(default_factory=list)  # file, why (left in place)
    problem: str | None = None  # the spool itself could not be read

    def lines(self) -> list[str]:
        said = [
            f"spool {path.name}: run {run_id}{'' if new else ' (already recorded)'}"
            for path, run_id, new in self.delivered
        ]
        said += [f"spool {path}: not delivered, left in place: {why}" for path, why in self.refused]
        if self.problem is not None:
            said.append(self.problem)
        return said


def pending(directory: Path | None = None) -> list[Path]:
    """The spooled reports, oldest file first; SpoolError when the spool cannot be listed."""
    directory = directory or spool_dir()
    try:
        os.lstat(directory)
    except FileNotFoundError:
        return []  # nothing was ever spooled
    except OSError as error:  # a file where a directory of its path should be, no permission
        raise SpoolError(
            f"spool {directory} (${SPOOL_ENV}): cannot be read: {error.strerror or error}"
        ) from None
    try:
        entries = [p for p in directory.iterdir() if p.name.endswith(".json")]
    except OSError as error:
        raise SpoolError(
            f"spool {directory} (${SPOOL_ENV}): cannot be read: {error.strerror or error}"
        ) from None

    def age(path: Path) -> tuple[float, str]:
        try:
            return (path.lstat().st_mtime, path.name)
        except OSError:
            return (0.0, path.name)

    return sorted(entries, key=age)


def deliver(history: History, directory: Path | None = None) -> Delivery:
    """Append every spooled report to `history`, each in its own transaction, removing its file
    once stored. A file that is not a report (or is dated after now) is left where it is and
    said; a spool that cannot be read is said, and never stops the run that delivers it."""
    from gpuaccept.report.reading import dated_in_future, load_report

    delivery = Delivery()
    try:
        files = pending(directory)
    except SpoolError as error:
        delivery.problem = str(error)
        return delivery
    for path in files:
        try:
            report = load_report(path)
        except InputError as error:
            delivery.refused.append((path, str(error).removeprefix(f"report {path}: ")))
            continue
        why = dated_in_future(report)
        if why is not None:
            delivery.refused.append((path, why))
            continue
        # a store that fails here raises: this file and the rest stay spooled
        [(run_id, new)] = history.append([(report, f"spool:{path.name}")])
        path.unlink(missing_ok=True)
        delivery.delivered.append((path, run_id, new))
    return delivery
