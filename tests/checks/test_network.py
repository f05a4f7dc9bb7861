"""The network check with a stand-in ib_write_bw on PATH (tests/fake_tools) that prints
perftest's own result table: a port below 0.90 x its line rate fails, a port whose run fails is
named, and without perftest nothing is measured and nothing passes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuaccept.checks import network
from gpuaccept.checks.context import CheckContext
from gpuaccept.measure.perftest import PerftestError, parse_average_gbps
from gpuaccept.node_profile import NodeExpectation
from gpuaccept.references import load_shipped_references
from gpuaccept.suite.levels import level_settings
from gpuaccept.verdict import Status
from tests.fabric_tree import hgx_tree, port_dir

FAKES = Path(__file__).resolve().parents[1] / "fake_tools"


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = hgx_tree(tmp_path / "node")
    monkeypatch.setenv("GPUACCEPT_SYSFS_ROOT", str(root))
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr("gpuaccept.measure.perftest.SERVER_START_SECONDS", 0.05)
    return root


def _context(node: NodeExpectation | None = None) -> CheckContext:
    return CheckContext(
        level="standard",
        device_mode="cpu",
        settings=level_settings("standard", "cpu"),
        references=load_shipped_references(),
        node=node,
    )


def test_every_port_at_line_rate_passes_with_its_figure(node: Path) -> None:
    result = network.run(_context())
    assert result.status is Status.PASS, result.message
    assert [(m.name, m.value, m.unit) for m in result.measurements][:2] == [
        ("ib_write_bw_mlx5_0_p1_gbps", 392.0, "Gb/s"),
        ("ib_write_bw_mlx5_1_p1_gbps", 392.0, "Gb/s"),
    ]
    assert len(result.measurements) == 8


def test_a_slow_port_and_a_failing_port_are_named(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_IB_BW", "mlx5_3=359.9,*=392")
    monkeypatch.setenv("FAKE_IB_FAIL", "mlx5_6")
    (port_dir(node, 7) / "state").write_text("1: DOWN\n")  # not measured: fabric names it
    result = network.run(_context())
    assert result.status is Status.FAIL
    assert result.message == (
        "mlx5_3:1 ib_write_bw 359.9 Gb/s, below 0.9 x its 400 Gb/s line rate; ib_write_bw on "
        "mlx5_6:1 exited 1: Couldn't connect to localhost:18515"
    )
    assert len(result.measurements) == 6  # 8 ports, one down, one failed


def test_at_exactly_the_fraction_a_port_passes(node: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_IB_BW", "*=360")
    assert network.run(_context()).status is Status.PASS


def test_a_qdr_port_is_held_to_its_data_rate_and_an_unreadable_rate_is_not_a_pass(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #30 §3: QDR prints its 8b/10b signalling rate (40 Gb/s carries 32), and a port
    whose rate could not be read let 50 Gb/s pass."""
    for hca in range(8):
        (port_dir(node, hca) / "rate").write_text("40 Gb/sec (4X QDR)\n")
    monkeypatch.setenv("FAKE_IB_BW", "*=30")  # 94% of 32
    assert network.run(_context()).status is Status.PASS
    monkeypatch.setenv("FAKE_IB_BW", "mlx5_0=28.5,*=30")
    failed = network.run(_context())
    assert failed.message == (
        "mlx5_0:1 ib_write_bw 28.5 Gb/s, below 0.9 x its 32 Gb/s line rate (40 Gb/s "
        "signalling, less its line coding)"
    )
    (port_dir(node, 1) / "rate").write_text("garbled\n")
    monkeypatch.setenv("FAKE_IB_BW", "mlx5_1=25,*=30")
    held = network.run(_context())
    assert held.status is Status.FAIL  # held to the rate its peers run at
    assert held.message == (
        "mlx5_1:1 ib_write_bw 25 Gb/s, below 0.9 x 32 Gb/s, the line rate of the node's other "
        "InfiniBand ports (its own rate is unreadable)"
    )


def _only_ports(node: Path, keep: set[int]) -> None:
    for hca in set(range(8)) - keep:
        (port_dir(node, hca) / "state").write_text("1: DOWN\n")


def test_a_port_without_a_rate_file_is_held_to_the_rate_it_should_have(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #50 §7: a port with no `rate` file measured at 50 Gb/s beside 400 G ports warned
    "not judged" and the node passed. The rate it should have comes from its ACTIVE peers of
    its link layer, else the node profile, else the best figure measured on a peer."""
    (port_dir(node, 1) / "rate").unlink()
    monkeypatch.setenv("FAKE_IB_BW", "mlx5_1=50,*=392")
    failed = network.run(_context())
    assert failed.status is Status.FAIL
    assert failed.message == (
        "mlx5_1:1 ib_write_bw 50 Gb/s, below 0.9 x 400 Gb/s, the line rate of the node's other "
        "InfiniBand ports (its own rate is unreadable)"
    )
    monkeypatch.setenv("FAKE_IB_BW", "*=392")
    assert network.run(_context()).status is Status.PASS  # measured at its peers' rate
    # every rate unreadable: the node profile, then the best peer's figure
    for hca in range(8):
        (port_dir(node, hca) / "rate").unlink(missing_ok=True)
    monkeypatch.setenv("FAKE_IB_BW", "mlx5_1=50,*=392")
    profiled = network.run(_context(NodeExpectation(nic_rate_gbps=400)))
    assert profiled.message == (
        "mlx5_1:1 ib_write_bw 50 Gb/s, below 0.9 x 400 Gb/s, the node profile's nic_rate_gbps "
        "(its own rate is unreadable)"
    )
    measured = network.run(_context())
    assert measured.status is Status.FAIL
    assert measured.message == (
        "mlx5_1:1 ib_write_bw 50 Gb/s, below 0.9 x 392 Gb/s, the best figure measured on the "
        "node's other InfiniBand ports (its own rate is unreadable)"
    )
    _only_ports(node, {1})  # alone, with nothing to hold it to: said, never a silent pass
    alone = network.run(_context())
    assert alone.status is Status.WARN
    assert alone.message == (
        "mlx5_1:1 ib_write_bw 50 Gb/s not judged: its rate is unreadable and no other port or "
        "profile says what it should be"
    )


def test_without_perftest_or_without_an_active_port_nothing_is_measured(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    skipped = network.run(_context())
    assert skipped.status is Status.SKIP
    assert skipped.message == "perftest's ib_write_bw is not on PATH: the network was not measured"
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}/usr/bin:/bin")
    for hca in range(8):
        (port_dir(node, hca) / "state").write_text("1: DOWN\n")
    assert network.run(_context()).message == "no ACTIVE InfiniBand/RoCE port to measure"


def test_perftests_table_is_read_at_the_message_size() -> None:
    output = (
        " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
        " 65536      5000           98.12              97.55\t\t   0.186\n"
        " 8388608    5000           392.40              391.87\t\t   0.005839\n"
    )
    assert parse_average_gbps(output) == 391.87
    assert parse_average_gbps(output, 65536) == 97.55
    with pytest.raises(PerftestError, match="no 8388608-byte result"):
        parse_average_gbps(output.replace("8388608", "4194304"))
    with pytest.raises(PerftestError):
        parse_average_gbps("ib_write_bw: command not found\n")
    for absurd in ("inf", "nan", "-3.2", "0"):
        with pytest.raises(PerftestError, match="not a measured bandwidth"):
            parse_average_gbps(output.replace("391.87", absurd))


def test_ib_pairs_are_judged_rail_by_rail_against_the_slower_end() -> None:
    from gpuaccept.checks.network import judge_ib_pairs

    rails = {
        0: [("mlx5_0", 1, True, 400.0), ("mlx5_1", 1, True, 400.0)],
        1: [("mlx5_0", 1, True, 200.0), ("mlx5_1", 1, True, 400.0)],
    }
    measured = {(0, 1, "mlx5_0:1"): 190.0, (0, 1, "mlx5_1:1"): "ib_write_bw exited 1"}
    result = judge_ib_pairs(measured, ["a", "b"], rails)
    assert (result.name, result.area, result.status) == ("pairwise-ib", "FABRIC", Status.FAIL)
    assert result.message == "a mlx5_1:1 <- b: ib_write_bw exited 1"  # 190 >= 0.9 x 200
    assert result.details["rows"] == [
        {"pair": "a mlx5_0:1 <- b", "gbps": 190.0, "error": ""},
        {"pair": "a mlx5_1:1 <- b", "gbps": None, "error": "ib_write_bw exited 1"},
    ]
    ok = judge_ib_pairs({(0, 1, "mlx5_0:1"): 380.0}, ["a", "b"], {0: rails[0], 1: rails[0]})
    assert ok.status is Status.PASS
    assert ok.message == ("1 rail(s) between node pairs at 0.9 x line rate or above (ib_write_bw)")
    skipped = judge_ib_pairs({}, ["a", "b"], {0: rails[0], 1: []})
    assert skipped.status is Status.SKIP
    assert skipped.message == (
        "not measured: perftest's ib_write_bw missing, or no ACTIVE InfiniBand/RoCE port, on b"
    )
