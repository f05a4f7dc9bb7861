"""`gpuaccept node-verdict`: a run's verdict as Kubernetes node labels and a taint, with the
guards `act slurm` has (issue #31 §2) when the cluster's state is given."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpuaccept.cli.act import (
    BREAKER_MINUTES,
    BREAKER_SHARE,
    DEBOUNCE,
    DEBOUNCE_HOURS,
    INSPECT_AFTER,
    PROMETHEUS,
    RECORD,
    REFUSED_EXIT,
    REPLACE_AFTER,
    REPLACE_DAYS,
    RESUME_LEVEL,
    STATE,
    check_outputs,
    checked_guard,
    state_path,
)

if TYPE_CHECKING:
    from gpuaccept.act.kubernetes import KubeAction
    from gpuaccept.report.node_verdict import NodeVerdict
    from gpuaccept.results import RunReport


def _selector(text: str | None) -> dict[str, str] | None:
    """`KEY=VALUE[,KEY=VALUE]` as a map; InputError on anything else."""
    from gpuaccept.errors import InputError

    if text is None:
        return None
    pairs = [part.partition("=") for part in text.split(",")]
    if not all(key.strip() and sep for key, sep, _ in pairs):
        raise InputError(f"--pool {text!r}: give labels as KEY=VALUE[,KEY=VALUE]")
    return {key.strip(): value.strip() for key, _, value in pairs}


def _read(
    reports: list[Path], node: str | None, resume_level: str
) -> list[tuple[NodeVerdict, RunReport]]:
    """Every report read and judged before any node is changed (a report dated in the future
    is said and left out: it would stay "the newest" and overrule every real run)."""
    from gpuaccept.errors import InputError
    from gpuaccept.report.node_verdict import node_of, node_verdict
    from gpuaccept.report.reading import dated_in_future, load_report

    runs = []
    for path in reports:
        try:
            report = load_report(path)
            future = dated_in_future(report)
            if future is not None:
                typer.echo(f"# report {path}: {future}; not applied", err=True)
                continue
            runs.append((node_verdict(report, node, resume_level), report))
        except InputError as error:
            text = str(error)
            where = text if text.startswith(f"report {path}") else f"report {path}: {text}"
            raise InputError(where) from None
    if not runs:
        raise InputError("no report left to apply: every one is dated after now")
    named = sorted({str(node_of(report)) for _, report in runs})
    if node is not None and len(named) > 1:
        raise InputError(
            f"--node {node}: the reports are of {len(named)} nodes ({', '.join(named[:3])}): "
            "give --node with one node's reports"
        )
    return runs


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
    state: Path | None = STATE,
    record: Path | None = RECORD,
    prometheus: Path | None = PROMETHEUS,
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
    from datetime import UTC, datetime

    from gpuaccept.errors import InputError
    from gpuaccept.report.node_verdict import kubectl_commands, newest_per_node, tied

    stated = apply or cluster is not None
    mode = act or ("enforce" if stated else "report")
    guard = checked_guard(
        mode, resume_level, breaker_share, breaker_minutes, debounce, debounce_hours, replace_days
    )
    if apply and cluster is not None:
        raise InputError("--apply reads the cluster from the API: give it or --cluster, not both")
    if mode == "report" and stated:
        raise InputError(
            "--act report reads no cluster and changes nothing: drop --cluster/--apply, or "
            "give --act shadow"
        )
    if mode != "report" and not stated:
        raise InputError(
            f"--act {mode} decides against the cluster's nodes: give --cluster FILE "
            "(`kubectl get nodes -o json`) or --apply"
        )
    selector = _selector(pool)
    check_outputs(record, prometheus)
    records = state_path(state) if mode != "report" else None
    runs = _read(reports, node, guard.resume_level)
    verdicts = [verdict for verdict, _ in runs]
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
    if mode == "report":
        for verdict in newest:
            if verdict.note:
                typer.echo(f"# {verdict.node}: {verdict.note}", err=True)
            for command in kubectl_commands(verdict):
                typer.echo(shlex.join(command))
        _write(runs, newest, None, mode, record, prometheus)
        return
    from contextlib import nullcontext

    from gpuaccept.act.kubernetes import decide_round, read_cluster_api, read_cluster_file
    from gpuaccept.act.ledger import load_ledger, lock_ledger, save_ledger

    assert records is not None  # not report mode
    with lock_ledger(records) if mode == "enforce" else nullcontext():
        ledger = load_ledger(records)
        nodes = read_cluster_file(cluster) if cluster is not None else read_cluster_api()
        decided, kept = decide_round(
            runs,
            newest,
            nodes,
            datetime.now(UTC),
            guard,
            selector,
            replace_after,
            replace_days,
            ledger,
            inspect_after,
        )
        refused = _carry_out(decided, mode, apply)
        if mode == "enforce" and kept != ledger:
            save_ledger(records, kept)
    _write(runs, newest, decided, mode, record, prometheus)
    if refused:
        raise typer.Exit(REFUSED_EXIT)


def _carry_out(decided: list[KubeAction], mode: str, apply: bool) -> bool:
    """Say and make (or print) each change; whether a guard refused a taint of a failing node
    that stays in service (the breaker, the regression rule)."""
    from gpuaccept.act.kubernetes import apply_verdict, regressions
    from gpuaccept.report.node_verdict import kubectl_commands

    refused = False
    for stack, names in regressions(decided).items():
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        typer.echo(
            f"node-verdict: a regression of the software stack {stack}: {len(names)} node(s) "
            f"failed alike ({shown}), none of them tainted for it; compare the stack with the "
            "last one that passed",
            err=True,
        )
    for done in decided:
        name, decision = done.change.node, done.decision
        for offence in done.offences:
            typer.echo(f"# {name}: {offence.said}", err=True)
        if decision.action == "refused":
            refused = refused or decision.guard != "not-ours"
            # a regression is said once above; each node's own line is a note
            head = "#" if decision.regression else "node-verdict:"
            typer.echo(f"{head} {name}: {decision.why}", err=True)
        if mode == "shadow":
            would = {"drain": "would taint", "resume": "would lift the taint"}
            said = would.get(decision.action)
            line = f"{said}: {decision.why}" if said else decision.why
            typer.echo(f"[K8S] shadow: {name}: {line} (nothing changed: --act shadow)")
        elif apply:
            apply_verdict(done.change)
            typer.echo(f"[K8S] {name}: {decision.why}")
        else:
            if decision.action != "refused":  # said above
                typer.echo(f"# {name}: {decision.why}", err=True)
            for command in kubectl_commands(done.change):
                typer.echo(shlex.join(command))
    return refused


def _write(
    runs: list[tuple[NodeVerdict, RunReport]],
    newest: list[NodeVerdict],
    decided: list[KubeAction] | None,
    mode: str,
    record: Path | None,
    prometheus: Path | None,
) -> None:
    """The round's decisions in the record and the metrics (in report mode: none decided)."""
    from datetime import datetime

    from gpuaccept.act.policy import Decision
    from gpuaccept.act.record import acted, write_outputs

    if record is None and prometheus is None:
        return
    report_of = {id(verdict): report for verdict, report in runs}
    done = []
    for index, verdict in enumerate(newest):
        report = report_of[id(verdict)]
        if decided is None:
            decision = Decision("none", verdict.node, "nothing decided: --act report")
            action = report.action_plan.action.value
        else:
            decision = decided[index].decision
            action = decided[index].change.labels.get("gpuaccept.io/action") or "none"
        done.append(acted(verdict.node, verdict.verdict, report.level, action, decision))
    write_outputs(done, "node-verdict", mode, datetime.now().astimezone(), record, prometheus)
