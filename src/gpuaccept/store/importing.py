"""`history import` at a fleet's scale: the reports of thousands of jobs (a results directory
of HTCondor or Slurm jobs), in memory that does not grow with their number.

Every report is read and checked first, none kept; then they are stored in batches, each batch
one transaction, read again as it is stored. A malformed report or one dated after now refuses
the whole import before anything is stored. A batch that cannot be stored (a report changed
since it was checked, a database error) stores nothing of itself; the batches before it stay
stored, and the same import run again stores only the rest (a stored report is never stored
twice). Batches, not one transaction for all: a history's other writers (the nodes' own runs)
wait for one batch at a time, not for the whole import.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuaccept.errors import InputError
from gpuaccept.store.history import History

IMPORT_BATCH = 500  # reports per transaction: about 50 MB of reports in memory at a time


@dataclass(frozen=True)
class Imported:
    source: str  # the report's path as given (or found in a directory given)
    run_id: int
    new: bool  # False: the history held this report already


# What every job leaves beside its report (tasks/job-lib.sh): the environment capture, which the
# report holds too. `results/*.json` names them as well; they are skipped, and said.
CAPTURE_SUFFIX = ".env.json"


@dataclass(frozen=True)
class ReportFiles:
    reports: list[Path]
    captures: list[Path]  # *.env.json beside them: skipped


def report_files(paths: Sequence[Path]) -> ReportFiles:
    """The report files `paths` name: a file as given; a directory, the `*.json` files directly
    in it (not its subdirectories, not hidden files), in name order; environment captures
    (`*.env.json`) set apart. InputError for a directory that cannot be listed, and when no
    report is left."""
    files: list[Path] = []
    for path in paths:
        if not path.is_dir():
            files.append(path)  # load_report says what is wrong with anything else
            continue
        try:
            found = sorted(
                entry
                for entry in path.iterdir()
                if entry.suffix == ".json" and not entry.name.startswith(".") and not entry.is_dir()
            )
        except OSError as error:
            raise InputError(f"report directory {path}: cannot list it: {error.strerror}") from None
        if not found:
            raise InputError(f"report directory {path}: holds no *.json report; nothing imported")
        files += found
    captures = [path for path in files if path.name.endswith(CAPTURE_SUFFIX)]
    reports = [path for path in files if not path.name.endswith(CAPTURE_SUFFIX)]
    if not reports:
        raise InputError(
            f"no report among the {len(files)} file(s) given: only environment captures "
            f"(*{CAPTURE_SUFFIX}), which are not runs; nothing imported"
        )
    return ReportFiles(reports, captures)


def check_reports(files: Sequence[Path]) -> None:
    """Each file is a report that could be stored; InputError naming the first that is not.
    Nothing is kept: the reports are read again as they are stored."""
    from gpuaccept.report.reading import dated_in_future, load_report

    for path in files:
        why = dated_in_future(load_report(path))
        if why is not None:
            raise InputError(f"report {path}: {why}; nothing was imported")


def store_reports(
    store: History, files: Sequence[Path], batch: int = IMPORT_BATCH
) -> Iterator[Imported]:
    """Store the checked `files` (check_reports) in batches, each one transaction; each report as
    its batch is stored."""
    from gpuaccept.report.reading import load_report

    for start in range(0, len(files), batch):
        part = files[start : start + batch]
        try:
            loaded = [(load_report(path), str(path)) for path in part]
        except InputError as error:
            raise InputError(
                f"{error} (it changed after it was checked); {start} report(s) before it are "
                "stored, run the same import again to store the rest"
            ) from None
        stored = store.append(loaded)
        del loaded  # this batch's reports go before the next is read
        for (run_id, new), path in zip(stored, part, strict=True):
            yield Imported(str(path), run_id, new)
