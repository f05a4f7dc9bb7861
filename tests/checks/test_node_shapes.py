"""Every fabric, health, host and burn-in judge over the corpus of node shapes (tests/
node_shapes.py): each healthy shape passes (or skips where there is nothing to judge, never
fails), and each broken variant fails by name in the judge that owns the fault, while a fault
that is not the node's (a frontend or storage port) leaves the verdict alone."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from gpuaccept.burnin.judging import stragglers
from gpuaccept.checks import fabric, health, host
from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings
from gpuaccept.measure.host import cpu_mhz
from gpuaccept.references import load_shipped_references
from gpuaccept.suite.levels import level_settings
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
    # the burn-in's straggler judge over the shape's GPUs, each at 100 TFLOPS (one at 60 where
    # a variant slows it); one GPU has no peer to be held to
    gpus = len(scenario["gpus"])
    if gpus < 2:
        return "skip", "one GPU: no peer"
    rates = {f"gpu{i}": 60.0 if scenario.get("burnin_slow") == i else 100.0 for i in range(gpus)}
    found = stragglers(rates)
    said = "; ".join(f"{s.gpu} at {s.value:g} of {s.reference:g}" for s in found)
    return ("fail" if found else "pass"), said


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
        assert status == "fail", said
        assert variant.says in said


def test_every_shape_has_a_broken_variant_and_every_judge_a_verdict() -> None:
    assert len({s.name for s in SHAPES}) == len(SHAPES)
    for shape in SHAPES:
        assert set(shape.healthy) == set(JUDGES), shape.name
        assert "fail" not in shape.healthy.values(), shape.name
        assert any(v.says for v in shape.variants), shape.name
    # every judge is shown a fault on some shape
    assert {v.judge for s in SHAPES for v in s.variants if v.says} == set(JUDGES)
