"""The rails of a multi-node job, judged (issue #33 §1: inter-node-only rails as a stage).

Rail k is the k-th local rank of every node: one GPU per node, so its all-reduce has no NVLink
or shared memory inside a node to use and crosses the inter-node network alone, over the NIC
that GPU uses (one per GPU on a rail-optimised fabric). nccl-tests runs the same split with
`NCCL_TESTS_SPLIT="MOD 8"` on 8-GPU nodes: "run 8 parallel operations, each with 1 GPU per node
(purely communicating over the inter-node network)" (NVIDIA/nccl-tests README.md:103-116 at
a0b82b2, version 2.19.6). Every rail runs at once, as that split does, so the rails share the
fabric as training shares it.

Judged: a rail whose all-reduce failed or returned a wrong element fails; a rail more than the
straggler tolerance below the best rate a second rail confirms is slow (the burn-in's straggler
rule, `burnin.judging.stragglers`: gpu-fryer's 10%, the best confirmed by a second device, with
two rails the better one). A slow rail is a NIC, cable or leaf switch on that rail of some
node: the rails alone cannot say which node; `--pairwise` (ib pairs per rail) or `--isolate`
can. Rails are the same hardware on every node, so no floor of the job's all-reduce applies.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from gpuaccept.burnin.judging import stragglers
from gpuaccept.measure.collectives import AllReduceFigure
from gpuaccept.results import CheckResult, Measurement, Status

CHECK_NAME = "rails"


def rail_ranks(rail: int, nodes: int, local_world: int) -> list[int]:
    """The global ranks of rail `rail`: that local rank on every node (ranks numbered node by
    node, as torchrun and srun number them)."""
    if not 0 <= rail < local_world:
        raise ValueError(f"rail {rail} of {local_world}")
    return [node * local_world + rail for node in range(nodes)]


def judge_rails(
    figures: Mapping[int, AllReduceFigure | str],
    *,
    nodes: int,
    tolerance_percent: float,
) -> CheckResult:
    """Each rail's all-reduce (its figure, or the error it met) into one verdict."""
    if nodes < 2 or len(figures) < 2:
        why = "one node" if nodes < 2 else "one rank per node"
        return CheckResult(
            name=CHECK_NAME,
            area="COLLECTIVES",
            status=Status.SKIP,
            message=f"{why}: no rails to compare (rails need 2+ nodes and 2+ ranks per node)",
        )
    failures: list[str] = []
    measurements: list[Measurement] = []
    rates: dict[str, float] = {}
    for rail, figure in sorted(figures.items()):
        if isinstance(figure, str):
            failures.append(f"rail {rail}: its all-reduce failed: {figure}")
            continue
        if figure.wrong_elements:
            failures.append(f"rail {rail}: {figure.wrong_elements} wrong element(s)")
        if not (math.isfinite(figure.busbw_gbps) and figure.busbw_gbps > 0):
            failures.append(f"rail {rail}: no bus bandwidth measured ({figure.busbw_gbps})")
            continue
        rates[f"rail {rail}"] = figure.busbw_gbps
        measurements.append(
            Measurement(
                name="rail_busbw_gbps", value=figure.busbw_gbps, unit="GB/s", device_index=rail
            )
        )
    slow = stragglers(rates, tolerance_percent)
    failures += [
        f"{s.gpu} {s.value:.3g} GB/s busbw, {s.deviation_percent:+.0f}% against the rails' best "
        f"{s.reference:.3g} (a NIC, cable or switch on that rail)"
        for s in slow
    ]
    said = ", ".join(f"{rail} {rate:.3g}" for rail, rate in rates.items())
    return CheckResult(
        name=CHECK_NAME,
        area="COLLECTIVES",
        status=Status.FAIL if failures else Status.PASS,
        message="; ".join(failures)
        if failures
        else f"{len(rates)} rails across {nodes} nodes, busbw GB/s: {said}",
        measurements=measurements,
        details={
            "rails": len(figures),
            "nodes": nodes,
            "tolerance_percent": tolerance_percent,
            "slow": [s.gpu for s in slow],
        },
    )
