"""`gpuaccept node-verdict`: a run's verdict as Kubernetes node labels and a taint, with the
guards `act slurm` has (issue #31 §2) when the cluster's state is given.

The options and the exit; what is checked, decided, done and said is commands.node_verdict's.
"""

from __future__ import annotations

from pathlib import Path

import typer

from gpuaccept.cli.options import (
    ACT_PROMETHEUS,
    ACT_RECORD,
    ACT_STATE,
    BREAKER_MINUTES,
    BREAKER_SHARE,
    DEBOUNCE,
    DEBOUNCE_HOURS,
    INSPECT_AFTER,
    REPLACE_AFTER,
    REPLACE_DAYS,
    RESUME_LEVEL,
    request_from,
)
from gpuaccept.cli.render import CONSOLE


def node_verdict(
    reports: list[Path] = typer.Argument(
        ..., help="JSON reports, one or more per node (a node's older ones are its past)."
    ),
    node: str | None = typer.Option(
        None, "--node", metavar="NAME", help="The node (default: the one the report names)."
    ),
    apply: bool = typer.Option(
        False,
        "--apply",
        help="Read the nodes from and change them through the Kubernetes API (needs the "
        "kubernetes client) instead of printing the kubectl commands.",
    ),
    cluster: Path | None = typer.Option(
        None,
        "--cluster",
        metavar="FILE",
        help="The cluster's nodes as `kubectl get nodes -o json` prints them: the guards "
        "decide against them and the guarded commands are printed.",
    ),
    act: str | None = typer.Option(
        None,
        "--act",
        metavar="MODE",
        help="report: the verdict's commands, no guards, nothing read (the default without "
        "--cluster or --apply); shadow: decide with the guards, say what would be done, change "
        "nothing; enforce: the guarded change (the default with --cluster or --apply).",
    ),
    pool: str | None = typer.Option(
        None,
        "--pool",
        metavar="KEY=VALUE[,...]",
        help="The nodes the breaker counts: those with these labels (default: every node).",
    ),
    resume_level: str = RESUME_LEVEL,
    breaker_share: float = BREAKER_SHARE,
    breaker_minutes: float = BREAKER_MINUTES,
    debounce: int = DEBOUNCE,
    debounce_hours: float = DEBOUNCE_HOURS,
    replace_after: int = REPLACE_AFTER,
    replace_days: float = REPLACE_DAYS,
    inspect_after: int = INSPECT_AFTER,
    state: Path | None = ACT_STATE,
    record: Path | None = ACT_RECORD,
    prometheus: Path | None = ACT_PROMETHEUS,
) -> None:
    """Record each node's verdict on it as labels and a taint (kubectl commands, or --apply).

    Reads `gpuaccept accept` reports. pass on the GPUs: gpuaccept.io/verdict=pass and the
    gpuaccept.io/unfit taint removed; fail: verdict=fail, gpuaccept.io/failed=CHECKS,
    gpuaccept.io/action=ACTION and the NoSchedule taint gpuaccept.io/unfit; not judged,
    interrupted or CPU mode: the taint is left as it is. A pass below --resume-level (default
    standard) lifts no taint. Of several reports of one node, the newest run is applied and the
    older ones are its past.

    With the cluster's state (--cluster FILE or --apply) the guards of `act slurm` decide the
    taint: a soft failure (recommended: rerun) taints only after --debounce runs in a row; no
    taint when two other nodes on the same software stack were tainted for the same checks in
    the last --breaker-minutes (a regression of the stack) or when gpuaccept tainted
    --breaker-share of the pool in that time (the breaker); only gpuaccept's own taint is
    lifted; a cordon is never lifted, and a node cordoned or tainted NoSchedule/NoExecute by
    anyone else is never tainted (refused, guard not-ours). A refusal by the breaker trips it
    until a person resets it (`gpuaccept act breaker reset`, --state); a regression found is
    held until `gpuaccept act regression clear`. The taint's reason and time are kept in the
    annotations gpuaccept.io/reason and gpuaccept.io/tainted-at. Exit: 0; 2 a wrong input,
    nothing changed; 3 the Kubernetes API missing or not answering; 4 a guard refused a taint.
    """
    options = dict(locals())  # first: the options as parsed
    from gpuaccept.commands.act import Guarding
    from gpuaccept.commands.node_verdict import NodeVerdictRequest, run_node_verdict

    request = request_from(NodeVerdictRequest, options, guarding=Guarding)
    result = run_node_verdict(request, CONSOLE)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
