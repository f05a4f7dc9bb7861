"""`gpuaccept bench` with no benchmark named, as a library call: every benchmark with its
default sweep, into one report (level "all")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuaccept.commands.bench.collectives import CollectivesRequest, run_collectives
from gpuaccept.commands.bench.common import (
    BenchRequest,
    BenchResult,
    PlannedRuns,
    ProgressBar,
    finish,
    interruptible,
    no_progress,
    prepare,
    show,
)
from gpuaccept.commands.bench.matmul import MatmulRequest, plan_matmul
from gpuaccept.commands.bench.membw import MembwRequest, plan_membw
from gpuaccept.commands.bench.nbody import NbodyRequest, plan_nbody
from gpuaccept.commands.bench.transfer import TransferRequest, plan_transfer

if TYPE_CHECKING:
    from gpuaccept.commands.output import Output


def run(request: BenchRequest, out: Output, progress: ProgressBar = no_progress) -> BenchResult:
    """matmul, membw, transfer, collectives and nbody, each with its defaults on this device.

    The single-process ones are planned before anything runs; collectives runs on its own local
    ranks (never under torchrun: refused first, as every single-process benchmark is)."""
    prepared = prepare("all", request, out, one_process="")
    runs = PlannedRuns(prepared.device)
    plan_matmul(runs, MatmulRequest())
    plan_membw(runs, MembwRequest())
    plan_transfer(runs, TransferRequest())
    with interruptible(out) as session:
        runs.run(session, out, progress)
        collectives = session.measure(
            "collectives",
            lambda: run_collectives(prepared.device, CollectivesRequest(), out, progress),
        )
        if collectives is not None:  # always: torchrun was refused
            show(collectives, out)
        nbody_runs = PlannedRuns(prepared.device)
        plan_nbody(nbody_runs, NbodyRequest(), out)
        nbody_runs.run(session, out, progress)
    return finish(session, prepared, request, out)
