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
    """Print the kubectl label/taint commands that record each report's verdict on its node.

    pass: gpuaccept.io/verdict=pass and the gpuaccept.io/unfit taint removed; fail:
    verdict=fail, gpuaccept.io/failed=CHECKS and the NoSchedule taint gpuaccept.io/unfit.
    """
    from gpuaccept.errors import InputError
    from gpuaccept.report.node_verdict import apply_verdict, kubectl_commands, node_verdict
    from gpuaccept.report.reading import load_report

    if node is not None and len(reports) > 1:
        raise InputError("--node names one node: give one report with it")
    verdicts = [node_verdict(load_report(path), node) for path in reports]
    for verdict in verdicts:
        if apply:
            apply_verdict(verdict)
            typer.echo(f"[K8S] {verdict.node}: {verdict.verdict} (labels and taint applied)")
        else:
            for command in kubectl_commands(verdict):
                typer.echo(shlex.join(command))
