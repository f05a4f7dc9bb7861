"""`gpuaccept accept`: the acceptance suite."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpuaccept.cli.options import finite_number
from gpuaccept.cli.recording import (
    DROP_TOLERANCE,
    FAIL_ON_DROP,
    HISTORY,
    NO_HISTORY,
    DropPolicy,
    compared_with_history,
    drop_policy,
    history_target,
    record_run,
)
from gpuaccept.errors import CheckFailed, InputError, Interrupted
from gpuaccept.suite.selection import (
    DEFAULT_TIMEOUT_SECONDS,
    LEVELS,
    CheckSpec,
    check_names,
    select_checks,
)

if TYPE_CHECKING:
    from gpuaccept.actions import ActionRules
    from gpuaccept.node_profile import NodeExpectation
    from gpuaccept.probe.hardware import ExpectedGpus
    from gpuaccept.references import ReferenceTable
    from gpuaccept.results import RunReport
    from gpuaccept.store.history import HistoryLocation
    from gpuaccept.suite.multinode import Launch


class Level(StrEnum):
    quick = "quick"
    standard = "standard"
    full = "full"


class DeviceChoice(StrEnum):
    auto = "auto"
    cuda = "cuda"
    cpu = "cpu"


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
    device: DeviceChoice = typer.Option(
        DeviceChoice.auto,
        "--device",
        metavar="[auto|cuda|cpu]",
        help="auto (GPU when usable), cuda, or cpu (the CPU twins).",
        rich_help_panel="What to run",
    ),
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
    report_dir: Path | None = typer.Option(
        None,
        "--report-dir",
        metavar="DIR",
        help="Write the JSON report (with environment capture) here, as a new file.",
        rich_help_panel="Outputs",
    ),
    junit: Path | None = typer.Option(
        None, "--junit", metavar="FILE", help="Write JUnit XML.", rich_help_panel="Outputs"
    ),
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
    rules: Path | None = typer.Option(
        None,
        "--rules",
        metavar="FILE",
        help="TOML of the site's action tables over the built-in ones: what each XID, DCGM "
        "error or finding recommends (docs/actions.md).",
        rich_help_panel="Judging",
    ),
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

    def body(report_out: list[RunReport] | None) -> None:
        from gpuaccept.cli.signals import interrupts_as_exceptions

        # from the first moment accept can be signalled, a signal leaves a report (issue #50 §7):
        # stopped before the run's own report was written (planning, importing the suite, starting
        # its workers), the INTERRUPTED report of a run that ran no check is written instead
        written: list[RunReport] = report_out if report_out is not None else []
        one_node = True
        with interrupts_as_exceptions():
            started, clock = datetime.now(UTC), time.monotonic()
            try:
                plan = _planned()
                one_node = plan.launch is None
                _carried_out(plan, report_out, written)
            except Interrupted as error:
                if report_out is None and report_dir is not None and one_node and not written:
                    early = _interrupted_early(level.value, device.value, started, clock, error)
                    _write_early(early, report_dir)
                raise

    def _planned() -> AcceptPlan:
        return _plan(
            level=level.value,
            only=only,
            skip=skip,
            device=device.value,
            expect_gpus=expect_gpus,
            baseline=baseline,
            record_baseline=record_baseline,
            baseline_runs=baseline_runs,
            report_dir=report_dir,
            junit=junit,
            check_timeout=check_timeout,
            dcgm=dcgm,
            min_busbw=min_busbw,
            min_other_busbw={
                collective: floor
                for collective, floor in (
                    ("all_gather", min_allgather_busbw),
                    ("all_to_all", min_alltoall_busbw),
                )
                if floor is not None
            },
            pairwise=pairwise,
            isolate=isolate,
            topology=topology,
            rails=rails,
            rails_tolerance=rails_tolerance,
            history=history,
            no_history=no_history,
            drop=drop_policy(drop_tolerance, fail_on_drop),
            node=_node_expectation(node_profile, expect_nics, expect_nic_rate, expect_nvme),
            rules=rules,
            evidence=evidence,
        )

    def _carried_out(
        plan: AcceptPlan, report_out: list[RunReport] | None, written: list[RunReport]
    ) -> None:
        if plan.launch is not None and report_out is not None:
            raise InputError(
                f"--json is for one node: under {plan.launch.launcher} each node writes its own "
                "JSON report (--report-dir)"
            )
        if plan.launch is not None:
            from gpuaccept.cli.multinode import accept_across_nodes

            accept_across_nodes(
                plan.launch,
                plan.specs,
                level=plan.level,
                device=plan.device,
                expected=plan.expected,
                table=plan.table,
                report_dir=plan.report_dir,
                history_path=plan.history_path,
                dcgm=plan.dcgm,
                min_busbw=plan.min_busbw,
                min_other_busbw=plan.min_other_busbw,
                pairwise=plan.pairwise,
                isolation=plan.isolation,
                rails=plan.rails,
                node=plan.node,
                rules=plan.rules,
            )
            return
        # with --json the report (failed or interrupted too) is left in report_out to print
        reports, interrupted = _run(plan)
        _write(plan, reports, interrupted, written)

    if as_json:
        with _json_on_stdout(level.value, device.value) as report_out:
            body(report_out)
    else:
        body(None)


@contextlib.contextmanager
def _json_on_stdout(level: str, device: str) -> Iterator[list[RunReport]]:
    """`accept --json`: from the moment the option is parsed, stdout carries one JSON document,
    the report, and nothing else. File descriptor 1 itself is pointed at stderr for the run (so
    a library or a worker writing to it, in this process or one it starts, lands on stderr);
    the report goes to the saved stdout at the end. A signal before the run has a report too
    (an INTERRUPTED one)."""
    import os
    import sys

    from gpuaccept.cli.signals import interrupts_as_exceptions

    started, clock = datetime.now(UTC), time.monotonic()
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    report_out: list[RunReport] = []
    try:
        with contextlib.redirect_stdout(sys.stderr), interrupts_as_exceptions():
            try:
                yield report_out
            except Interrupted as error:
                if not report_out:  # stopped before the run had a report
                    report_out.append(_interrupted_early(level, device, started, clock, error))
                raise
    finally:
        sys.stderr.flush()
        os.dup2(saved, 1)
        os.close(saved)
        if report_out:
            sys.stdout.write(report_out[-1].model_dump_json(indent=2) + "\n")
            sys.stdout.flush()


def _write_early(report: RunReport, report_dir: Path) -> None:
    """The INTERRUPTED report of a run stopped while it was being planned, in --report-dir (a
    directory that cannot take it is said; the exit is the signal's all the same)."""
    from gpuaccept.errors import GpuacceptError
    from gpuaccept.report.json_report import write_json_report

    try:
        typer.echo(f"[REPORT] {write_json_report(report, report_dir)}")
    except GpuacceptError as error:
        typer.echo(
            f"gpuaccept accept: the interrupted run's report was not written: {error}", err=True
        )


def _interrupted_early(
    level: str, device: str, started: datetime, clock: float, error: Interrupted
) -> RunReport:
    """The INTERRUPTED report of a run stopped before any check ran: its mode as asked for, or
    under `auto` as the node's device files say (no torch is imported to tell)."""
    import os

    from gpuaccept.results import RunReport

    cuda = device == "cuda" or (device != "cpu" and os.path.exists("/dev/nvidia0"))
    return RunReport.completed(
        command="accept",
        level=level,
        device_mode="cuda" if cuda else "cpu",
        started=started,
        monotonic_start=clock,
        checks=[],
        environment={},
        interrupted_by=error.signum,
    )


def _node_expectation(
    profile: Path | None, nics: int | None, rate_gbps: float | None, nvme: int | None
) -> NodeExpectation | None:
    """The node profile's expectations with the options that override it; None: none given."""
    from gpuaccept.node_profile import NodeExpectation, load_node_profile

    base = load_node_profile(profile) if profile is not None else NodeExpectation()
    expected = base.with_overrides(nics=nics, nic_rate_gbps=rate_gbps, nvme=nvme)
    return None if expected.empty else expected


@dataclass(frozen=True)
class AcceptPlan:
    """Everything an accept run needs, checked before anything runs (plan -> run -> write)."""

    level: str
    specs: list[CheckSpec]
    device: str  # as asked: auto, cuda or cpu
    table: ReferenceTable
    expected: ExpectedGpus | None
    launch: Launch | None
    report_dir: Path | None
    junit: Path | None
    record_baseline: Path | None
    baseline_runs: int
    history_path: HistoryLocation | None
    check_timeout: float | None
    dcgm: int | None
    min_busbw: float | None
    pairwise: bool
    drop: DropPolicy  # how the run is held against this node's own history
    isolation: dict[str, str] | None = None  # --isolate: node -> switch (empty: unknown)
    rails: float | None = None  # --rails: its tolerance in percent
    node: NodeExpectation | None = None
    rules: ActionRules | None = None  # the site's action tables (--rules); None: built-in
    evidence: Path | None = None  # where a failure's vendor archive goes (--evidence)
    # --min-allgather-busbw, --min-alltoall-busbw: "all_gather" -> GB/s
    min_other_busbw: dict[str, float] = field(default_factory=dict)


def _plan(
    *,
    level: str,
    only: list[str],
    skip: list[str],
    device: str,
    expect_gpus: int | None,
    baseline: Path | None,
    record_baseline: Path | None,
    baseline_runs: int,
    report_dir: Path | None,
    junit: Path | None,
    check_timeout: float | None,
    dcgm: int | None,
    min_busbw: float | None,
    pairwise: bool,
    history: str | None,
    no_history: bool,
    drop: DropPolicy,
    isolate: bool = False,
    topology: Path | None = None,
    rails: bool = False,
    rails_tolerance: float | None = None,
    node: NodeExpectation | None = None,
    rules: Path | None = None,
    evidence: Path | None = None,
    min_other_busbw: dict[str, float] | None = None,
) -> AcceptPlan:
    """Refuse every input that could be wrong, before any work (exit 2 with one line)."""
    from gpuaccept import references as refs
    from gpuaccept.actions import load_rules
    from gpuaccept.burnin.judging import DEFAULT_STRAGGLER_TOLERANCE_PERCENT as STRAGGLER_TOLERANCE
    from gpuaccept.cli.recording import history_path as recorded_in
    from gpuaccept.output_files import (
        check_output_directory,
        check_output_file,
        refuse_collisions,
    )
    from gpuaccept.probe.hardware import (
        ExpectedGpus,
        check_nvml_init_timeout_setting,
        expected_gpu_count,
        nvml_module_name,
    )
    from gpuaccept.probe.kernel_log import check_kernel_log_setting
    from gpuaccept.probe.sysfs import check_sysfs_root_setting
    from gpuaccept.suite.multinode import check_node_settings, detect_launch

    nvml_module_name()
    check_nvml_init_timeout_setting()
    check_node_settings()
    check_kernel_log_setting()
    check_sysfs_root_setting()
    launch = detect_launch()
    one_node = {"--junit": junit, "--record-baseline": record_baseline, "--evidence": evidence}
    if launch is not None and any(v is not None for v in one_node.values()):
        flag = next(k for k, v in one_node.items() if v is not None)
        raise InputError(
            f"{flag} is for one node: under {launch.launcher} each node writes its "
            "own JSON report (--report-dir)"
        )
    isolation = _isolation(isolate, topology, launch is not None, min_busbw)
    if pairwise and launch is None:
        raise InputError(
            "--pairwise compares nodes: run accept under torchrun or srun across nodes "
            "(slurm/accept-multinode.sbatch, k8s/multinode-indexed-job.yaml)"
        )
    if rails_tolerance is not None and not rails:
        raise InputError("--rails-tolerance judges --rails: give both, or neither")
    if rails and launch is None:
        raise InputError(
            "--rails runs one GPU of every node per rail: run accept under torchrun or srun "
            "across nodes (slurm/accept-multinode.sbatch, k8s/multinode-indexed-job.yaml)"
        )
    asked = ("dcgm",) if dcgm else ()
    specs = select_checks(level, only, [*skip, "dcgm"] if dcgm == 0 else skip, asked)
    table = refs.load_shipped_references()
    if baseline is not None:
        table = table.with_overrides(refs.load_baseline(baseline))
    if report_dir is not None:
        check_output_directory(report_dir, "--report-dir")
    if junit is not None:
        check_output_file(junit, "--junit")
    if evidence is not None:
        check_output_directory(evidence, "--evidence")
    if record_baseline is not None:
        check_output_file(record_baseline, "--record-baseline")
    action_rules = load_rules(rules) if rules is not None else None
    refuse_collisions(
        {
            "--history": recorded_in(history, no_history),
            "--junit": junit,
            "--record-baseline": record_baseline,
        },
        {"--baseline": baseline, "--rules": rules},
    )
    history_path = history_target(history, no_history)
    if launch is None:
        from gpuaccept.distributed.children import start_server

        start_server()  # its torch import runs beside this process's own
    expected = (
        ExpectedGpus(expect_gpus, "--expect-gpus")
        if expect_gpus is not None
        else expected_gpu_count()
    )
    return AcceptPlan(
        level=level,
        specs=specs,
        device=device,
        table=table,
        expected=expected,
        launch=launch,
        report_dir=report_dir,
        junit=junit,
        record_baseline=record_baseline,
        baseline_runs=baseline_runs,
        history_path=history_path,
        check_timeout=check_timeout,
        dcgm=dcgm,
        min_busbw=min_busbw,
        pairwise=pairwise,
        isolation=isolation,
        rails=(rails_tolerance if rails_tolerance is not None else STRAGGLER_TOLERANCE)
        if rails
        else None,
        drop=drop,
        node=node,
        rules=action_rules,
        evidence=evidence,
        min_other_busbw=dict(min_other_busbw or {}),
    )


def _run(plan: AcceptPlan) -> tuple[list[RunReport], Interrupted | None]:
    """The suite on this node's GPUs (several runs for --record-baseline); the reports, and the
    interruption that stopped them, if one did."""
    from gpuaccept import references as refs
    from gpuaccept.checks.context import CheckContext
    from gpuaccept.cli.progress import suite_display
    from gpuaccept.probe.hardware import list_cuda_gpus, resolve_device_mode
    from gpuaccept.record.environment import capture_environment
    from gpuaccept.report.console import CPU_MODE_LINE, environment_line
    from gpuaccept.results import RunReport
    from gpuaccept.suite import DEFAULT_TIMEOUT_SECONDS, level_settings, run_acceptance
    from gpuaccept.suite.runner import skipped

    mode = resolve_device_mode(plan.device)
    gpus = [(gpu.index, gpu.uuid) for gpu in list_cuda_gpus()] if mode == "cuda" else []
    context = CheckContext(
        level=plan.level,
        device_mode=mode,
        settings=level_settings(plan.level, mode),
        references=refs.without_metrics(plan.table) if plan.record_baseline else plan.table,
        expected=plan.expected,
        dcgm_level=plan.dcgm,
        min_busbw_gbps=plan.min_busbw,
        min_other_busbw_gbps=plan.min_other_busbw,
        node=plan.node,
        action_rules=plan.rules,
    )
    reports: list[RunReport] = []
    capture_started, capture_clock = datetime.now(UTC), time.monotonic()
    try:
        environment = capture_environment()
    except Interrupted as stopped:
        # a signal before any check ran: the report still says so, every check not run
        typer.echo(f"[RUN] {stopped}: stopped before the first check, writing the report")
        reports.append(
            RunReport.completed(
                command="accept",
                level=plan.level,
                device_mode=mode,
                started=capture_started,
                monotonic_start=capture_clock,
                checks=[skipped(spec, f"not run: the run was {stopped}") for spec in plan.specs],
                environment={},
                interrupted_by=stopped.signum,
                rules=plan.rules,
            )
        )
        return reports, stopped
    typer.echo(environment_line(f"gpuaccept accept --level {plan.level}", environment))
    if mode == "cpu":
        typer.echo(CPU_MODE_LINE)
    timeout = plan.check_timeout or DEFAULT_TIMEOUT_SECONDS[plan.level]
    runs = plan.baseline_runs if plan.record_baseline else 1
    for run in range(runs):
        if runs > 1:
            typer.echo(f"[BASELINE] run {run + 1} of {runs}")
        with suite_display() as display:
            outcome = run_acceptance(plan.specs, context, timeout, environment, gpus, display)
        reports.append(outcome.report)
        if outcome.interrupted is not None:
            typer.echo(f"[RUN] {outcome.interrupted}: stopped the checks, writing what finished")
            return reports, outcome.interrupted
    return reports, None


def _evidence(report: RunReport, directory: Path) -> None:
    """The vendor archive of a failure that takes something out of service; a failure to write
    it is said and changes no verdict or exit (the report is written already)."""
    from gpuaccept.errors import GpuacceptError
    from gpuaccept.evidence.bundle import wanted, write_evidence
    from gpuaccept.report.node_verdict import node_of

    if not wanted(report):
        return
    typer.echo("[EVIDENCE] collecting (nvidia-smi -q, nvidia-bug-report.sh: minutes at most)")
    try:
        found = write_evidence(report, node_of(report) or "node", directory)
    except GpuacceptError as error:
        typer.echo(f"[EVIDENCE] not written: {error}", err=True)
        return
    missing = "; ".join(f"{name}: {why}" for name, why in found.missing.items())
    typer.echo(f"[EVIDENCE] {found.path} ({len(found.members) + 1} files)")
    if missing:
        typer.echo(f"[EVIDENCE] not collected: {missing}")
    if found.cut:
        typer.echo("[EVIDENCE] cut: " + "; ".join(f"{n}: {w}" for n, w in found.cut.items()))


def _write(
    plan: AcceptPlan,
    reports: list[RunReport],
    interrupted: Interrupted | None,
    written: list[RunReport],
) -> None:
    """Every output the run was asked for, the history, the baseline, and the exit the
    verdict gives; the final report is added to `written` as soon as it is complete."""
    import sys

    from gpuaccept import references as refs
    from gpuaccept.report.console import action_lines, result_line, summary_table, summary_text

    if interrupted is None:
        reports = [
            compared_with_history(r, plan.history_path, plan.drop, plan.rules) for r in reports
        ]
    report = reports[-1]
    written.append(report)
    if plan.report_dir is not None:
        from gpuaccept.report.json_report import write_json_report

        typer.echo(f"[REPORT] {write_json_report(report, plan.report_dir)}")
    if plan.junit is not None:
        from gpuaccept.report.junit import write_junit

        write_junit(report, plan.junit)
        typer.echo(f"[REPORT] {plan.junit}")
    for run_report in reports:
        record_run(run_report, plan.history_path)
    if sys.stdout.isatty():
        from rich.console import Console

        Console().print(summary_table(report))
    else:  # a job log gets the same table, in plain ASCII
        typer.echo(summary_text(report))
    if interrupted is None and plan.record_baseline is not None:
        unfit = [r.verdict for r in reports if not r.verdict.passed]
        if unfit:
            raise CheckFailed(
                f"not recording a baseline: a run of this node ended {unfit[0].label}"
            )
        figures = refs.baseline_figures(reports)
        if not figures:
            raise InputError("no referenceable figure was measured: nothing to record")
        refs.write_baseline(
            plan.record_baseline,
            figures,
            note=f"median of {len(reports)} run(s), level {plan.level}",
        )
        typer.echo(f"[BASELINE] wrote {plan.record_baseline}")
    for line in action_lines(report):
        typer.echo(line)
    if plan.evidence is not None and interrupted is None:
        _evidence(report, plan.evidence)
    typer.echo(result_line(report))
    if report.verdict.exit_code:
        raise typer.Exit(report.verdict.exit_code)


def _isolation(
    isolate: bool, topology: Path | None, launched: bool, min_busbw: float | None
) -> dict[str, str] | None:
    """--isolate's node -> switch map (empty without --topology), checked before any work."""
    if topology is not None and not isolate:
        raise InputError("--topology guides --isolate: give both, or neither")
    if not isolate:
        return None
    topology_map: dict[str, str] = {}
    if topology is not None:  # the file first: a bad one is said whatever else is wrong
        from gpuaccept.suite.topology import read_topology

        topology_map = read_topology(topology)
    if not launched:
        raise InputError(
            "--isolate finds the bad nodes of a multi-node job: run accept under torchrun or "
            "srun across nodes (slurm/accept-multinode.sbatch)"
        )
    if min_busbw is None:
        raise InputError(
            "--isolate holds each group of nodes to a floor: give --min-busbw GBPS (what this "
            "fabric's all-reduce must reach, e.g. from nccl-tests on known-good nodes)"
        )
    return topology_map
