"""How many runs in a row a node has failed (issue #31 §2, the debounce): read from the node's
earlier accept reports, the files the health check leaves in its results directory, so that no
store beside the reports and Slurm's own state is needed.

A run that judged nothing is passed over; a pass, or a failure of other checks, ends the count.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from gpuaccept.act.offenders import DEFAULT_INSPECT, Offence, offences
from gpuaccept.actions import Action, most_severe
from gpuaccept.errors import InputError
from gpuaccept.results import RunReport
from gpuaccept.verdict import ACCEPT

# The newest files looked at: an hourly health check leaves 24 a day, 192 is eight days (the
# repeat offenders' week and a day); more would make act's cost grow with the directory, not
# the window.
EARLIER_FILES_READ = 192
# accept reports as `--report-dir` names them (report.json_report.report_filename); the other
# files of a results directory (burn-in and benchmark reports, anything else) are not read
REPORT_PREFIX = "gpuaccept-accept-"


def consecutive_failures(report: RunReport, earlier: Iterable[RunReport], hours: float) -> int:
    """The failing runs of the node just before `report` within `hours`, each sharing a failed
    check with it (another node's runs among `earlier` are not its)."""
    from gpuaccept.report.node_verdict import fitness, node_of

    start = datetime.fromisoformat(report.started_at)
    since = start - timedelta(hours=hours)
    this = node_of(report)
    runs = sorted(
        (
            run
            for run in earlier
            if run.verdict.kind == ACCEPT
            and node_of(run) == this
            and since <= datetime.fromisoformat(run.started_at) < start
        ),
        key=lambda run: datetime.fromisoformat(run.started_at),
        reverse=True,
    )
    failed = set(report.verdict.failed_checks)
    count = 0
    for run in runs:
        if fitness(run) == "not-judged":
            continue
        # a pass has no failed check: it ends the count as another check's failure does
        if not failed & set(run.verdict.failed_checks):
            break
        count += 1
    return count


def earlier_reports(
    directory: Path,
    node: str,
    this: Path,
    limit: int = EARLIER_FILES_READ,
    gpus: frozenset[str] = frozenset(),
) -> tuple[list[RunReport], list[str]]:
    """The accept reports of `node`, and of any host where one of the GPUs `gpus` (UUIDs) ran (a
    GPU moved between hosts is followed), among the newest `limit` regular
    `gpuaccept-accept-*.json` files of `directory` (this report left out), and what could not be
    read, one line each: a damaged neighbour is said, never a reason to act differently on this
    node."""
    from gpuaccept.report.node_verdict import node_of
    from gpuaccept.report.reading import load_report

    try:
        entries = [
            (entry.stat().st_mtime, entry)
            for entry in directory.iterdir()
            if entry.name.startswith(REPORT_PREFIX)
            and entry.suffix == ".json"
            and entry.is_file()
            and not entry.is_symlink()
        ]
    except OSError as error:
        raise InputError(f"--earlier {directory}: cannot list it: {error.strerror}") from None
    itself = this.resolve()
    chosen = sorted((e for e in entries if e[1].resolve() != itself), reverse=True)
    reports, unreadable = [], []
    for _, path in chosen[:limit]:
        try:
            report = load_report(path)
        except InputError as error:
            unreadable.append(str(error))
            continue
        if report.verdict.kind == ACCEPT and (node_of(report) == node or gpus & _uuids(report)):
            reports.append(report)
    return reports, unreadable


def _uuids(report: RunReport) -> set[str]:
    return {
        str(g["uuid"])
        for g in report.environment.get("gpus") or []
        if isinstance(g, dict) and g.get("uuid")
    }


def gpu_uuids(report: RunReport) -> frozenset[str]:
    """The UUIDs of the GPUs a run saw (act follows them to other hosts' reports)."""
    return frozenset(_uuids(report))


@dataclass(frozen=True)
class NodePast:
    """What a node's earlier runs say of its failure now: how many failed just before it (the
    debounce counts them) and the offences that make it a repeat offender."""

    repeats: int = 0
    offences: tuple[Offence, ...] = ()

    def action(self, recommended: str) -> str:
        """The action to say in the drain: escalated by the offences (a repair that did not hold
        is not tried once more: inspection, then replacement), never below what the report
        recommends."""
        steps = [Action(recommended)]
        for offence in self.offences:
            steps.append(Action.REPLACE if offence.escalation == "replace" else Action.DRAIN)
        return most_severe(steps).value


def node_past(
    report: RunReport,
    earlier: list[RunReport],
    debounce_hours: float,
    replace_after: int,
    replace_days: float,
    inspect_after: int = DEFAULT_INSPECT,
) -> NodePast:
    """The node's past as of a failing `report` (`earlier`: its own runs and its GPUs' on other
    hosts); `replace_after` and `inspect_after` 0 look for no offender."""
    found = offences(report, earlier, replace_after, replace_days, inspect_after)
    return NodePast(consecutive_failures(report, earlier, debounce_hours), tuple(found))
