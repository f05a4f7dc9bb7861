"""`node-verdict`: runs' verdicts as Kubernetes node labels and a taint, with the guards `act
slurm` has (issue #31 §2) when the cluster's state is given.

Every report is read and judged before any node is changed; the round's decisions are
act.kubernetes's (pure but for the cluster's read and the API's patch). This module is the order
of the round, what is said of it, and the kubectl commands printed where nothing is applied.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from gpuaccept.commands.act import (
    REFUSED_EXIT,
    Guarding,
    check_outputs,
    checked_guard,
    state_path,
)
from gpuaccept.commands.options import arg, opt
from gpuaccept.errors import InputError

if TYPE_CHECKING:
    from gpuaccept.act.kubernetes import KubeAction
    from gpuaccept.commands.output import Output
    from gpuaccept.report.node_verdict import NodeVerdict
    from gpuaccept.results import RunReport


_APPLY = (
    "Read the nodes from and change them through the Kubernetes API (needs the kubernetes "
    "client) instead of printing the kubectl commands."
)
_CLUSTER = (
    "The cluster's nodes as `kubectl get nodes -o json` prints them: the guards decide against "
    "them and the guarded commands are printed."
)
_MODES = (
    "report: the verdict's commands, no guards, nothing read (the default without --cluster or "
    "--apply); shadow: decide with the guards, say what would be done, change nothing; "
    "enforce: the guarded change (the default with --cluster or --apply)."
)
_POOL = "The nodes the breaker counts: those with these labels (default: every node)."


@dataclass(frozen=True, kw_only=True)
class NodeVerdictRequest:
    """`node-verdict`: the reports (one or more per node: a node's older ones are its past) and
    how they are acted on. `act` None: report without a cluster, enforce with one (`cluster`, a
    `kubectl get nodes -o json` file, or `apply`: the Kubernetes API)."""

    reports: Annotated[
        tuple[Path, ...],
        arg("JSON reports, one or more per node (a node's older ones are its past)."),
    ]
    node: Annotated[
        str | None, opt("--node", "NAME", "The node (default: the one the report names).")
    ] = None
    apply: Annotated[bool, opt("--apply", text=_APPLY)] = False
    cluster: Annotated[Path | None, opt("--cluster", "FILE", _CLUSTER)] = None
    act: Annotated[str | None, opt("--act", "MODE", _MODES)] = None
    # KEY=VALUE[,KEY=VALUE]: the nodes the breaker counts
    pool: Annotated[str | None, opt("--pool", "KEY=VALUE[,...]", _POOL)] = None
    guarding: Guarding = field(default_factory=Guarding)


@dataclass(frozen=True)
class NodeVerdictResult:
    """The verdicts applied (each node's newest), what the guards decided for them (None in
    report mode) and the exit code: 0, or 4 when a guard refused a failing node's taint."""

    exit_code: int
    mode: str
    applied: tuple[NodeVerdict, ...]
    decided: tuple[KubeAction, ...] | None


def run_node_verdict(request: NodeVerdictRequest, out: Output) -> NodeVerdictResult:
    """Check every input, read and judge every report, then (report mode) print each node's
    kubectl commands, or decide the round against the cluster and the records and make, print
    or only say (shadow) each change; the record and metrics written last."""
    from datetime import UTC, datetime

    from gpuaccept.report.node_verdict import kubectl_commands, newest_per_node, tied

    given, apply, cluster = request.guarding, request.apply, request.cluster
    stated = apply or cluster is not None
    mode = request.act or ("enforce" if stated else "report")
    guard = checked_guard(mode, given)
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
    selector = _selector(request.pool)
    check_outputs(given.record, given.prometheus)
    records = state_path(given.state) if mode != "report" else None
    runs = _read(request.reports, request.node, guard.resume_level, out)
    verdicts = [verdict for verdict, _ in runs]
    for chosen, other in tied(verdicts):
        out.error(
            f"# {chosen.node}: two reports started at {chosen.started_at} ({chosen.verdict}, "
            f"{other.verdict}); the more cautious, {chosen.verdict}, is applied"
        )
    newest, superseded = newest_per_node(verdicts)
    newest_of = {verdict.node: verdict for verdict in newest}
    for old in superseded:
        same = newest_of[old.node]
        if (old.started_at, old.verdict) == (same.started_at, same.verdict):
            # the same run given twice (one file named twice, or a copy): not a newer one
            out.error(
                f"# {old.node}: the report of {old.started_at} ({old.verdict}) was given more "
                "than once; applied once"
            )
            continue
        out.error(
            f"# {old.node}: a report of {old.started_at} ({old.verdict}) is superseded by a "
            "newer one, not applied"
        )
    if mode == "report" or records is None:
        for verdict in newest:
            if verdict.note:
                out.error(f"# {verdict.node}: {verdict.note}")
            for command in kubectl_commands(verdict):
                out.line(shlex.join(command))
        _write(runs, newest, None, mode, given)
        return NodeVerdictResult(0, mode, tuple(newest), None)
    from contextlib import nullcontext

    from gpuaccept.act.kubernetes import decide_round, read_cluster_api, read_cluster_file
    from gpuaccept.act.ledger import load_ledger, lock_ledger, save_ledger

    # enforce holds the records' lock from their read to their save: two nodes' health checks
    # finishing at once must not both find the breaker's share unspent
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
            given.replace_after,
            given.replace_days,
            ledger,
            given.inspect_after,
        )
        refused = _carry_out(decided, mode, apply, out)
        if mode == "enforce" and kept != ledger:
            save_ledger(records, kept)
    _write(runs, newest, decided, mode, given)
    return NodeVerdictResult(REFUSED_EXIT if refused else 0, mode, tuple(newest), tuple(decided))


def _selector(text: str | None) -> dict[str, str] | None:
    """`KEY=VALUE[,KEY=VALUE]` as a map; InputError on anything else."""
    if text is None:
        return None
    pairs = [part.partition("=") for part in text.split(",")]
    if not all(key.strip() and sep for key, sep, _ in pairs):
        raise InputError(f"--pool {text!r}: give labels as KEY=VALUE[,KEY=VALUE]")
    return {key.strip(): value.strip() for key, _, value in pairs}


def _read(
    reports: tuple[Path, ...], node: str | None, resume_level: str, out: Output
) -> list[tuple[NodeVerdict, RunReport]]:
    """Every report read and judged before any node is changed (a report dated in the future
    is said and left out: it would stay "the newest" and overrule every real run)."""
    from gpuaccept.report.node_verdict import node_of, node_verdict
    from gpuaccept.report.reading import dated_in_future, load_report

    runs = []
    for path in reports:
        try:
            report = load_report(path)
            future = dated_in_future(report)
            if future is not None:
                out.error(f"# report {path}: {future}; not applied")
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


def _carry_out(decided: list[KubeAction], mode: str, apply: bool, out: Output) -> bool:
    """Say and make (or print) each change; whether a guard refused a taint of a failing node
    that stays in service (the breaker, the regression rule)."""
    from gpuaccept.act.kubernetes import apply_verdict, regressions
    from gpuaccept.report.node_verdict import kubectl_commands

    refused = False
    for stack, names in regressions(decided).items():
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        out.error(
            f"node-verdict: a regression of the software stack {stack}: {len(names)} node(s) "
            f"failed alike ({shown}), none of them tainted for it; compare the stack with the "
            "last one that passed"
        )
    for done in decided:
        name, decision = done.change.node, done.decision
        for offence in done.offences:
            out.error(f"# {name}: {offence.said}")
        if decision.action == "refused":
            refused = refused or decision.guard != "not-ours"
            # a regression is said once above; each node's own line is a note
            head = "#" if decision.regression else "node-verdict:"
            out.error(f"{head} {name}: {decision.why}")
        if mode == "shadow":
            would = {"drain": "would taint", "resume": "would lift the taint"}
            said = would.get(decision.action)
            line = f"{said}: {decision.why}" if said else decision.why
            out.line(f"[K8S] shadow: {name}: {line} (nothing changed: --act shadow)")
        elif apply:
            apply_verdict(done.change)
            out.line(f"[K8S] {name}: {decision.why}")
        else:
            if decision.action != "refused":  # said above
                out.error(f"# {name}: {decision.why}")
            for command in kubectl_commands(done.change):
                out.line(shlex.join(command))
    return refused


def _write(
    runs: list[tuple[NodeVerdict, RunReport]],
    newest: list[NodeVerdict],
    decided: list[KubeAction] | None,
    mode: str,
    given: Guarding,
) -> None:
    """The round's decisions in the record and the metrics (in report mode: none decided)."""
    from datetime import datetime

    from gpuaccept.act.policy import Decision
    from gpuaccept.act.record import acted, write_outputs

    if given.record is None and given.prometheus is None:
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
    at = datetime.now().astimezone()
    write_outputs(done, "node-verdict", mode, at, given.record, given.prometheus)
