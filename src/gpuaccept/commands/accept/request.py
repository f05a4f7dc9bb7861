"""What `gpuaccept accept` is asked to do: every value its options give, already parsed.

Each field is its option (commands.options): the flag, help, panel and bounds are declared on
it once, and the request holds its own values to those bounds (a caller without Typer gets the
same bounds, each refused in one line naming the option); what needs the node or the files to
judge, the combinations of options and the one-node-only outputs, is refused by the plan
(commands/accept/plan.py). The defaults are the options'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from gpuaccept.commands.options import (
    DEVICE,
    DROP_TOLERANCE,
    FAIL_ON_DROP,
    HISTORY,
    JUNIT,
    NO_HISTORY,
    check_bounds,
    opt,
    report_dir_opt,
    rules_opt,
)
from gpuaccept.errors import InputError
from gpuaccept.suite.selection import DEFAULT_TIMEOUT_SECONDS, LEVELS, check_names

_RUN, _JUDGING, _NODE, _ACROSS, _OUT = (
    "What to run",
    "Judging",
    "The node beyond its GPUs",
    "Across nodes",
    "Outputs",
)
_TIMEOUTS = ", ".join(f"{name} {limit:g}" for name, limit in DEFAULT_TIMEOUT_SECONDS.items())
_EVIDENCE = (
    "On a failure whose action is reset-gpu, reboot-node, drain or replace, write one archive "
    "for the vendor here: the report, the kernel log around the XIDs, nvidia-smi -q, "
    "nvidia-bug-report.sh, DCGM's results, InfiniBand counters, serials; credentials scrubbed "
    "(docs/actions.md)."
)
_DCGM = (
    "Run DCGM's `dcgmi diag -r N` (1-4) and fold its tests in; 0: never. Default: -r 3 at level "
    "full, off otherwise."
)
_MIN_BUSBW = (
    "Fail the all-reduce below 0.9 x this bus bandwidth (GB/s), like NCCL_TESTS_MIN_BW; accept "
    "runs one size, so it is nccl-tests -b SIZE -e SIZE (bench collectives compares the "
    "average over its sweep)."
)
_MIN_ALLGATHER = (
    "Fail the all-gather below 0.9 x this bus bandwidth (GB/s), as --min-busbw does the "
    "all-reduce (no floor is published: take it from nccl-tests' all_gather_perf on known-good "
    "nodes)."
)
_MIN_ALLTOALL = (
    "Fail the all-to-all below 0.9 x this bus bandwidth (GB/s), as --min-busbw does the "
    "all-reduce (from nccl-tests' alltoall_perf on known-good nodes)."
)
_NODE_PROFILE = (
    "TOML of what the node must have beyond its GPUs: NICs and their rate, NVMe, CPUs, host "
    "memory and scratch bandwidth (docs/fabric.md); the --expect-* options override it."
)
_PAIRWISE = (
    "Across nodes (torchrun or srun): all-reduce between every pair of nodes and name the slow "
    "or failing node."
)
_ISOLATE = (
    "Across nodes: find the bad nodes in O(log N) rounds (each node alone, the job, halves of "
    "failing groups, each suspect beside a known-good node), each group's all-reduce held to "
    "--min-busbw, which it needs."
)
_RAILS = (
    "Across nodes: every rail at once (local rank k of every node: one GPU per node, the "
    'inter-node network alone, as nccl-tests\' NCCL_TESTS_SPLIT="MOD 8"); a rail below the '
    "rails' best by more than --rails-tolerance fails."
)
_RAILS_TOLERANCE = (
    "With --rails: how far below the best rate a second rail confirms a rail may be (the "
    "burn-in's straggler rule, gpu-fryer's 10%)."
)
_TOPOLOGY = (
    "With --isolate: which switch each node hangs off (`NODE SWITCH` lines, or Slurm's "
    "topology.conf / `scontrol show topology`): halves split along switches, a switch whose "
    "every node fails is named."
)
_JSON = "Print the JSON report on stdout when the run ends (the run's lines go to stderr)."
_PATHS = (
    "baseline",
    "record_baseline",
    "rules",
    "node_profile",
    "topology",
    "report_dir",
    "junit",
    "evidence",
)


@dataclass(frozen=True, kw_only=True)
class AcceptRequest:
    """One accept run as asked for; strings where the options are choices (level, device)."""

    # what to run
    level: Annotated[
        str,
        opt(
            "--level",
            None,
            "quick (seconds), standard (a minute) or full (stress, minutes).",
            panel=_RUN,
            choices=LEVELS,
        ),
    ] = "standard"
    only: Annotated[
        Sequence[str],
        opt(
            "--only",
            "CHECK",
            f"Run only this check (repeatable): {', '.join(check_names())}.",
            panel=_RUN,
        ),
    ] = ()
    skip: Annotated[
        Sequence[str], opt("--skip", "CHECK", "Leave out this check (repeatable).", panel=_RUN)
    ] = ()
    device: Annotated[str, DEVICE] = "auto"
    expect_gpus: Annotated[
        int | None,
        opt(
            "--expect-gpus",
            "N",
            "GPUs that must be usable; default: what the scheduler assigned.",
            panel=_RUN,
            least=0,
        ),
    ] = None
    # judging
    baseline: Annotated[
        Path | None,
        opt(
            "--baseline",
            "FILE",
            "TOML file of reference figures overriding the shipped ones.",
            panel=_JUDGING,
        ),
    ] = None
    record_baseline: Annotated[
        Path | None,
        opt(
            "--record-baseline",
            "FILE",
            "Measure a known-good node and write its figures (median of runs) as a baseline.",
            panel=_JUDGING,
        ),
    ] = None
    baseline_runs: Annotated[
        int,
        opt(
            "--baseline-runs",
            "N",
            "Runs whose median --record-baseline takes.",
            panel=_JUDGING,
            least=1,
        ),
    ] = 3
    # outputs
    report_dir: Annotated[Path | None, report_dir_opt("with environment capture")] = None
    junit: Annotated[Path | None, JUNIT] = None
    evidence: Annotated[Path | None, opt("--evidence", "DIR", _EVIDENCE, panel=_OUT)] = None
    check_timeout: Annotated[
        float | None,
        opt(
            "--check-timeout",
            "SECONDS",
            f"Seconds each check may take (default: {_TIMEOUTS}).",
            panel=_RUN,
            least=1,
            finite="number of seconds",
        ),
    ] = None
    # dcgmi diag -r N; 0: never; None: the level's default
    dcgm: Annotated[int | None, opt("--dcgm", "N", _DCGM, panel=_RUN, least=0, most=4)] = None
    rules: Annotated[Path | None, rules_opt(_JUDGING)] = None
    min_busbw: Annotated[
        float | None,
        opt("--min-busbw", "GBPS", _MIN_BUSBW, panel=_JUDGING, least=0, finite="number"),
    ] = None
    min_allgather_busbw: Annotated[
        float | None,
        opt(
            "--min-allgather-busbw",
            "GBPS",
            _MIN_ALLGATHER,
            panel=_JUDGING,
            least=0,
            finite="number",
        ),
    ] = None
    min_alltoall_busbw: Annotated[
        float | None,
        opt(
            "--min-alltoall-busbw", "GBPS", _MIN_ALLTOALL, panel=_JUDGING, least=0, finite="number"
        ),
    ] = None
    # the node beyond its GPUs
    node_profile: Annotated[
        Path | None, opt("--node-profile", "FILE", _NODE_PROFILE, panel=_NODE)
    ] = None
    expect_nics: Annotated[
        int | None,
        opt(
            "--expect-nics",
            "N",
            "InfiniBand/RoCE ports that must be ACTIVE (e.g. 8 on an HGX H100 node).",
            panel=_NODE,
            least=0,
        ),
    ] = None
    expect_nic_rate: Annotated[
        float | None,
        opt(
            "--expect-nic-rate",
            "GBPS",
            "Rate every such port must run at, Gb/s (400 for NDR).",
            panel=_NODE,
            least=0,
            finite="number",
        ),
    ] = None
    expect_nvme: Annotated[
        int | None,
        opt("--expect-nvme", "N", "NVMe controllers the node must have.", panel=_NODE, least=0),
    ] = None
    # across nodes
    pairwise: Annotated[bool, opt("--pairwise", text=_PAIRWISE, panel=_ACROSS)] = False
    isolate: Annotated[bool, opt("--isolate", text=_ISOLATE, panel=_ACROSS)] = False
    rails: Annotated[bool, opt("--rails", text=_RAILS, panel=_ACROSS)] = False
    rails_tolerance: Annotated[
        float | None,
        opt(
            "--rails-tolerance",
            "PERCENT",
            _RAILS_TOLERANCE,
            panel=_ACROSS,
            least=0,
            most=99,
            finite="number",
        ),
    ] = None
    topology: Annotated[Path | None, opt("--topology", "FILE", _TOPOLOGY, panel=_ACROSS)] = None
    # the report goes to stdout at the end (the caller prints it)
    as_json: Annotated[bool, opt("--json", text=_JSON, panel=_OUT)] = False
    # history
    history: Annotated[str | None, HISTORY] = None
    no_history: Annotated[bool, NO_HISTORY] = False
    drop_tolerance: Annotated[float | None, DROP_TOLERANCE] = None
    fail_on_drop: Annotated[bool, FAIL_ON_DROP] = False

    def __post_init__(self) -> None:
        for name in ("only", "skip"):
            if isinstance(getattr(self, name), str):  # a string is a sequence of letters
                raise InputError(f"--{name}: give a list of check names, not one string")
        for name in _PATHS:  # a path may come as text from a caller; held as a Path
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, Path(value))
        check_bounds(self)

    def min_other_busbw(self) -> dict[str, float]:
        """--min-allgather-busbw and --min-alltoall-busbw by collective: "all_gather" -> GB/s."""
        return {
            collective: floor
            for collective, floor in (
                ("all_gather", self.min_allgather_busbw),
                ("all_to_all", self.min_alltoall_busbw),
            )
            if floor is not None
        }
