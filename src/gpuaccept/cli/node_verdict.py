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
    as it is. Of several reports of one node, the newest run is applied.
    """
    from gpuaccept.errors import InputError
    from gpuaccept.report.node_verdict import (
        apply_verdict,
        kubectl_commands,
        newest_per_node,
        node_verdict,
    )
    from gpuaccept.report.reading import load_report

    if node is not None and len(reports) > 1:
        raise InputError("--node names one node: give one report with it")
    # every report is read and judged before any node is changed
    verdicts = []
    for path in reports:
        try:
            verdicts.append(node_verdict(load_report(path), node))
        except InputError as error:
            text = str(error)
            where = text if text.startswith(f"report {path}") else f"report {path}: {text}"
            raise InputError(where) from None
    newest, superseded = newest_per_node(verdicts)
    for old in superseded:
        typer.echo(
            f"# {old.node}: a report of {old.started_at} ({old.verdict}) is superseded by a "
            "newer one, not applied",
            err=True,
        )
    for verdict in newest:
        if apply:
            apply_verdict(verdict)
            typer.echo(f"[K8S] {verdict.node}: {verdict.verdict} (labels and taint applied)")
        else:
            for command in kubectl_commands(verdict):
                typer.echo(shlex.join(command))
