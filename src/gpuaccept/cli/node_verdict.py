"""`gpuaccept node-verdict`: a run's verdict as Kubernetes node labels and a taint."""

from __future__ import annotations

import shlex
from pathlib import Path

import typer


def node_verdict(
    reports: list[Path] = typer.Argument(..., help="JSON reports, one per node."),
    node: str | None = typer.Option(
        None, "--node", metavar="NAME", help="The node (default: the one the report names)."
    ),
    resume_level: str = typer.Option(
        "standard",
        "--resume-level",
        metavar="LEVEL",
        help="The level whose pass lifts the unfit taint (a quick pass below it lifts nothing).",
    ),
    apply: bool = typer.Option(
        False,
        "--apply",
        help="Change the nodes through the Kubernetes API (needs the kubernetes client) "
        "instead of printing the kubectl commands.",
    ),
) -> None:
    """Print the kubectl label/taint commands that record each node's verdict on it.

    Reads `gpuaccept accept` reports. pass on the GPUs: gpuaccept.io/verdict=pass and the
    gpuaccept.io/unfit taint removed; fail: verdict=fail, gpuaccept.io/failed=CHECKS and the
    NoSchedule taint gpuaccept.io/unfit; not judged, interrupted or CPU mode: the taint is left
    as it is. A pass below --resume-level (default standard) lifts no taint: the quick check that
    found a fault does not clear it. Of several reports of one node, the newest run is applied.
    """
    from gpuaccept.errors import InputError
    from gpuaccept.report.node_verdict import (
        apply_verdict,
        kubectl_commands,
        newest_per_node,
        node_verdict,
        tied,
    )
    from gpuaccept.report.reading import dated_in_future, load_report
    from gpuaccept.suite.selection import LEVELS

    if resume_level not in LEVELS:
        raise InputError(f"--resume-level {resume_level!r}: give one of {', '.join(LEVELS)}")
    if node is not None and len(reports) > 1:
        raise InputError("--node names one node: give one report with it")
    # every report is read and judged before any node is changed
    verdicts = []
    for path in reports:
        try:
            report = load_report(path)
            future = dated_in_future(report)
            if future is not None:  # it would stay "the newest" and overrule every real run
                typer.echo(f"# report {path}: {future}; not applied", err=True)
                continue
            verdicts.append(node_verdict(report, node, resume_level))
        except InputError as error:
            text = str(error)
            where = text if text.startswith(f"report {path}") else f"report {path}: {text}"
            raise InputError(where) from None
    if not verdicts:
        raise InputError("no report left to apply: every one is dated after now")
    for chosen, other in tied(verdicts):
        typer.echo(
            f"# {chosen.node}: two reports started at {chosen.started_at} ({chosen.verdict}, "
            f"{other.verdict}); the more cautious, {chosen.verdict}, is applied",
            err=True,
        )
    newest, superseded = newest_per_node(verdicts)
    for old in superseded:
        typer.echo(
            f"# {old.node}: a report of {old.started_at} ({old.verdict}) is superseded by a "
            "newer one, not applied",
            err=True,
        )
    for verdict in newest:
        if verdict.note:
            typer.echo(f"# {verdict.node}: {verdict.note}", err=True)
        if apply:
            apply_verdict(verdict)
            typer.echo(f"[K8S] {verdict.node}: {verdict.verdict} (labels and taint applied)")
        else:
            for command in kubectl_commands(verdict):
                typer.echo(shlex.join(command))
