"""`gpuaccept accept` under torchrun or srun: one rank per GPU, every node writes its own report.

The launcher's ranks replace the warm workers (suite.multinode); the per-node report is written by
each node's local rank 0, which alone prints. Every rank exits with its node's verdict, so the
launcher's exit status fails when any node failed.
"""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from gpuaccept.commands.recording import record_run
from gpuaccept.errors import Interrupted

if TYPE_CHECKING:
    from gpuaccept.commands.accept.plan import AcceptPlan
    from gpuaccept.commands.output import Output
    from gpuaccept.results import RunReport
    from gpuaccept.suite.multinode import Launch


def accept_across_nodes(
    plan: AcceptPlan, launch: Launch, out: Output
) -> tuple[int, RunReport | None]:
    """This rank's part of the run; its exit code (the node's verdict, or the signal's), and the
    node's report on its local rank 0 (None on the others, which write nothing)."""
    from gpuaccept import interrupts
    from gpuaccept.checks.context import CheckContext
    from gpuaccept.errors import EnvironmentProblem
    from gpuaccept.probe.hardware import list_cuda_gpus, resolve_device_mode
    from gpuaccept.record.environment import capture_environment
    from gpuaccept.report.console import (
        CPU_MODE_LINE,
        action_lines,
        environment_line,
        result_line,
        summary_text,
    )
    from gpuaccept.suite import level_settings
    from gpuaccept.suite.multinode import MultiNodeRun, PeerLost

    level, specs, isolation, rails = plan.level, plan.specs, plan.isolation, plan.rails
    mode = resolve_device_mode(plan.device)
    if mode == "cuda" and launch.local_rank >= len(list_cuda_gpus()):
        raise EnvironmentProblem(
            f"local rank {launch.local_rank} but {len(list_cuda_gpus())} GPU(s) visible on "
            f"{launch.node_name}: start one rank per GPU (--nproc-per-node at most the GPUs)"
        )
    leader = launch.local_rank == 0
    context = CheckContext(
        level=level,
        device_mode=mode,
        settings=level_settings(level, mode),
        references=plan.table,
        expected=plan.expected,
        dcgm_level=plan.dcgm,
        min_busbw_gbps=plan.min_busbw,
        min_other_busbw_gbps=dict(plan.min_other_busbw),
        node=plan.node,
        action_rules=plan.rules,
    )
    run = MultiNodeRun(context, launch, say=out.line if leader else None)
    started, clock = datetime.now(UTC), time.monotonic()
    environment = capture_environment() if leader else {}
    if leader:
        where = (
            f"{launch.launcher}: node {launch.node_name}, {launch.node_rank + 1} of "
            f"{launch.nodes}, {launch.world} ranks"
        )
        out.line(environment_line(f"gpuaccept accept --level {level} ({where})", environment))
        if mode == "cpu":
            out.line(CPU_MODE_LINE)
    run.start(
        plan=(
            f"--level={level}",
            f"--device={plan.device}",  # as asked: a node whose GPUs fail falls to cpu itself
            *(["--pairwise"] if plan.pairwise else []),
            *(["--isolate"] if isolation is not None else []),
            *([f"--rails={rails:g}"] if rails is not None else []),
            *(spec.name for spec in specs),
        )
    )
    interrupted: Interrupted | None = None
    stopped: str | None = None
    lost: PeerLost | None = None
    try:
        try:

            def across() -> None:
                if plan.pairwise:
                    run.run_pairwise()
                    run.run_ib_pairs()
                if rails is not None:
                    run.run_rails(rails)
                if isolation is not None:
                    run.run_isolation(isolation)

            for spec in specs:
                if spec.final:
                    across()
                run.run_check(spec)
            if not any(spec.final for spec in specs):
                across()
        except KeyboardInterrupt:  # SIGINT with no handler of the caller's to raise Interrupted
            raise Interrupted(signal.SIGINT) from None
    except Interrupted as error:
        # eviction or Ctrl-C: the peers are stopping too, so no collective can be trusted now;
        # each node writes what it has and the checks it did not finish say why. Handled here,
        # the signal is not asked for again at a later step (nor by a later run in-process).
        interrupts.clear()
        interrupted = error
        stopped = run.interrupted(specs, str(error))
    except PeerLost as error:
        # a peer stopped first (its signal came earlier, or it crashed): the same, and the
        # verdict is a failure, since this node could not be judged to the end
        lost = error
        run.interrupted(specs, f"a peer rank stopped: {error}")
    passed = True
    report: RunReport | None = None
    if leader:
        report = run.report(
            started,
            clock,
            environment,
            interrupted_by=None if interrupted is None else interrupted.signum,
            interrupted_check=stopped,
        )
        if plan.report_dir is not None:
            from gpuaccept.report.json_report import write_json_report

            out.line(f"[REPORT] {write_json_report(report, plan.report_dir)}")
        record_run(report, plan.history_path, out)
        # The node's table of checks, as its own run prints it; as plain text with the node's
        # name on each line, like every line here: srun interleaves the nodes' output in one log.
        for line in summary_text(report).splitlines():
            out.line(f"[{launch.node_name}] {line}")
        for line in action_lines(report):
            out.line(f"[{launch.node_name}] {line}")
        out.line(f"[{launch.node_name}] {result_line(report)}")
        passed = report.verdict.passed
    if interrupted is not None or lost is not None:
        run.close(abandon=True)
        return (interrupted.exit_code if interrupted is not None else 1), report
    try:
        verdicts = run.node_verdicts(passed if leader else None)
        run.barrier()  # every node's report is written before any rank leaves
    finally:
        run.close()
    return (0 if verdicts[launch.node_rank] else 1), report
