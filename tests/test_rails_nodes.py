"""`accept --rails` (issue #33 §1) on torchrun stand-in nodes on this machine (gloo, two ranks
each, so two rails): every rail at once, one rank of every node each. A rail made slow on purpose
(one local rank of one node sleeps in its all-reduces, tests/multinode_faults/slow with
SLOW_LOCAL_RANK) is named on every node; healthy rails pass; the option is refused where there
are no nodes to span."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.results import CheckResult, Status
from tests.test_multinode import check_of_every_node, run_nodes

# a long end-to-end run (processes across stand-in nodes, real services): CI runs it in a step
# of its own (pytest -m service); the everyday command leaves it out
pytestmark = pytest.mark.service

NAMES = ["node-a", "node-b", "node-c"]


def _rails(
    tmp_path: Path, args: list[str], slow: dict[str, str | None] | None = None
) -> list[CheckResult]:
    """`slow` maps a node to the one local rank whose all-reduces sleep (None: every rank)."""
    results = run_nodes(
        tmp_path,
        NAMES,
        2,
        ["--only", "stack", "--rails", *args],
        faults=dict.fromkeys(slow or {}, "slow"),
        extra_env={
            name: {"SLOW_ALL_REDUCE_SECONDS": "0.25"}
            | ({} if rank is None else {"SLOW_LOCAL_RANK": rank})
            for name, rank in (slow or {}).items()
        },
    )
    return check_of_every_node(results, "rails")


@pytest.mark.slow
def test_a_slow_rail_is_named_by_every_node(tmp_path: Path) -> None:
    checks = _rails(tmp_path, [], slow={"node-b": "1"})
    first = checks[0]
    assert all(c.status is Status.FAIL and c.details == first.details for c in checks)
    assert first.details["slow"] == ["rail 1"]
    assert first.details["rails"] == 2
    assert first.details["nodes"] == 3
    assert "rail 1" in first.message
    assert "rail 0" not in first.message


@pytest.mark.slow
def test_healthy_rails_pass(tmp_path: Path) -> None:
    # Healthy rails are equal rails. Two gloo rails on shared cores are not: their speed is
    # whichever processes the cores happened to run (CI once measured one rail at -78% with
    # nothing wrong), so here every rank of every node carries the slow test's delay. Each
    # all-reduce then takes 0.25 s + the gloo time, the rails are equal within the gloo time's
    # noise: within 0.5% of each other with three CPU burners on this 2-core machine, so the
    # judge's default tolerance (10%) must pass them.
    checks = _rails(tmp_path, [], slow=dict.fromkeys(NAMES))
    assert all(c.status is Status.PASS for c in checks), [c.message for c in checks]
    assert [m.device_index for m in checks[0].measurements] == [0, 1]
    assert all(c.details == checks[0].details for c in checks)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--rails"], "--rails runs one GPU of every node per rail"),
        (["--rails-tolerance", "20"], "--rails-tolerance judges --rails"),
    ],
)
def test_rails_outside_a_multi_node_job_is_refused(
    args: list[str], said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("WORLD_SIZE", "SLURM_NTASKS", "SLURM_JOB_NUM_NODES"):
        monkeypatch.delenv(name, raising=False)
    result = CliRunner().invoke(app, ["accept", "--device", "cpu", "--no-history", *args])
    assert result.exit_code == 2, result.output
    assert said in result.output
    assert "Traceback" not in result.output
