"""Options and option callbacks shared by the commands: each declared here once."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from enum import Enum, StrEnum
from typing import Any, TypeVar

import typer

from gpuaccept.commands.history import fleet as fleet_judging


def finite_number(value: float | None) -> float | None:
    """Refuse inf and NaN (click's min= lets them through): an infinite floor fails everything,
    a NaN one nothing."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"must be a finite number (got {value})")
    return value


_Request = TypeVar("_Request")


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    return tuple(value) if isinstance(value, list) else value


def request_from(
    request_type: type[_Request], options: Mapping[str, Any], **parts: type
) -> _Request:
    """The command's request from its options as Typer parsed them (`locals()` taken as the
    body's first statement): each option is the request's field of the same name, a choice is
    passed as its text, a repeated option as a tuple (requests are frozen), and each of `parts`
    (a field holding a dataclass, as `guarding`) is built from the options named as its fields.
    An option with no field is a programming error, so a new option cannot be parsed and then
    dropped (tests/test_cli_shape.py runs this for every command)."""
    values = {name: _plain(value) for name, value in options.items() if name != "ctx"}
    for name, part_type in parts.items():
        own = [field.name for field in dataclasses.fields(part_type)]
        values[name] = part_type(**{field: values.pop(field) for field in own})
    fields = {field.name for field in dataclasses.fields(request_type)}  # type: ignore[arg-type]
    stray = sorted(set(values) - fields)
    if stray:
        raise TypeError(
            f"{request_type.__name__} has no field for the option(s) {', '.join(stray)}"
        )
    return request_type(**values)


# -- options several commands take, declared once -------------------------------------------

HISTORY = typer.Option(
    None,
    "--history",
    metavar="FILE|postgresql://...",
    help="History to record the run in: an SQLite file or a PostgreSQL URI (default: "
    "$GPUACCEPT_HISTORY, else ~/.local/share/gpuaccept/history.sqlite). A server that cannot "
    "be reached keeps the run in the spool ($GPUACCEPT_SPOOL) for `gpuaccept history push`.",
    rich_help_panel="History",
)
NO_HISTORY = typer.Option(
    False,
    "--no-history",
    help="Do not record this run in the history (nor compare it with the node's past).",
    rich_help_panel="History",
)
DROP_TOLERANCE = typer.Option(
    None,
    "--drop-tolerance",
    metavar="PERCENT",
    show_default="20 on a GPU, 50 on the CPU twins",
    help="Warn when a figure is more than PERCENT worse than the median of this node's last "
    "comparable runs in the history (docs/accept.md, 'Slower than it was').",
    rich_help_panel="History",
)
FAIL_ON_DROP = typer.Option(
    False,
    "--fail-on-drop",
    help="Fail the run (exit 1), not only warn, when a figure dropped past --drop-tolerance.",
    rich_help_panel="History",
)


_RULES = "TOML of the site's action tables over the built-in ones: what each XID, DCGM error or "


def rules_option(panel: str | None = None) -> Any:
    """--rules of every command that plans actions (accept, burnin, watch, preflight)."""
    said = _RULES + "finding recommends (docs/actions.md)."
    return typer.Option(None, "--rules", metavar="FILE", help=said, rich_help_panel=panel)


# -- the guards of `act slurm` and `node-verdict` (one policy: act.policy), and where their
# records and outputs go (the person's `act breaker` and `act regression` commands take --state)

BREAKER_PARTITION = typer.Option(
    None, "--partition", metavar="NAME", help="The nodes the breaker counts (default: all)."
)
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
ACT_STATE = typer.Option(
    None,
    "--state",
    metavar="FILE",
    help="gpuaccept's records of the breaker's trip and the regressions it holds (JSON; default "
    "$GPUACCEPT_ACT_STATE, else the data directory beside the history). Share one file between "
    "every node's health check (shared storage) so that the breaker counts the whole cluster.",
)
ACT_RECORD = typer.Option(
    None,
    "--record",
    metavar="FILE",
    help="Write what was decided for each node, and why, as JSON (replaced atomically).",
)
ACT_PROMETHEUS = typer.Option(
    None,
    "--prometheus",
    metavar="FILE",
    help="Write the decisions as node_exporter textfile metrics: gpuaccept_act_decision, "
    "gpuaccept_act_refused{guard=breaker|regression}.",
)

# -- how the fleet is judged: `history fleet` and `report --fleet` (commands.history.fleet)

FLEET_TOLERANCE = typer.Option(
    fleet_judging.TOLERANCE_PERCENT,
    "--tolerance",
    min=0,
    max=100,
    metavar="PERCENT",
    help="Flag a GPU more than this many percent worse than its model's fleet median.",
)
FLEET_MIN_GPUS = typer.Option(
    fleet_judging.MIN_GPUS,
    "--min-gpus",
    min=2,
    help="GPUs of a model needed before its median is trusted.",
)
FLEET_MTBI_DAYS = typer.Option(
    fleet_judging.MTBI_DAYS,
    "--mtbi-days",
    metavar="DAYS",
    help="The window (ending at the history's newest run) of the mean time between "
    "incidents per node and per GPU.",
)

FLEET_SINCE = typer.Option(
    None,
    "--since",
    metavar="WHEN",
    help="What changed in the fleet since then (newly failing, newly slower, returned to pass): "
    "hours or days before the history's newest run (24h, 7d) or an instant (2026-11-28T06:00, "
    "UTC unless it says); default 24h.",
)

# -- where a training run's report goes: `train mnist` and `train llm` (commands.train_*)

TRAIN_REPORT_DIR = typer.Option(
    None, "--report-dir", help="Write the JSON report (with environment capture) here."
)


class DeviceChoice(StrEnum):
    auto = "auto"
    cuda = "cuda"
    cpu = "cpu"


def option(default: object, flag: str, metavar: str, text: str) -> Any:
    """A plain option on one line: its default, flag, metavar and help (watch's, preflight's and
    sweep's, which need no panel, range or callback)."""
    return typer.Option(default, flag, metavar=metavar, help=text)


def device_option(help_text: str, panel: str | None = None) -> Any:
    """Every command's --device: one choice, refused by the parser in one line (train and bench
    took it as text and refused it later, each in its own words), each command saying it its way."""
    return typer.Option(
        DeviceChoice.auto,
        "--device",
        metavar="[auto|cuda|cpu]",
        help=help_text,
        rich_help_panel=panel,
    )


# accept's and burnin's, in the help panel "What to run"
DEVICE = device_option("auto (GPU when usable), cuda, or cpu (the CPU twins).", "What to run")
JUNIT = typer.Option(
    None, "--junit", metavar="FILE", help="Write JUnit XML.", rich_help_panel="Outputs"
)


def report_dir_option(holding: str) -> Any:
    """accept's and burnin's --report-dir: the same option, each saying what its report holds."""
    return typer.Option(
        None,
        "--report-dir",
        metavar="DIR",
        help=f"Write the JSON report ({holding}) here, as a new file.",
        rich_help_panel="Outputs",
    )
