"""The host check: memory bandwidth per NUMA node, CPUs and the scratch file system, each rule
against the node profile; nothing to judge against is SKIP, with the figures."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaccept.checks import host
from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings
from gpuaccept.errors import InputError
from gpuaccept.node_profile import NodeExpectation, load_node_profile
from gpuaccept.references import load_shipped_references
from gpuaccept.suite.levels import level_settings
from gpuaccept.verdict import Status


def _findings() -> Findings:
    return Findings("host", "HOST")


def test_a_numa_node_below_the_floor_fails_and_an_unequal_one_warns_without_a_floor() -> None:
    found = _findings()
    assert host.judge_memory({0: 160.0, 1: 140.0}, 150.0, found)
    assert found.failures == [
        "NUMA node 1: host memory copy 140 GB/s, below the profile's 150 GB/s"
    ]
    assert [m.name for m in found.measurements] == [
        "host_memory_node0_gbps",
        "host_memory_node1_gbps",
    ]
    unequal = _findings()
    assert host.judge_memory({0: 160.0, 1: 143.9, 2: 144.0}, None, unequal)
    assert unequal.warnings == [
        "NUMA node 1: host memory copy 143.9 GB/s, -10.1% against the node's best 160 GB/s "
        "(a missing memory channel?)"
    ]
    single = _findings()
    assert not host.judge_memory({0: 10.0}, None, single)  # nothing to hold it against
    assert single.failures == single.warnings == []


def test_too_few_cpus_or_slow_ones_fail_and_missing_cpufreq_is_said() -> None:
    expect = NodeExpectation(cpus=224, min_cpu_mhz=2000)
    found = _findings()
    assert host.judge_cpus(112, {0: 2400.0, 1: 800.0, 2: 1999.0}, expect, found)
    assert found.failures == [
        "112 logical CPUs, the profile expects 224",
        "2 CPU(s) below 2000 MHz (slowest: cpu1 at 800 MHz)",
    ]
    fine = _findings()
    assert host.judge_cpus(224, {0: 2000.0}, expect, fine)
    assert fine.failures == []
    no_cpufreq = _findings()
    assert not host.judge_cpus(8, {}, NodeExpectation(min_cpu_mhz=2000), no_cpufreq)
    assert no_cpufreq.warnings == ["no cpufreq in sysfs: the CPU frequency could not be judged"]


def test_scratch_is_held_to_each_floor_and_ceiling_with_the_bounds_inside() -> None:
    expect = NodeExpectation(
        min_scratch_write_gbps=2.0, min_scratch_read_gbps=4.0, max_fsync_ms=5.0
    )
    found = _findings()
    assert host.judge_scratch(1.5, 3.0, 9.0, expect, found)
    assert found.failures == [
        "scratch write 1.5 GB/s, below the profile's 2 GB/s",
        "scratch read 3 GB/s, below the profile's 4 GB/s",
        "scratch fsync p99 9 ms, above the profile's 5 ms",
    ]
    at_bounds = _findings()
    assert host.judge_scratch(2.0, 4.0, 5.0, expect, at_bounds)
    assert at_bounds.failures == []
    assert not host.judge_scratch(1.0, 1.0, 1.0, NodeExpectation(), _findings())


def _context(node: NodeExpectation | None) -> CheckContext:
    return CheckContext(
        level="standard",
        device_mode="cpu",
        settings=level_settings("standard", "cpu"),
        references=load_shipped_references(),
        node=node,
    )


def test_the_check_measures_this_machine_and_judges_only_what_the_profile_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUACCEPT_SYSFS_ROOT", str(tmp_path / "no-sysfs"))  # one NUMA node
    unjudged = host.run(_context(None))
    assert unjudged.status is Status.SKIP
    assert unjudged.message.endswith("nothing to judge them against (give a --node-profile)")
    assert {m.name for m in unjudged.measurements} == {
        "host_memory_node0_gbps",
        "scratch_write_gbps",
        "scratch_read_gbps",
        "scratch_fsync_p99_ms",
    }
    assert all(m.value > 0 for m in unjudged.measurements)
    impossible = host.run(_context(NodeExpectation(scratch_dir=tmp_path, min_memory_gbps=1e5)))
    assert impossible.status is Status.FAIL
    assert impossible.message.startswith("NUMA node 0: host memory copy ")
    assert impossible.details["scratch"]["directory"] == str(tmp_path)
    assert list(tmp_path.iterdir()) == []  # the scratch file is gone


def test_a_node_profile_is_validated_in_one_line(tmp_path: Path) -> None:
    profile = tmp_path / "hgx.toml"
    profile.write_text(f'nics = 8\nnic_rate_gbps = 400\nscratch_dir = "{tmp_path}"\n')
    loaded = load_node_profile(profile)
    assert (loaded.nics, loaded.nic_rate_gbps, loaded.scratch_dir) == (8, 400.0, tmp_path)
    assert loaded.with_overrides(nics=4, nvme=None).nics == 4
    for text, says in [
        ("nics = -1", "nics: Input should be greater than or equal to 0"),
        ("nic_rate = 400", "nic_rate: Extra inputs are not permitted"),
        ("max_fsync_ms = inf", "max_fsync_ms:"),
        ("nics = [", "not valid TOML"),
        ('scratch_dir = "/nonexistent/x"', "scratch_dir /nonexistent/x is not a directory"),
    ]:
        profile.write_text(text + "\n")
        with pytest.raises(InputError, match=f"--node-profile {profile}: .*") as error:
            load_node_profile(profile)
        assert says in str(error.value)
        assert "\n" not in str(error.value)


def test_accept_refuses_a_bad_profile_before_running(tmp_path: Path) -> None:
    from gpuaccept.cli import app

    profile = tmp_path / "bad.toml"
    profile.write_text("cpus = 0\n")
    result = CliRunner().invoke(
        app, ["accept", "--device", "cpu", "--node-profile", str(profile), "--no-history"]
    )
    assert result.exit_code == 2
    assert "cpus: Input should be greater than or equal to 1" in result.output
    assert "Traceback" not in result.output


def test_a_cpu_parked_low_by_powersave_passes_and_a_capped_one_fails(tmp_path: Path) -> None:
    """Issue #30 §3: idle CPUs under the powersave governor read their lowest clock and failed
    `min_cpu_mhz`; the ceiling the governor may reach is what is judged."""
    from gpuaccept.measure.host import cpu_mhz

    base = tmp_path / "sys" / "devices" / "system" / "cpu"
    for cpu, ceiling in (("cpu0", "3000000"), ("cpu1", "1500000")):
        freq = base / cpu / "cpufreq"
        freq.mkdir(parents=True)
        (freq / "scaling_cur_freq").write_text("800000\n")  # idle, parked by powersave
        (freq / "scaling_max_freq").write_text(ceiling + "\n")
    (base / "cpu2" / "cpufreq").mkdir(parents=True)
    (base / "cpu2" / "cpufreq" / "cpuinfo_max_freq").write_text("3200000\n")  # no policy cap
    assert cpu_mhz(tmp_path) == {0: 3000.0, 1: 1500.0, 2: 3200.0}
    findings = Findings("host", "HOST")
    assert host.judge_cpus(3, cpu_mhz(tmp_path), NodeExpectation(min_cpu_mhz=2000), findings)
    assert findings.failures == ["1 CPU(s) below 2000 MHz (slowest: cpu1 at 1500 MHz)"]


def test_a_scratch_directory_in_memory_is_said_to_be_read_from_memory(tmp_path: Path) -> None:
    from gpuaccept.measure.host import file_system_type

    mounts = tmp_path / "mounts"
    mounts.write_text(
        "/dev/nvme0n1p2 / ext4 rw,relatime 0 0\n"
        "tmpfs /scratch\\040fast tmpfs rw 0 0\n"
        "/dev/nvme1n1 /scratch xfs rw 0 0\n"
    )
    assert file_system_type(Path("/scratch/job1"), mounts) == "xfs"
    assert file_system_type(Path("/scratch fast/x"), mounts) == "tmpfs"
    assert file_system_type(Path("/home/u"), mounts) == "ext4"
    assert file_system_type(Path("/x"), tmp_path / "no-such-file") is None


def test_a_cpulist_that_is_not_one_warns_and_that_node_is_not_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #50 §7: `0-999999999` or `abc` in a NUMA node's cpulist raised ValueError out of
    the host check (an ERROR with a traceback in its details); a node of memory alone (no CPU,
    as a GH200's GPU memory) has nothing to pin a copy to."""
    found = _findings()
    nodes = host.numa_nodes({0: "0-3", 1: "abc", 2: "0-999999999", 3: ""}, found)
    assert nodes == {0: {0, 1, 2, 3}}
    assert found.warnings == [
        "NUMA node 1: its cpulist is unreadable (not a cpulist: 'abc'): its memory was not "
        "measured",
        "NUMA node 2: its cpulist is unreadable (not a cpulist: '0-999999999'): its memory was "
        "not measured",
    ]
    assert found.failures == []
    for node, text in ((0, "abc"), (1, "0-999999999")):
        cpulist = tmp_path / "sys" / "devices" / "system" / "node" / f"node{node}" / "cpulist"
        cpulist.parent.mkdir(parents=True)
        cpulist.write_text(text + "\n")
    monkeypatch.setenv("GPUACCEPT_SYSFS_ROOT", str(tmp_path))
    result = host.run(_context(None))
    assert result.status is Status.WARN, result.message
    assert "NUMA node 0: its cpulist is unreadable (not a cpulist: 'abc')" in result.message
    assert not [m for m in result.measurements if m.name.startswith("host_memory")]
