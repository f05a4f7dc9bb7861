"""Every fabric, health, host and burn-in judge over the corpus of node shapes (tests/
node_shapes.py): each healthy shape passes (or skips where there is nothing to judge, never
fails), and each broken variant fails by name in the judge that owns the fault, while a fault
that is not the node's (a frontend or storage port) leaves the verdict alone."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from gpuaccept.burnin.floors import reference_floors
from gpuaccept.burnin.plan import BurnInPlan
from gpuaccept.burnin.window import judge_record
from gpuaccept.checks import fabric, health, host
from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings
from gpuaccept.measure.host import cpu_mhz
from gpuaccept.references import load_shipped_references
from gpuaccept.suite.levels import level_settings
from tests.burnin.records import device, record
from tests.checks.conftest import gpu_context
from tests.node_shapes import SHAPES, Shape, Tree, Variant

JUDGES = ("fabric", "health", "host", "burnin")


def _judge(
    judge: str,
    shape: Shape,
    root: Path,
    scenario: dict[str, Any],
    fake_gpus: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[str, str]:
    """(status, what it said) of `judge` on the node under `root`."""
    monkeypatch.setenv("GPUACCEPT_SYSFS_ROOT", str(root))
    quiet = root / "quiet.log"
    quiet.write_text("")
    monkeypatch.setenv("GPUACCEPT_KERNEL_LOG", str(quiet))
    if judge == "fabric":
        context = CheckContext(
            level="quick",
            device_mode="cpu",
            settings=level_settings("quick", "cpu"),
            references=load_shipped_references(),
            node=shape.profile,
        )
        result = fabric.run(context)
        return result.status.value, result.message
    if judge == "health":
        fake_gpus({key: value for key, value in scenario.items() if key != "burnin_slow"})
        result = health.run(gpu_context())
        return result.status.value, result.message
    if judge == "host":
        findings = Findings("host", "HOST")
        host.judge_cpus(shape.cpus, cpu_mhz(root), shape.profile, findings)
        result = findings.conclude("CPUs")
        return result.status.value, result.message
    # the burn-in's judge of a gemm-bf16 window over the shape's GPUs, each at 1.2 x its
    # model's reference floor (one at 0.6 x where a variant slows it): held to its peers, and a
    # GPU no peer can hold to its floor
    names = [(f"gpu{i}", gpu["name"], None) for i, gpu in enumerate(scenario["gpus"])]
    floors = reference_floors(load_shipped_references(), names).get("gemm-bf16", {})
    if len(names) < 2 and not floors:
        return "skip", "one GPU of no known model: nothing to hold it to"
    plan = BurnInPlan.build(60.0, 60.0, len(names), ["gemm-bf16"])
    rates = {
        label: (0.6 if scenario.get("burnin_slow") == i else 1.2)
        * (floors[label].value if label in floors else 500.0)
        for i, (label, _, _) in enumerate(names)
    }
    window = record(plan, 0, {label: device(throughput=rate) for label, rate in rates.items()})
    figures = judge_record(window, 10.0, floors)
    said = "; ".join([*figures.failures, *figures.warnings])
    return ("fail" if figures.failures else "warn" if figures.warnings else "pass"), said


def _node(shape: Shape, tmp_path: Path, variant: Variant | None = None) -> tuple[Path, dict]:
    tree = Tree(tmp_path / shape.name)
    shape.build(tree)
    scenario = copy.deepcopy(shape.nvml())
    if variant is not None:
        variant.breaks(tree, scenario)
    return tree.root, scenario


@pytest.mark.parametrize("judge", JUDGES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_a_healthy_shape_is_judged_healthy(
    shape: Shape, judge: str, tmp_path: Path, fake_gpus: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, scenario = _node(shape, tmp_path)
    status, said = _judge(judge, shape, root, scenario, fake_gpus, monkeypatch)
    assert status == shape.healthy[judge], said


@pytest.mark.parametrize(
    ("shape", "variant"),
    [(shape, variant) for shape in SHAPES for variant in shape.variants],
    ids=lambda item: item.name.replace(" ", "-"),
)
def test_a_broken_shape_fails_by_name_in_the_judge_that_owns_the_fault(
    shape: Shape,
    variant: Variant,
    tmp_path: Path,
    fake_gpus: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root, scenario = _node(shape, tmp_path, variant)
    status, said = _judge(variant.judge, shape, root, scenario, fake_gpus, monkeypatch)
    if variant.says is None:  # not the node's fault: the verdict stays the healthy one
        assert status == shape.healthy[variant.judge], said
    else:
        assert status == variant.verdict, said
        assert variant.says in said


def test_every_shape_has_a_broken_variant_and_every_judge_a_verdict() -> None:
    assert len({s.name for s in SHAPES}) == len(SHAPES)
    for shape in SHAPES:
        assert set(shape.healthy) == set(JUDGES), shape.name
        assert "fail" not in shape.healthy.values(), shape.name
        assert any(v.says for v in shape.variants), shape.name
    # every judge is shown a fault on some shape
    assert {v.judge for s in SHAPES for v in s.variants if v.says} == set(JUDGES)
