"""`gpuaccept act slurm`: a run's verdict as a Slurm drain or resume, with guards (issue #31)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from gpuaccept.act.policy import Decision, Guard, Verdict
    from gpuaccept.results import RunReport

app = typer.Typer(no_args_is_help=True, help="Act on a verdict in the scheduler, with guards.")

REFUSED_EXIT = 4
MODES = ("report", "shadow", "enforce")


def state_path(state: Path | None) -> Path:
    """The records' file the option names, else the default; checked (InputError)."""
    from gpuaccept.act.ledger import check_state_path, default_state

    path = state or default_state()
    check_state_path(path)
    return path


def _verdict(
    report_path: Path,
) -> tuple[RunReport, Verdict, str, list[str], str | None, str, str]:
    """(the report, verdict, level, failed checks, the node the report names, its stack digest,
    its recommended action) of an accept report."""
    from gpuaccept.errors import InputError
    from gpuaccept.record.environment import stack_sha256
    from gpuaccept.report.node_verdict import fitness, node_of
    from gpuaccept.report.reading import dated_in_future, load_report
    from gpuaccept.verdict import ACCEPT

    report = load_report(report_path)
    shown = f"report {report_path}"
    if report.verdict.kind != ACCEPT:
        raise InputError(f"{shown}: not a `gpuaccept accept` report: it says nothing of a node")
    future = dated_in_future(report)
    if future is not None:
        raise InputError(f"{shown}: {future}; nothing is done on it")
    verdict = fitness(report)
    failed = list(report.verdict.failed_checks)
    action = report.action_plan.action.value
    stack = stack_sha256(report.environment)
    return report, verdict, report.level, failed, node_of(report), stack, action


def _earlier(
    path: Path, earlier: Path | None, node: str, gpus: frozenset[str] = frozenset()
) -> list[RunReport]:
    """The node's earlier accept reports, and other hosts' where its GPUs ran; what could not be
    read is said on stderr (a damaged neighbour never changes what is done to this node beyond
    not counting)."""
    from gpuaccept.act.repeats import EARLIER_FILES_READ, earlier_reports

    reports, unreadable = earlier_reports(
        earlier or path.parent, node, path, EARLIER_FILES_READ, gpus
    )
    for line in unreadable[:3]:
        typer.echo(f"act: not counted: {line}", err=True)
    if len(unreadable) > 3:
        typer.echo(f"act: not counted: {len(unreadable) - 3} more unreadable report(s)", err=True)
    return reports


# The guards' options, shared by `act slurm` and `node-verdict` (one policy: act.policy)
RESUME_LEVEL = typer.Option(
    "standard",
    "--resume-level",
    metavar="LEVEL",
    help="The level a node gpuaccept took out (drain, taint) must pass to return to service.",
)
BREAKER_SHARE = typer.Option(
    0.02,
    "--breaker-share",
    metavar="FRACTION",
    help="At most this share of the nodes (at least one) taken out by gpuaccept within "
    "--breaker-minutes; past it a failing node is left in service and the exit is 4.",
)
BREAKER_MINUTES = typer.Option(
    60.0, "--breaker-minutes", metavar="MINUTES", help="The breaker's window."
)
DEBOUNCE = typer.Option(
    2,
    "--debounce",
    min=1,
    max=20,
    metavar="K",
    help="A failure whose recommended action is only a rerun takes the node out when it failed "
    "K runs in a row (1: at once); hard faults at once.",
)
DEBOUNCE_HOURS = typer.Option(
    24.0, "--debounce-hours", metavar="HOURS", help="The runs in a row count within this."
)
REPLACE_AFTER = typer.Option(
    3,
    "--replace-after",
    min=0,
    max=100,
    metavar="N",
    help="A node, or a GPU by its UUID, failing in N incidents within --replace-days is a "
    "repeat offender: its action becomes replace (0: never).",
)
REPLACE_DAYS = typer.Option(
    7.0, "--replace-days", metavar="DAYS", help="The repeat offenders' window."
)
INSPECT_AFTER = typer.Option(
    2,
    "--inspect-after",
    min=0,
    max=100,
    metavar="N",
    help="A node, or a GPU by its UUID, failing in N incidents within --replace-days is drained "
    "for a person to inspect it (its repair did not hold), before --replace-after makes it "
    "replace (0: never). A failure that only a rerun was recommended for is never replaced.",
)
STATE = typer.Option(
    None,
    "--state",
    metavar="FILE",
    help="gpuaccept's records of the breaker's trip and the regressions it holds (JSON; default "
    "$GPUACCEPT_ACT_STATE, else the data directory beside the history). Share one file between "
    "every node's health check (shared storage) so that the breaker counts the whole cluster.",
)

RECORD = typer.Option(
    None,
    "--record",
    metavar="FILE",
    help="Write what was decided for each node, and why, as JSON (replaced atomically).",
)
PROMETHEUS = typer.Option(
    None,
    "--prometheus",
    metavar="FILE",
    help="Write the decisions as node_exporter textfile metrics: gpuaccept_act_decision, "
    "gpuaccept_act_refused{guard=breaker|regression}.",
)


def check_outputs(record: Path | None, prometheus: Path | None) -> None:
    """Refuse, before Slurm or Kubernetes is asked anything, an output that cannot be written."""
    from gpuaccept.output_files import check_output_file, refuse_collisions

    if record is not None:
        check_output_file(record, "--record")
    if prometheus is not None:
        check_output_file(prometheus, "--prometheus")
    refuse_collisions({"--record": record, "--prometheus": prometheus}, {})


def checked_guard(
    act: str,
    resume_level: str,
    breaker_share: float,
    breaker_minutes: float,
    debounce: int,
    debounce_hours: float,
    replace_days: float,
) -> Guard:
    """The guard the options give; InputError on the first one out of its range."""
    import math

    from gpuaccept.act.policy import Guard
    from gpuaccept.errors import InputError
    from gpuaccept.suite.selection import LEVELS

    if act not in MODES:
        raise InputError(f"--act {act!r}: give one of {', '.join(MODES)}")
    if resume_level not in LEVELS:
        raise InputError(f"--resume-level {resume_level!r}: give one of {', '.join(LEVELS)}")
    if not (math.isfinite(breaker_share) and 0 <= breaker_share <= 1):
        raise InputError(f"--breaker-share {breaker_share:g}: give a fraction from 0 to 1")
    if not (math.isfinite(breaker_minutes) and 0 < breaker_minutes <= 7 * 24 * 60):
        raise InputError(
            f"--breaker-minutes {breaker_minutes:g}: give minutes above 0, a week at most"
        )
    if not (math.isfinite(debounce_hours) and 0 < debounce_hours <= 30 * 24):
        raise InputError(
            f"--debounce-hours {debounce_hours:g}: give hours above 0, thirty days at most"
        )
    if not (math.isfinite(replace_days) and 0 < replace_days <= 90):
        raise InputError(f"--replace-days {replace_days:g}: give days above 0, ninety at most")
    return Guard(
        share=breaker_share,
        minutes=breaker_minutes,
        resume_level=resume_level,
        debounce=debounce,
        debounce_hours=debounce_hours,
    )


@app.command("slurm")
def slurm(
    report: Path = typer.Argument(..., help="The node's `gpuaccept accept` JSON report."),
    node: str | None = typer.Option(
        None, "--node", metavar="NAME", help="Slurm's name for the node (default: the report's)."
    ),
    act: str = typer.Option(
        "enforce",
        "--act",
        metavar="MODE",
        help="report: say the verdict, ask Slurm nothing, change nothing; shadow: decide "
        "against Slurm's state and say what it would do, change nothing; enforce: drain or "
        "resume.",
    ),
    partition: str | None = typer.Option(
        None, "--partition", metavar="NAME", help="The nodes the breaker counts (default: all)."
    ),
    resume_level: str = RESUME_LEVEL,
    breaker_share: float = BREAKER_SHARE,
    breaker_minutes: float = BREAKER_MINUTES,
    debounce: int = DEBOUNCE,
    debounce_hours: float = DEBOUNCE_HOURS,
    earlier: Path | None = typer.Option(
        None,
        "--earlier",
        metavar="DIR",
        help="Where the node's earlier accept reports are (default: the report's directory; "
        "the newest 192 files are read).",
    ),
    replace_after: int = REPLACE_AFTER,
    replace_days: float = REPLACE_DAYS,
    inspect_after: int = INSPECT_AFTER,
    state: Path | None = STATE,
    record: Path | None = RECORD,
    prometheus: Path | None = PROMETHEUS,
) -> None:
    """Drain a failing node, resume one gpuaccept drained once it passes, never more.

    A failing node is drained with the reason `gpuaccept LEVEL: ACTION: CHECKS [stack DIGEST]`
    (ACTION: the report's recommended action) unless it is drained already, its failure is soft
    (recommended: rerun) and has not yet repeated --debounce runs in a row, two other nodes on
    the same software stack failed the same checks in the last --breaker-minutes (a regression
    of the stack, not the node), or gpuaccept drained --breaker-share of the nodes in that time
    (the circuit breaker); both refusals exit 4, the node left in service, said on stderr. A
    node is resumed only when gpuaccept drained it (its reason) and the run passed
    --resume-level or above; a drain set by anyone else is never lifted. A run that judged
    nothing changes nothing. Exit: 0 in service or resumed; 1 the node failed; 4 the breaker
    refused the drain.
    """
    from gpuaccept.act.policy import Decision
    from gpuaccept.act.repeats import NodePast, gpu_uuids, node_past
    from gpuaccept.act.rounds import NodeRun, checks_run
    from gpuaccept.act.slurm import act_on_node
    from gpuaccept.errors import InputError
    from gpuaccept.suite.selection import LEVELS

    guard = checked_guard(
        act, resume_level, breaker_share, breaker_minutes, debounce, debounce_hours, replace_days
    )
    if earlier is not None and not earlier.is_dir():
        raise InputError(f"--earlier {earlier}: not a directory of reports")
    check_outputs(record, prometheus)
    records = state_path(state) if act != "report" else None
    run, verdict, level, failed, named, stack, action = _verdict(report)
    name = node or named
    if not name:
        raise InputError(f"report {report}: names no node: give --node")
    if level not in LEVELS:
        raise InputError(f"report {report}: level {level!r} is not one of {', '.join(LEVELS)}")
    if act == "report" or records is None:
        checks = f" ({', '.join(failed)})" if failed else ""
        typer.echo(
            f"[ACT] report: {name}: {verdict} at {level}{checks}, recommended action {action} "
            "(nothing acted on)"
        )
        nothing = Decision("none", name, "nothing acted on: --act report")
        _write(name, verdict, level, action, nothing, act, record, prometheus)
        raise typer.Exit(1 if verdict == "fail" else 0)
    past = NodePast()
    if verdict == "fail":
        earlier_runs = _earlier(report, earlier, named or name, gpu_uuids(run))
        past = node_past(
            run, earlier_runs, debounce_hours, replace_after, replace_days, inspect_after
        )
    for offence in past.offences:
        typer.echo(f"[ACT] {name}: {offence.said}")
    escalated = past.action(action)
    node_run = NodeRun(
        name, verdict, level, tuple(failed), stack, escalated, past.repeats, checks_run(run)
    )
    decision, changed = act_on_node(node_run, guard, records, act, partition)
    if node and named and node != named:  # said once Slurm has answered for the node
        typer.echo(f"act: note: the report is of {named}; acted on Slurm's node {node}", err=True)
    if act == "enforce":
        if changed:
            typer.echo(f"[ACT] {name}: NOT acted on: it changed since it was read ({changed})")
        else:
            typer.echo(f"[ACT] {name}: {decision.why}")
    else:
        would = {"drain": "would drain", "resume": "would resume"}.get(decision.action)
        said = f"{would}: {decision.why}" if would else decision.why
        typer.echo(f"[ACT] shadow: {name}: {said} (nothing changed: --act shadow)")
    _write(name, verdict, level, past.action(action), decision, act, record, prometheus)
    if decision.action == "refused" and decision.guard != "not-ours":
        typer.echo(f"act: {name}: {decision.why}", err=True)
        raise typer.Exit(REFUSED_EXIT)
    if decision.action == "refused":
        typer.echo(f"act: {name}: {decision.why}", err=True)
    if verdict == "fail":
        raise typer.Exit(1)


def _write(
    node: str,
    verdict: str,
    level: str,
    recommended: str,
    decision: Decision,
    mode: str,
    record: Path | None,
    prometheus: Path | None,
) -> None:
    from datetime import datetime

    from gpuaccept.act.record import acted, write_outputs

    done = [acted(node, verdict, level, recommended, decision)]
    write_outputs(done, "act slurm", mode, datetime.now().astimezone(), record, prometheus)


breaker_app = typer.Typer(
    no_args_is_help=True,
    help="The circuit breaker: once tripped it holds until a person resets it.",
)
regression_app = typer.Typer(
    no_args_is_help=True,
    help="Software stacks held as regressed: no node failing alike on them is drained.",
)
app.add_typer(breaker_app, name="breaker")
app.add_typer(regression_app, name="regression")

BY = typer.Option(..., "--by", metavar="NAME", help="Who does it (recorded).")
WHY = typer.Option(..., "--why", metavar="TEXT", help="Why (recorded).")


def _person(by: str, why: str) -> tuple[str, str]:
    from gpuaccept.errors import InputError

    for flag, value in (("--by", by), ("--why", why)):
        if not value.strip() or not value.isprintable() or len(value) > 500:
            raise InputError(f"{flag}: give a line of printable text (500 characters at most)")
    return by.strip(), why.strip()


@breaker_app.command("status")
def breaker_status(state: Path | None = STATE) -> None:
    """Say whether the breaker is tripped, the stacks held as regressed, and the last changes."""
    from gpuaccept.act.ledger import load_ledger

    path = state_path(state)
    ledger = load_ledger(path)
    trip = ledger.tripped
    if trip is None:
        typer.echo(f"breaker: not tripped ({path})")
    else:
        typer.echo(f"breaker: TRIPPED at {trip.at.isoformat(timespec='seconds')}: {trip.why}")
    for held in ledger.regressions:
        typer.echo(
            f"regression: stack {held.stack} held since {held.since.isoformat(timespec='seconds')}"
            f" ({', '.join(held.checks)}; {', '.join(held.nodes[:5])})"
        )
    for event in ledger.events[-5:]:
        stack = f" stack {event.stack}" if event.stack else ""
        typer.echo(
            f"  {event.at.isoformat(timespec='seconds')} {event.event}{stack} by {event.by}: "
            f"{event.why}"
        )


@breaker_app.command("reset")
def breaker_reset(by: str = BY, why: str = WHY, state: Path | None = STATE) -> None:
    """Reset a tripped breaker (who and why are recorded); drains may start again."""
    from gpuaccept.act.ledger import reset_breaker

    who, reason = _person(by, why)
    reset_breaker(state_path(state), who, reason)
    typer.echo(f"breaker: reset by {who}: {reason}")


@regression_app.command("clear")
def regression_clear(
    stack: str = typer.Argument(..., metavar="STACK", help="The stack's 8-digit digest."),
    by: str = BY,
    why: str = WHY,
    state: Path | None = STATE,
) -> None:
    """Stop holding a stack as regressed (who and why are recorded)."""
    import re

    from gpuaccept.act.ledger import clear_regression
    from gpuaccept.errors import InputError

    if not re.fullmatch(r"[0-9a-f]{8}", stack):
        raise InputError(f"STACK {stack!r}: give the 8 hex digits a drain's [stack ...] shows")
    who, reason = _person(by, why)
    clear_regression(state_path(state), stack, who, reason)
    typer.echo(f"regression: stack {stack} cleared by {who}: {reason}")
