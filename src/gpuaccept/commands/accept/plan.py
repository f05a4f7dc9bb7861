"""An accept run's plan: every input that could be wrong refused before any work is done.

Minutes of measuring must not end in "the report directory is not writable": the settings the
probes read, the files the run reads and writes, the combinations of options and the history are
all checked here, each refusal one line (exit 2). The order of the checks is the order users meet
their errors in, and stays as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gpuaccept.commands.recording import DropPolicy, drop_policy, history_path, history_target
from gpuaccept.errors import InputError

if TYPE_CHECKING:
    from gpuaccept.actions import ActionRules
    from gpuaccept.commands.accept.request import AcceptRequest
    from gpuaccept.commands.output import Output
    from gpuaccept.node_profile import NodeExpectation
    from gpuaccept.probe.hardware import ExpectedGpus
    from gpuaccept.references import ReferenceTable
    from gpuaccept.store.history import HistoryLocation
    from gpuaccept.suite.multinode import Launch
    from gpuaccept.suite.selection import CheckSpec


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


def plan_accept(request: AcceptRequest, out: Output) -> AcceptPlan:
    """The request checked and resolved; a refusal is an InputError (or EnvironmentProblem)
    with one line. Starts the warm workers' server on one node: their torch import runs while
    the environment is captured."""
    drop = drop_policy(request.drop_tolerance, request.fail_on_drop, no_history=request.no_history)
    node = node_expectation(
        request.node_profile, request.expect_nics, request.expect_nic_rate, request.expect_nvme
    )
    return _plan(request, drop, node, out)


def _plan(
    request: AcceptRequest, drop: DropPolicy, node: NodeExpectation | None, out: Output
) -> AcceptPlan:
    from gpuaccept import references as refs
    from gpuaccept.actions import load_rules
    from gpuaccept.burnin.judging import DEFAULT_STRAGGLER_TOLERANCE_PERCENT as STRAGGLER_TOLERANCE
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
    from gpuaccept.suite.selection import select_checks

    r = request
    nvml_module_name()
    check_nvml_init_timeout_setting()
    check_node_settings()
    check_kernel_log_setting()
    check_sysfs_root_setting()
    launch = detect_launch()
    one_node = {
        "--junit": r.junit,
        "--record-baseline": r.record_baseline,
        "--evidence": r.evidence,
    }
    if launch is not None and any(v is not None for v in one_node.values()):
        flag = next(k for k, v in one_node.items() if v is not None)
        raise InputError(
            f"{flag} is for one node: under {launch.launcher} each node writes its "
            "own JSON report (--report-dir)"
        )
    isolation = isolation_map(r.isolate, r.topology, launch is not None, r.min_busbw)
    if r.pairwise and launch is None:
        raise InputError(
            "--pairwise compares nodes: run accept under torchrun or srun across nodes "
            "(slurm/accept-multinode.sbatch, k8s/multinode-indexed-job.yaml)"
        )
    if r.rails_tolerance is not None and not r.rails:
        raise InputError("--rails-tolerance judges --rails: give both, or neither")
    if r.dcgm and r.device == "cpu":  # it was taken, and nothing said it never ran
        raise InputError(
            f"--dcgm {r.dcgm} runs DCGM's diagnostics on the GPUs: not with --device cpu"
        )
    if r.rails and launch is None:
        raise InputError(
            "--rails runs one GPU of every node per rail: run accept under torchrun or srun "
            "across nodes (slurm/accept-multinode.sbatch, k8s/multinode-indexed-job.yaml)"
        )
    asked = ("dcgm",) if r.dcgm else ()
    skip = [*r.skip, "dcgm"] if r.dcgm == 0 else list(r.skip)
    specs = select_checks(r.level, list(r.only), skip, asked)
    table = refs.load_shipped_references()
    if r.baseline is not None:
        table = table.with_overrides(refs.load_baseline(r.baseline))
    if r.report_dir is not None:
        check_output_directory(r.report_dir, "--report-dir")
    if r.junit is not None:
        check_output_file(r.junit, "--junit")
    if r.evidence is not None:
        check_output_directory(r.evidence, "--evidence")
    if r.record_baseline is not None:
        check_output_file(r.record_baseline, "--record-baseline")
    action_rules = load_rules(r.rules) if r.rules is not None else None
    refuse_collisions(
        {
            "--history": history_path(r.history, r.no_history),
            "--junit": r.junit,
            "--record-baseline": r.record_baseline,
        },
        {"--baseline": r.baseline, "--rules": r.rules},
    )
    target = history_target(r.history, r.no_history, out)
    if launch is None:
        from gpuaccept.distributed.children import start_server

        start_server()  # its torch import runs beside this process's own
    expected = (
        ExpectedGpus(r.expect_gpus, "--expect-gpus")
        if r.expect_gpus is not None
        else expected_gpu_count()
    )
    return AcceptPlan(
        level=r.level,
        specs=specs,
        device=r.device,
        table=table,
        expected=expected,
        launch=launch,
        report_dir=r.report_dir,
        junit=r.junit,
        record_baseline=r.record_baseline,
        baseline_runs=r.baseline_runs,
        history_path=target,
        check_timeout=r.check_timeout,
        dcgm=r.dcgm,
        min_busbw=r.min_busbw,
        pairwise=r.pairwise,
        isolation=isolation,
        rails=(r.rails_tolerance if r.rails_tolerance is not None else STRAGGLER_TOLERANCE)
        if r.rails
        else None,
        drop=drop,
        node=node,
        rules=action_rules,
        evidence=r.evidence,
        min_other_busbw=r.min_other_busbw(),
    )


def node_expectation(
    profile: Path | None, nics: int | None, rate_gbps: float | None, nvme: int | None
) -> NodeExpectation | None:
    """The node profile's expectations with the options that override it; None: none given."""
    from gpuaccept.node_profile import NodeExpectation, load_node_profile

    base = load_node_profile(profile) if profile is not None else NodeExpectation()
    expected = base.with_overrides(nics=nics, nic_rate_gbps=rate_gbps, nvme=nvme)
    return None if expected.empty else expected


def isolation_map(
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
