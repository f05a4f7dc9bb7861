"""`gpuaccept accept`: the acceptance suite's options; the run itself is commands.accept.

Level stays here; DeviceChoice, which burnin's --device takes too, is cli.options' (kept importable
from here).
"""

from __future__ import annotations

import contextlib
import math
from contextlib import AbstractContextManager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpuaccept.cli.options import (
    DEVICE,
    DROP_TOLERANCE,
    FAIL_ON_DROP,
    HISTORY,
    JUNIT,
    NO_HISTORY,
    DeviceChoice,
    finite_number,
    report_dir_option,
    request_from,
    rules_option,
)
from gpuaccept.suite.selection import DEFAULT_TIMEOUT_SECONDS, LEVELS, check_names

if TYPE_CHECKING:
    from gpuaccept.results import RunReport


class Level(StrEnum):
    quick = "quick"
    standard = "standard"
    full = "full"


def _finite_seconds(value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"must be a finite number of seconds (got {value})")
    return value


_CHECKS = ", ".join(check_names())
_LEVELS = "[" + "|".join(LEVELS) + "]"
_TIMEOUTS = ", ".join(f"{name} {limit:g}" for name, limit in DEFAULT_TIMEOUT_SECONDS.items())


def accept(
    level: Level = typer.Option(
        Level.standard,
        "--level",
        metavar=_LEVELS,
        help="quick (seconds), standard (a minute) or full (stress, minutes).",
        rich_help_panel="What to run",
    ),
    only: list[str] = typer.Option(
        [],
        "--only",
        metavar="CHECK",
        help=f"Run only this check (repeatable): {_CHECKS}.",
        rich_help_panel="What to run",
    ),
    skip: list[str] = typer.Option(
        [],
        "--skip",
        metavar="CHECK",
        help="Leave out this check (repeatable).",
        rich_help_panel="What to run",
    ),
    device: DeviceChoice = DEVICE,
    expect_gpus: int | None = typer.Option(
        None,
        "--expect-gpus",
        min=0,
        metavar="N",
        help="GPUs that must be usable; default: what the scheduler assigned.",
        rich_help_panel="What to run",
    ),
    baseline: Path | None = typer.Option(
        None,
        "--baseline",
        metavar="FILE",
        help="TOML file of reference figures overriding the shipped ones.",
        rich_help_panel="Judging",
    ),
    record_baseline: Path | None = typer.Option(
        None,
        "--record-baseline",
        metavar="FILE",
        help="Measure a known-good node and write its figures (median of runs) as a baseline.",
        rich_help_panel="Judging",
    ),
    baseline_runs: int = typer.Option(
        3,
        "--baseline-runs",
        min=1,
        metavar="N",
        help="Runs whose median --record-baseline takes.",
        rich_help_panel="Judging",
    ),
    report_dir: Path | None = report_dir_option("with environment capture"),
    junit: Path | None = JUNIT,
    evidence: Path | None = typer.Option(
        None,
        "--evidence",
        metavar="DIR",
        help="On a failure whose action is reset-gpu, reboot-node, drain or replace, write one "
        "archive for the vendor here: the report, the kernel log around the XIDs, nvidia-smi "
        "-q, nvidia-bug-report.sh, DCGM's results, InfiniBand counters, serials; credentials "
        "scrubbed (docs/actions.md).",
        rich_help_panel="Outputs",
    ),
    check_timeout: float | None = typer.Option(
        None,
        "--check-timeout",
        min=1,
        metavar="SECONDS",
        callback=_finite_seconds,
        help=f"Seconds each check may take (default: {_TIMEOUTS}).",
        rich_help_panel="What to run",
    ),
    dcgm: int | None = typer.Option(
        None,
        "--dcgm",
        min=0,
        max=4,
        metavar="N",
        help="Run DCGM's `dcgmi diag -r N` (1-4) and fold its tests in; 0: never. "
        "Default: -r 3 at level full, off otherwise.",
        rich_help_panel="What to run",
    ),
    rules: Path | None = rules_option("Judging"),
    min_busbw: float | None = typer.Option(
        None,
        "--min-busbw",
        min=0,
        metavar="GBPS",
        callback=finite_number,
        help="Fail the all-reduce below 0.9 x this bus bandwidth (GB/s), like "
        "NCCL_TESTS_MIN_BW; accept runs one size, so it is nccl-tests -b SIZE -e SIZE "
        "(bench collectives compares the average over its sweep).",
        rich_help_panel="Judging",
    ),
    min_allgather_busbw: float | None = typer.Option(
        None,
        "--min-allgather-busbw",
        min=0,
        metavar="GBPS",
        callback=finite_number,
        help="Fail the all-gather below 0.9 x this bus bandwidth (GB/s), as --min-busbw does "
        "the all-reduce (no floor is published: take it from nccl-tests' all_gather_perf on "
        "known-good nodes).",
        rich_help_panel="Judging",
    ),
    min_alltoall_busbw: float | None = typer.Option(
        None,
        "--min-alltoall-busbw",
        min=0,
        metavar="GBPS",
        callback=finite_number,
        help="Fail the all-to-all below 0.9 x this bus bandwidth (GB/s), as --min-busbw does "
        "the all-reduce (from nccl-tests' alltoall_perf on known-good nodes).",
        rich_help_panel="Judging",
    ),
    node_profile: Path | None = typer.Option(
        None,
        "--node-profile",
        metavar="FILE",
        help="TOML of what the node must have beyond its GPUs: NICs and their rate, NVMe, CPUs, "
        "host memory and scratch bandwidth (docs/fabric.md); the --expect-* options override it.",
        rich_help_panel="The node beyond its GPUs",
    ),
    expect_nics: int | None = typer.Option(
        None,
        "--expect-nics",
        min=0,
        metavar="N",
        help="InfiniBand/RoCE ports that must be ACTIVE (e.g. 8 on an HGX H100 node).",
        rich_help_panel="The node beyond its GPUs",
    ),
    expect_nic_rate: float | None = typer.Option(
        None,
        "--expect-nic-rate",
        min=0,
        metavar="GBPS",
        callback=finite_number,
        help="Rate every such port must run at, Gb/s (400 for NDR).",
        rich_help_panel="The node beyond its GPUs",
    ),
    expect_nvme: int | None = typer.Option(
        None,
        "--expect-nvme",
        min=0,
        metavar="N",
        help="NVMe controllers the node must have.",
        rich_help_panel="The node beyond its GPUs",
    ),
    pairwise: bool = typer.Option(
        False,
        "--pairwise",
        help="Across nodes (torchrun or srun): all-reduce between every pair of nodes and "
        "name the slow or failing node.",
        rich_help_panel="Across nodes",
    ),
    isolate: bool = typer.Option(
        False,
        "--isolate",
        help="Across nodes: find the bad nodes in O(log N) rounds (each node alone, the job, "
        "halves of failing groups, each suspect beside a known-good node), each group's "
        "all-reduce held to --min-busbw, which it needs.",
        rich_help_panel="Across nodes",
    ),
    rails: bool = typer.Option(
        False,
        "--rails",
        help="Across nodes: every rail at once (local rank k of every node: one GPU per node, "
        'the inter-node network alone, as nccl-tests\' NCCL_TESTS_SPLIT="MOD 8"); a rail '
        "below the rails' best by more than --rails-tolerance fails.",
        rich_help_panel="Across nodes",
    ),
    rails_tolerance: float | None = typer.Option(
        None,
        "--rails-tolerance",
        min=0,
        max=99,
        metavar="PERCENT",
        help="With --rails: how far below the best rate a second rail confirms a rail may be "
        "(the burn-in's straggler rule, gpu-fryer's 10%).",
        rich_help_panel="Across nodes",
    ),
    topology: Path | None = typer.Option(
        None,
        "--topology",
        metavar="FILE",
        help="With --isolate: which switch each node hangs off (`NODE SWITCH` lines, or Slurm's "
        "topology.conf / `scontrol show topology`): halves split along switches, a switch "
        "whose every node fails is named.",
        rich_help_panel="Across nodes",
    ),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print the JSON report on stdout when the run ends (the run's lines go to stderr).",
        rich_help_panel="Outputs",
    ),
    history: str | None = HISTORY,
    no_history: bool = NO_HISTORY,
    drop_tolerance: float | None = DROP_TOLERANCE,
    fail_on_drop: bool = FAIL_ON_DROP,
) -> None:
    """Run the acceptance suite on the GPUs this process was given.

    Exit 0: fit (warnings allowed); 1: a check failed, or nothing could be judged; 2: bad input;
    3: environment error; 130/143: interrupted by SIGINT/SIGTERM (the report is still written).
    """
    options = dict(locals())  # first: the options as parsed, and nothing else yet
    from gpuaccept.cli.render import CONSOLE
    from gpuaccept.cli.signals import interrupts_as_exceptions

    json_out: AbstractContextManager[list[RunReport] | None] = contextlib.nullcontext(None)
    if as_json:  # first: from the moment the option is parsed, stdout is the report's alone
        from gpuaccept.cli.accept_json import json_on_stdout

        json_out = json_on_stdout(level.value, device.value)
    with json_out as written:
        from gpuaccept.commands.accept import AcceptRequest, run

        request = request_from(AcceptRequest, options)
        with interrupts_as_exceptions():
            result = run(request, CONSOLE, written)
        if result.exit_code:  # inside --json's block: its report is printed all the same
            raise typer.Exit(result.exit_code)
