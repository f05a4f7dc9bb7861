"""`gpuaccept history`: the SQLite record of runs (list, show, compare, trend, import, fleet)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpuaccept.errors import InputError

if TYPE_CHECKING:
    from gpuaccept.compare.fleet import FleetMtbi
    from gpuaccept.store.history import History

app = typer.Typer(
    rich_markup_mode=None,
    help="The record of past runs on this node and across a fleet.",
    no_args_is_help=True,
)

DATABASE = typer.Option(
    None,
    "--history",
    metavar="FILE|postgresql://...",
    help="History: an SQLite file or a PostgreSQL URI (default: $GPUACCEPT_HISTORY, else "
    "~/.local/share/gpuaccept/history.sqlite).",
)
# `history fleet`'s judgement, and `report --fleet --html`'s: one set of options for both
FLEET_TOLERANCE = typer.Option(
    10.0,
    "--tolerance",
    min=0,
    max=100,
    metavar="PERCENT",
    help="Flag a GPU more than this many percent worse than its model's fleet median.",
)
FLEET_MIN_GPUS = typer.Option(
    3, "--min-gpus", min=2, help="GPUs of a model needed before its median is trusted."
)
FLEET_MTBI_DAYS = typer.Option(
    30.0,
    "--mtbi-days",
    metavar="DAYS",
    help="The window (ending at the history's newest run) of the mean time between "
    "incidents per node and per GPU.",
)
COMMANDS = ("accept", "bench", "train-mnist", "burnin")  # what the history records runs of
NODE = typer.Option(None, "--node", metavar="NODE", help="Only this node (its name as recorded).")
AS_JSON = typer.Option(False, "--json", help="Print it as JSON on stdout (for scripts).")
COMMAND = typer.Option(
    None,
    "--command",
    metavar="[accept|bench|train-mnist|burnin]",
    help="Only runs of this command.",
)


def _known_command(command: str | None) -> None:
    """Refuse a --command the history records no runs of (it would only say "no runs")."""
    if command is not None and command not in COMMANDS:
        raise InputError(f"--command must be one of {', '.join(COMMANDS)} (got {command!r})")


@contextmanager
def _open(path: str | None, *, create: bool = False) -> Iterator[History]:
    from gpuaccept.store.history import History, history_location

    with History.open(history_location(path), create=create) as history:
        yield history


def _echo_table(header: list[str], rows: list[list[str]]) -> None:
    """Plain aligned columns: greppable in job logs, like the bench tables."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    for line in [header, ["-" * w for w in widths], *rows]:
        typer.echo("  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())


def _run_id(text: str) -> int:
    # ASCII digits only ('²'.isdigit() is true), and no more than SQLite's 64-bit integers hold
    if not re.fullmatch(r"[0-9]{1,18}", text):
        raise InputError(f"run id must be a number from `gpuaccept history list` (got {text!r})")
    return int(text)


@app.command("list")
def list_runs(
    history: str | None = DATABASE,
    node: str | None = NODE,
    command: str | None = COMMAND,
    limit: int = typer.Option(
        20, "--limit", min=1, max=1_000_000, metavar="N", help="Newest runs to show."
    ),
    as_json: bool = AS_JSON,
) -> None:
    """Recorded runs, newest first."""
    from gpuaccept.store.history import history_location, local_file

    _known_command(command)

    location = history_location(history)
    path = local_file(location)
    # a dangling link or a loop is opened, and refused
    if path is not None and not path.exists() and not path.is_symlink():
        if as_json:
            typer.echo("[]")
            return
        typer.echo(f"no runs recorded (no history at {path} yet)")
        return
    with _open(history) as store:
        runs = store.list_runs(node=node, command=command, limit=limit)
    if as_json:
        typer.echo(
            json.dumps(
                [
                    {
                        "run": run.id,
                        "started_at": run.started_at,
                        "node": run.hostname,
                        "command": run.command,
                        "level": run.level,
                        "device_mode": run.device_mode,
                        "verdict": run.verdict.model_dump(mode="json"),
                        "label": run.verdict.label,
                        "duration_seconds": run.duration_seconds,
                    }
                    for run in runs
                ],
                indent=2,
            )
        )
        return
    if not runs:
        typer.echo("no runs recorded" + (f" for node {node}" if node else ""))
        return
    _echo_table(
        ["run", "started (UTC)", "node", "command", "level", "mode", "result", "seconds"],
        [
            [
                str(run.id),
                run.started_at[:19],
                str(run.hostname),
                run.command,
                run.level,
                run.device_mode,
                run.verdict.label,
                f"{run.duration_seconds:.1f}",
            ]
            for run in runs
        ],
    )


_GPU_UUID = re.compile(r"(GPU|MIG)-[0-9A-Fa-f-]{8,64}")


@app.command("gpu")
def gpu(
    uuid: str = typer.Argument(..., help="The GPU's UUID (GPU-...), as NVML says."),
    history: str | None = DATABASE,
    limit: int = typer.Option(
        100, "--limit", min=1, max=10_000, metavar="N", help="Newest runs to read."
    ),
    as_json: bool = AS_JSON,
) -> None:
    """One GPU's life, followed by its UUID across hosts: every run it took part in, what each
    recommended for it, and whether it is a repeat offender (3 incidents in 7 days: replace)."""
    from dataclasses import asdict

    from gpuaccept.act.offenders import gpu_life

    if not _GPU_UUID.fullmatch(uuid):
        raise InputError(f"{uuid!r} is not a GPU UUID (GPU-xxxxxxxx-..., from nvidia-smi -L)")
    with _open(history) as store:
        found = store.gpu_runs(uuid, limit)
        reports = {row.id: store.report(row.id) for row, _, _ in found}
        if not found:
            # an input that names nothing stored, as `history show` of an unknown run: exit 2,
            # so a script never reads "no such GPU" as a GPU with a clean life
            raise InputError(
                f"history {store.path}: no run recorded with GPU {uuid} (check the UUID "
                "against `nvidia-smi -L` on its node, and that its runs went to this history)"
            )
    rows = [
        (row.id, row.started_at, row.hostname, row.command, row.verdict.label, index, serial)
        for row, index, serial in found
    ]
    life = gpu_life(uuid, rows, reports)
    if as_json:
        typer.echo(json.dumps({**asdict(life), "said": life.said}, indent=2, default=str))
        return
    _echo_table(
        ["run", "started (UTC)", "host", "index", "command", "result", "action for it"],
        [
            [
                str(r.run),
                r.started_at[:19],
                str(r.host),
                "" if r.index is None else str(r.index),
                r.command,
                r.verdict,
                r.action.value,
            ]
            for r in life.runs
        ],
    )
    typer.echo(life.said)


@app.command("show")
def show(
    run: str = typer.Argument(..., help="Run id (see `gpuaccept history list`)."),
    history: str | None = DATABASE,
    as_json: bool = typer.Option(False, "--json", help="Print the stored report as JSON."),
) -> None:
    """One run: its checks and figures (or the whole report with --json)."""
    from gpuaccept.naming import floor_verdict_text
    from gpuaccept.record.identity import node_name_of
    from gpuaccept.report.console import action_lines, check_line, result_line
    from gpuaccept.results import device_label

    with _open(history) as store:
        report = store.report(_run_id(run))
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
        return
    typer.echo(
        f"run {run}: gpuaccept {report.command} --level {report.level} ({report.device_mode}) "
        f"on {node_name_of(report)}, started {report.started_at}, {report.duration_seconds:.1f} s"
    )
    for check in report.checks:
        typer.echo(check_line(check))
        for m in check.measurements:
            device = device_label(m.device_index)
            typer.echo(f"    {device} {m.name} {m.value:.4g} {m.unit} ({floor_verdict_text(m)})")
    for line in action_lines(report):
        typer.echo(line)
    typer.echo(result_line(report))


@app.command("compare")
def compare(
    run_a: str = typer.Argument(..., help="The earlier (reference) run id."),
    run_b: str = typer.Argument(..., help="The run to compare with it."),
    history: str | None = DATABASE,
    as_json: bool = AS_JSON,
) -> None:
    """Every figure of two runs side by side, with the change in percent (B against A)."""
    from gpuaccept.compare.comparison import compare_reports
    from gpuaccept.naming import format_number, run_title

    with _open(history) as store:
        a, b = store.report(_run_id(run_a)), store.report(_run_id(run_b))
    # Levels and modes size the work differently (a quick matmul is not a standard one): such
    # runs are shown side by side, but no change is called worse.
    alike = (a.command, a.level, a.device_mode) == (b.command, b.level, b.device_mode)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "runs": [int(run_a), int(run_b)],
                    "judged": alike,
                    "figures": [
                        {
                            "metric": f.metric,
                            "device": f.device,
                            "unit": f.unit,
                            "value_a": f.value_a,
                            "value_b": f.value_b,
                            "change_percent": f.change_percent,
                            "worse": f.worse if alike else None,
                        }
                        for f in compare_reports(a, b)
                    ],
                },
                indent=2,
            )
        )
        return
    if not alike:
        typer.echo(
            f"[WARN] run {run_a} is `{run_title(a)}`, run {run_b} is `{run_title(b)}`: they "
            "measure different sizes, so the changes below are not judged"
        )
    rows = []
    for figure in compare_reports(a, b):
        change = figure.change_percent
        rows.append(
            [
                figure.metric,
                figure.device,
                format_number(figure.value_a),
                format_number(figure.value_b),
                figure.unit,
                "n/a" if change is None else f"{change:+.1f}%",
                ("worse" if figure.worse else "ok") if alike else "not judged",
            ]
        )
    if not rows:
        typer.echo(f"runs {run_a} and {run_b} have no figures")
        return
    header = ["metric", "device", f"run {run_a}", f"run {run_b}", "unit", "change", "verdict"]
    _echo_table(header, rows)


@app.command("trend")
def trend(
    metric: str = typer.Argument(..., help="A figure's name, or CHECK/NAME (e.g. matmul/..."),
    history: str | None = DATABASE,
    node: str | None = NODE,
    command: str | None = COMMAND,
    level: str | None = typer.Option(
        None,
        "--level",
        metavar="LEVEL",
        help="Only runs of this level (accept: quick, standard, full; bench: the benchmark).",
    ),
    as_json: bool = AS_JSON,
) -> None:
    """A figure over time, oldest first, per node and GPU."""
    from gpuaccept.results import device_label

    _known_command(command)
    with _open(history) as store:
        points = store.points(metric, node=node, command=command, level=level)
        kinds = {
            run.id: f"{run.command} {run.level} ({run.device_mode})"
            for run in store.list_runs(node=node, command=command)
        }
    if not points:
        raise InputError(
            f"no figure named {metric!r} recorded"
            + (f" for node {node}" if node else "")
            + (f" by {command} runs" if command else "")
            + (f" at level {level}" if level else "")
            + " (`gpuaccept history show RUN` lists a run's figures)"
        )
    mixed = sorted({kinds.get(p.run_id, "?") for p in points})
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "metric": metric,
                    "kinds": mixed,
                    "points": [
                        {
                            "started_at": p.started_at,
                            "run": p.run_id,
                            "kind": kinds.get(p.run_id),
                            "node": p.hostname,
                            "device": device_label(p.device_index),
                            "metric": p.metric,
                            "value": p.value,
                            "unit": p.unit,
                        }
                        for p in points
                    ],
                },
                indent=2,
            )
        )
        return
    if len(mixed) > 1:
        # as `history compare` says: a quick run's figure is not a standard run's, nor a bench's
        typer.echo(
            f"[WARN] these figures come from {len(mixed)} kinds of run ({'; '.join(mixed)}), "
            "which measure different sizes: compare like with like (--command, --level)"
        )
    _echo_table(
        ["started (UTC)", "run", "kind", "node", "device", "metric", "value", "unit"],
        [
            [
                p.started_at[:19],
                str(p.run_id),
                kinds.get(p.run_id, "?"),
                str(p.hostname),
                device_label(p.device_index),
                p.metric,
                f"{p.value:.4g}",
                p.unit,
            ]
            for p in points
        ],
    )


@app.command("import")
def import_reports(
    reports: list[Path] = typer.Argument(
        ...,
        help="JSON reports (e.g. from HTCondor jobs), or directories of them (their *.json files).",
    ),
    history: str | None = DATABASE,
) -> None:
    """Add JSON reports to the history: each is checked first, and one malformed or dated after
    now imports none; then they are stored in batches of 500, each one transaction.

    A report already in the history (same content) is not stored twice, so an import stopped
    part-way is finished by running it again.
    """
    from gpuaccept.store.importing import check_reports, report_files, store_reports

    found = report_files(reports)
    check_reports(found.reports)
    if found.captures:
        typer.echo(
            f"[HISTORY] skipped {len(found.captures)} environment capture(s) (*.env.json): not "
            "runs; each report holds its own"
        )
    new = again = 0
    with _open(history, create=True) as store:
        for done in store_reports(store, found.reports):
            new, again = new + done.new, again + (not done.new)
            said = "" if done.new else " (already recorded)"
            typer.echo(f"[HISTORY] {done.source}: run {done.run_id}{said}")
    typer.echo(f"[HISTORY] imported {new} new run(s), {again} already recorded")


@app.command("push")
def push(history: str | None = DATABASE) -> None:
    """Deliver the runs the spool kept while their history could not be reached ($GPUACCEPT_SPOOL,
    else ~/.local/share/gpuaccept/spool); each is stored once, whatever was stored before.

    Exit 2 when the history cannot be reached (the spool keeps every run) or a spooled file is
    not a report (it is left in place, and said).
    """
    from gpuaccept.store.spool import SpoolError, deliver, pending, spool_dir

    waiting = pending()  # a spool that cannot be read is refused before the history is opened
    if not waiting:
        typer.echo(f"[HISTORY] nothing to push: the spool {spool_dir()} is empty")
        return
    with _open(history, create=True) as store:
        delivery = deliver(store)
        where = store.path
    for line in delivery.lines():
        typer.echo(f"[HISTORY] {line}")
    typer.echo(f"[HISTORY] pushed {len(delivery.delivered)} run(s) to {where}")
    if delivery.refused or delivery.problem:
        raise SpoolError(
            f"{len(delivery.refused)} spooled file(s) are not reports; left in {spool_dir()}"
        )


@app.command("fleet")
def fleet(
    history: str | None = DATABASE,
    tolerance: float = FLEET_TOLERANCE,
    min_gpus: int = FLEET_MIN_GPUS,
    as_json: bool = typer.Option(False, "--json", help="Print the view as JSON."),
    mtbi_days: float = FLEET_MTBI_DAYS,
) -> None:
    """The newest accept run per node, GPUs that lag their fleet, and the mean time between
    incidents of each node and GPU that had one.

    Exit 1 when a node's newest accept did not pass (failed, judged nothing, or was
    interrupted), a GPU lags, or a node is slower than its own history; benchmark and training
    runs are not verdicts on a node.
    """
    from gpuaccept.compare.fleet import check_window, fleet_state
    from gpuaccept.results import device_label

    check_window(mtbi_days)
    with _open(history) as store:
        state = fleet_state(
            store, tolerance_percent=tolerance, min_samples=min_gpus, mtbi_days=mtbi_days
        )
    view, slower, mtbi = state.view, state.slower, state.mtbi
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "nodes": [
                        {
                            "node": run.hostname,
                            "run": run.id,
                            "started_at": run.started_at,
                            "command": run.command,
                            "level": run.level,
                            "verdict": run.verdict.model_dump(mode="json"),
                            "action": state.actions.get(run.id),
                        }
                        for run in view.nodes
                    ],
                    "outliers": [
                        {
                            "node": f.point.hostname,
                            "device_index": f.point.device_index,
                            "gpu_uuid": f.point.gpu_uuid,
                            "model": f.model,
                            "metric": f.point.metric,
                            "value": f.point.value,
                            "unit": f.point.unit,
                            "fleet_median": f.fleet_median,
                            "deviation_percent": f.deviation_percent,
                            "run": f.point.run_id,
                        }
                        for f in view.outliers
                    ],
                    "tolerance_percent": tolerance,
                    "slower_than_before": [
                        {
                            "node": run.hostname,
                            "run": run.id,
                            "status": drop.status.value,
                            "message": drop.message,
                        }
                        for run, drop in slower
                    ],
                    "mtbi": mtbi.as_json(),
                    "sdc": [
                        {"node": run.hostname, "run": run.id, "started_at": run.started_at}
                        for run in state.sdc
                    ],
                },
                # one line: Python's indenting encoder is its slow one (a fleet of 10,000 nodes:
                # 2.8 s of 3.5 against 0.2 s, benchmarks/history_scale.py)
            )
        )
    else:
        _echo_table(
            ["node", "newest accept", "started (UTC)", "level", "result", "action"],
            [
                [
                    str(run.hostname),
                    str(run.id),
                    run.started_at[:19],
                    run.level,
                    run.verdict.label,
                    state.actions.get(run.id, ""),
                ]
                for run in view.nodes
            ],
        )
        if view.outliers:
            typer.echo(f"\nGPUs more than {tolerance:g}% worse than their model's fleet median:")
            _echo_table(
                ["node", "device", "model", "metric", "value", "median", "deviation", "run"],
                [
                    [
                        str(f.point.hostname),
                        device_label(f.point.device_index),
                        f.model,
                        f.point.metric,
                        f"{f.point.value:.4g} {f.point.unit}",
                        f"{f.fleet_median:.4g}",
                        f"{f.deviation_percent:+.1f}%",
                        str(f.point.run_id),
                    ]
                    for f in view.outliers
                ],
            )
        else:
            typer.echo(f"\nno GPU more than {tolerance:g}% worse than its model's fleet median")
        if slower:
            typer.echo("\nNodes slower than their own history (their newest accept says):")
            for run, drop in slower:
                typer.echo(f"  {run.hostname} (run {run.id}): {drop.message}")
        for run in state.sdc:
            typer.echo(
                f"\n{run.hostname}: its newest burn-in (run {run.id}) found silent data "
                "corruption (GPUs disagreed bit for bit)"
            )
        _echo_mtbi(mtbi)
    if state.attention:
        raise typer.Exit(1)


def _hours(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 24:.1f} d" if value >= 48 else f"{value:.1f} h"


def _echo_mtbi(mtbi: FleetMtbi) -> None:
    from gpuaccept.compare.fleet import JUDGED_RUNS

    if not mtbi.nodes:
        return
    hit = [m for m in mtbi.nodes if m.incidents]
    typer.echo(
        f"\nMean time between incidents, the {mtbi.days:g} days to {mtbi.until[:19]}: "
        f"{len(hit)} of {len(mtbi.nodes)} node(s) had one; the fleet's per node "
        f"{_hours(mtbi.fleet_hours())}"
    )
    if hit:
        _echo_table(
            ["node", "incidents", "observed", "judged runs", "MTBI"],
            [
                [m.what, str(m.incidents), _hours(m.hours), str(m.runs), _hours(m.mean_hours)]
                for m in hit
            ],
        )
        typer.echo(f"(judged {JUDGED_RUNS})")
    if mtbi.gpus:
        typer.echo("GPUs a run named for a remediation:")
        _echo_table(
            ["gpu", "serial", "hosts", "incidents", "observed", "MTBI"],
            [
                [
                    m.what,
                    m.serial or "-",
                    ", ".join(m.hosts),
                    str(m.incidents),
                    _hours(m.hours),
                    _hours(m.mean_hours),
                ]
                for m in mtbi.gpus
            ],
        )
