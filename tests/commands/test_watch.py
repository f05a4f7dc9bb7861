"""`gpuaccept watch` on the CPU: fake NVML (tests/fake_nvml.py) plays the GPUs, a saved kernel log
plays dmesg, tests/fake_slurm plays the scheduler. Each verdict rule the watch applies is held
here by a poll sequence that raises it and one that must not."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from gpuaccept.commands.output import Collected
from gpuaccept.commands.watch import WatchRequest, run
from gpuaccept.errors import InputError
from gpuaccept.watch.debounce import Change, Debouncer, Raised
from gpuaccept.watch.metrics import WatchState, render
from gpuaccept.watch.poll import Poller
from tests import fake_nvml
from tests.checks.conftest import h100_sxm
from tests.fabric_tree import hgx_tree, port_dir

REPO = Path(__file__).resolve().parents[2]
FAKE_SLURM = REPO / "tests" / "fake_slurm"
IDLE, SW_POWER_CAP, HW_POWER_BRAKE = 0x1, 0x4, 0x80


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Fake NVML, an empty kernel log and a sysfs tree without ports in place of the host's
    (hermetic on a GPU node with InfiniBand too)."""
    log = tmp_path / "kernel.log"
    log.write_text("")
    (tmp_path / "sysfs" / "sys").mkdir(parents=True)
    monkeypatch.setenv("GPUACCEPT_NVML_MODULE", "tests.fake_nvml")
    monkeypatch.setenv("GPUACCEPT_KERNEL_LOG", str(log))
    monkeypatch.setenv("GPUACCEPT_SYSFS_ROOT", str(tmp_path / "sysfs"))
    monkeypatch.setenv("GPUACCEPT_NODE_NAME", "gpu-node-1")
    yield log
    fake_nvml.use(None)


def play(*gpus: dict[str, Any], **scenario: Any) -> None:
    fake_nvml.use({"gpus": list(gpus), **scenario})


def polls(throttles: list[int | None], debounce: int = 3) -> list[list[str]]:
    """The failing findings raised after each poll, one poll per mask (None: NVML down)."""
    poller, debouncer = Poller(window=debounce, events=False), Debouncer(debounce)
    raised = []
    for mask in throttles:
        if mask is None:
            play(h100_sxm(), init="fail")
        else:
            play(h100_sxm(throttle=mask))
        debouncer.update(poller.poll())
        raised.append([r.finding.text for r in debouncer.failing])
    return raised


def test_a_power_brake_held_over_three_busy_polls_fails_and_not_before(node: Path) -> None:
    raised = polls([HW_POWER_BRAKE] * 3)
    assert raised[:2] == [[], []]
    assert raised[2] == ["gpu0: power brake (external) under load in 1 of 1 samples"]


def test_a_state_raised_says_the_polls_that_held_it(node: Path) -> None:
    # the brake's own text judges one poll ("in 1 of 1 samples"): said alone after three polls
    # it read as a single sample's finding
    play(h100_sxm(throttle=HW_POWER_BRAKE))
    out = Collected()
    request = WatchRequest(polls=3, interval=0.1, metrics_port=None, no_history=True, act="report")
    run(request, out)
    assert (
        "[WATCH] FAIL (health): gpu0: power brake (external) under load in 1 of 1 samples "
        "(held 3 polls in a row)\n"
    ) in out.text()


def test_a_busy_gpu_is_judged_by_the_load_rules_alone_not_also_at_rest(node: Path) -> None:
    narrow = {"gen": 5, "gen_max_gpu": 5, "gen_max_system": 5, "width": 8, "width_max": 16}
    poller, debouncer = Poller(window=1, events=False), Debouncer(1)
    play(h100_sxm(throttle=HW_POWER_BRAKE, pcie=narrow))
    debouncer.update(poller.poll())
    assert sorted(r.finding.text for r in debouncer.raised.values()) == [
        "gpu0: PCIe x8 under load, a H100 SXM links at x16",
        "gpu0: power brake (external) under load in 1 of 1 samples",
    ]


def test_the_software_power_cap_alone_is_never_a_finding(node: Path) -> None:
    assert polls([SW_POWER_CAP] * 4) == [[], [], [], []]
    # the cap beside the brake does not hide it
    assert polls([SW_POWER_CAP | HW_POWER_BRAKE] * 3)[2] != []


def test_a_clear_poll_resets_the_streak(node: Path) -> None:
    assert polls([HW_POWER_BRAKE, HW_POWER_BRAKE, 0, HW_POWER_BRAKE, HW_POWER_BRAKE])[-1] == []


def test_a_poll_without_nvml_neither_raises_nor_clears(node: Path) -> None:
    # brake, NVML gone (a driver reload), brake, brake: the gap keeps the streak at 1
    raised = polls([HW_POWER_BRAKE, None, HW_POWER_BRAKE, HW_POWER_BRAKE])
    assert raised[-2] == []
    assert raised[-1] != []
    # once raised, a gap does not clear it either
    assert polls([HW_POWER_BRAKE] * 3 + [None])[-1] != []


def test_a_brake_on_an_idle_gpu_warns_as_accept_at_rest(node: Path) -> None:
    poller, debouncer = Poller(window=1, events=False), Debouncer(1)
    play(h100_sxm(throttle=IDLE | HW_POWER_BRAKE))
    debouncer.update(poller.poll())
    texts = {r.finding.text: r.finding.fails for r in debouncer.raised.values()}
    assert texts == {"gpu0: clocks held back at rest by power brake (external)": False}


def test_a_link_trained_down_under_load_fails_but_not_while_idle(node: Path) -> None:
    slow = {"gen": 3, "gen_max_gpu": 5, "gen_max_system": 5, "width": 16, "width_max": 16}
    poller, debouncer = Poller(window=3, events=False), Debouncer(3)
    for _ in range(5):  # idle: an idle GPU trains its link down to save power
        play(h100_sxm(throttle=IDLE, pcie=slow))
        debouncer.update(poller.poll())
    assert debouncer.failing == []
    for _ in range(3):
        play(h100_sxm(throttle=0, pcie=slow))
        debouncer.update(poller.poll())
    assert [r.finding.text for r in debouncer.failing] == [
        "gpu0: PCIe Gen3 under load, a H100 SXM links at Gen5"
    ]
    # the best of the busy polls: a link that reaches Gen5 on one of them is healthy
    poller, debouncer = Poller(window=3, events=False), Debouncer(3)
    for gen in (3, 5, 3, 3):
        play(h100_sxm(throttle=0, pcie={**slow, "gen": gen}))
        debouncer.update(poller.poll())
    assert debouncer.failing == []


def test_a_link_down_in_generation_and_width_raises_both_and_each_streak_holds(
    node: Path,
) -> None:
    # one key for the link kept one finding of the two: the width was never said
    both = {"gen": 3, "gen_max_gpu": 5, "gen_max_system": 5, "width": 8, "width_max": 16}
    poller, debouncer = Poller(window=3, events=False), Debouncer(3)
    for _ in range(3):
        play(h100_sxm(throttle=0, pcie=both))
        debouncer.update(poller.poll())
    assert sorted(r.finding.text for r in debouncer.failing) == [
        "gpu0: PCIe Gen3 under load, a H100 SXM links at Gen5",
        "gpu0: PCIe x8 under load, a H100 SXM links at x16",
    ]
    # an idle poll judges neither; the generation back to Gen5 over a window clears it alone
    play(h100_sxm(throttle=IDLE, pcie=both))
    debouncer.update(poller.poll())
    assert len(debouncer.failing) == 2
    for _ in range(3):
        play(h100_sxm(throttle=0, pcie={**both, "gen": 5}))
        debouncer.update(poller.poll())
    assert [r.finding.text for r in debouncer.failing] == [
        "gpu0: PCIe x8 under load, a H100 SXM links at x16"
    ]


HOT = (
    "gpu0: 89 °C under load, above its 87 °C maximum operating temperature "
    "(DCGM_FR_TEMP_VIOLATION: check this GPU's cooling and the node's airflow)"
)


def _temperatures(polls: list[tuple[bool, dict[str, Any]]]) -> list[list[str]]:
    """The temperature findings raised after each poll of a GPU at 89 °C (busy or idle, with the
    board's facts changed as each poll says)."""
    poller, debouncer = Poller(window=3, events=False), Debouncer(3)
    raised = []
    for busy, facts in polls:
        play(h100_sxm(throttle=0 if busy else IDLE, **{"temperature_c": 89, **facts}))
        debouncer.update(poller.poll())
        raised.append(
            [str(r.finding.text) for r in debouncer.raised.values() if "°C" in r.finding.text]
        )
    return raised


def test_a_busy_gpu_above_its_maximum_operating_temperature_warns_once_held(node: Path) -> None:
    # accept's rule under load (DCGM_FR_TEMP_VIOLATION, a MONITOR code: a warning), held over the
    # polls as any state; idle polls neither raise nor clear it, so a GPU between jobs does not
    # flap
    busy, idle = (True, {}), (False, {})
    raised = _temperatures(
        [busy, busy, idle, busy, idle, idle, busy, (True, {"temperature_c": 80})]
    )
    # at rest too (gpud's reading: degraded at any time), a state of its own that busy polls
    # leave as it is
    rest = HOT.replace("under load", "at rest")
    assert raised == [[], [], [], [HOT], [HOT], [HOT, rest], [HOT, rest], [rest]]


def test_a_threshold_read_that_failed_once_is_read_again(node: Path) -> None:
    # the board answers no threshold at the first poll, then does (one reading per call): the
    # watch asks again rather than keep "no limit" for good
    flaky = {"gpu_max": [None, 87], "slowdown": [None, None, 90]}
    play(h100_sxm(temperature_c=89, temperature_thresholds=flaky))
    poller, debouncer = Poller(window=3, events=False), Debouncer(3)
    for _ in range(4):
        debouncer.update(poller.poll())
    assert [str(r.finding.text) for r in debouncer.raised.values()] == [HOT]


def test_ecc_and_remapping_are_judged_by_accepts_health_rules(node: Path) -> None:
    poller, debouncer = Poller(window=2, events=False), Debouncer(2)
    for _ in range(2):
        play(h100_sxm(remapped_rows=[0, 0, 1, 0]))
        debouncer.update(poller.poll())
    [raised] = debouncer.failing
    assert raised.finding.text == "gpu0: row remapping pending (reset the GPU)"
    assert raised.finding.text.code == "remap-pending"  # type: ignore[attr-defined]


def test_nvlink_errors_that_grow_between_polls_are_raised_at_once(node: Path) -> None:
    links = [{"active": True, "version": 4, "crc": 0, "replay": 0, "recovery": 0}] * 18
    grown = [{**links[0], "replay": 3}, *links[1:]]
    poller, debouncer = Poller(window=3, events=False), Debouncer(3)
    play(h100_sxm(nvlink=links))
    debouncer.update(poller.poll())
    play(h100_sxm(nvlink=grown))
    debouncer.update(poller.poll())
    [raised] = debouncer.failing
    assert "NVLink 0 replay errors grew by 3" in raised.finding.text
    assert not raised.finding.lasting


def _hgx(node: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A healthy H100 and tests/fabric_tree.py's HGX sysfs tree (eight HCAs) as the node's."""
    root = hgx_tree(node.parent / "hgx")
    monkeypatch.setenv("GPUACCEPT_SYSFS_ROOT", str(root))
    play(h100_sxm())
    return root


def _watched(node: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Poller, Debouncer]:
    """That node after a first poll (the ports' baseline), with a 3-poll debounce."""
    root = _hgx(node, monkeypatch)
    poller, debouncer = Poller(window=3, events=False), Debouncer(3)
    debouncer.update(poller.poll())
    return root, poller, debouncer


def _port_polls(
    node: Path, monkeypatch: pytest.MonkeyPatch, *changes: dict[str, int] | None
) -> list[tuple[list[Raised], list[str]]]:
    """Polls of a node whose eight HCAs (tests/fabric_tree.py) start clean; before each poll
    after the first, mlx5_0's counters are set as `changes` says (None: the HCA is gone). After
    each: the failures raised, and the warnings' texts."""
    root, poller, debouncer = _watched(node, monkeypatch)
    after = []
    for change in changes:
        if change is None:
            shutil.rmtree(port_dir(root, 0).parents[1])
        else:
            for counter, value in change.items():
                (port_dir(root, 0) / "counters" / counter).write_text(f"{value}\n")
        debouncer.update(poller.poll())
        warned = [str(r.finding.text) for r in debouncer.raised.values() if not r.finding.fails]
        after.append((debouncer.failing, warned))
    return after


def test_a_port_that_went_down_between_polls_fails_at_once_by_accepts_rule(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # accept's fabric-errors: link_downed growth fails (checks/fabric.py, FAILING_GROWTH); a
    # flap shorter than the interval leaves it grown, so the watch sees what it never polled
    [(failing, _)] = _port_polls(node, monkeypatch, {"link_downed": 1})
    [raised] = failing
    assert raised.finding.text == "mlx5_0:1 link_downed grew by 1 since it was last read"
    assert raised.finding.check == "fabric"
    assert not raised.finding.lasting


def test_minor_port_errors_warn_and_steady_counters_say_nothing(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (steady, steady_warned), (grown, grown_warned) = _port_polls(
        node, monkeypatch, {}, {"symbol_error": 7}
    )
    assert steady == []
    assert not any("mlx5" in text for text in steady_warned)
    assert grown == []
    assert "mlx5_0:1 symbol_error grew by 7 since it was last read" in grown_warned


def test_a_port_gone_is_a_state_held_while_it_is_away_and_cleared_when_back(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, poller, debouncer = _watched(node, monkeypatch)
    hca = port_dir(root, 3).parents[1]
    shutil.move(hca, node.parent / "mlx5_3-away")
    failing = []
    for _ in range(5):  # held over the polls, never dropped while the port is away
        debouncer.update(poller.poll(now=time.time() + 3 * 3600))
        failing.append([str(r.finding.text) for r in debouncer.failing])
    # its going is an event at once (accept's rule for a port gone in a run); its being away, a
    # state raised after the debounce's polls and held while it is
    went = "mlx5_3:1 was read at the last poll but not at this one (gone?)"
    gone = "mlx5_3:1 was read at an earlier poll and is gone now"
    assert failing == [[went], [went], [went, gone], [went, gone], [went, gone]]
    shutil.move(node.parent / "mlx5_3-away", hca)
    debouncer.update(poller.poll(now=time.time() + 6 * 3600))  # back, the event's 2 h gone by
    assert debouncer.failing == []


def test_an_hca_that_vanishes_every_other_poll_is_raised_at_each_going(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, poller, debouncer = _watched(node, monkeypatch)
    hca = port_dir(root, 5).parents[1]
    goings = []
    for away in (True, False, True, False, True):
        if away:
            shutil.move(hca, node.parent / "mlx5_5-away")
        else:
            shutil.move(node.parent / "mlx5_5-away", hca)
        change = debouncer.update(poller.poll())
        goings.append(change.new_failure)
    assert goings == [True, False, True, False, True]


def test_a_port_the_reader_cannot_list_is_unread_not_gone(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # probe/sysfs.py's rule: the reader's own trouble never fails a node. A ports directory
    # turned into a symlink loop is there but unreadable: a warning, no "gone", no growth
    root = _hgx(node, monkeypatch)
    poller = Poller(window=1, events=False)
    poller.poll()
    ports = port_dir(root, 2).parent
    shutil.rmtree(ports)
    ports.symlink_to(ports)
    found = [f for f in poller.poll().findings if "mlx5_2" in str(f.text)]
    assert [f.fails for f in found] == [False]
    assert "error counter(s) unreadable at the last poll or this one" in str(found[0].text)


def test_growth_across_a_poll_that_could_not_read_a_counter_still_fails(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each counter's last value read is the baseline: a counter unreadable at one poll ("N/A
    # (no PMA)") and grown by the next does not hide the flap
    root, poller, debouncer = _watched(node, monkeypatch)
    counter = port_dir(root, 0) / "counters" / "link_downed"
    counter.write_text("N/A (no PMA)\n")
    debouncer.update(poller.poll())
    assert debouncer.failing == []
    counter.write_text("3\n")
    debouncer.update(poller.poll())
    assert [str(r.finding.text) for r in debouncer.failing] == [
        "mlx5_0:1 link_downed grew by 3 since it was last read"
    ]


def test_a_saturated_counter_reset_and_grown_again_fails(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # link_downed is 8 bits: at 255 it no longer counts; `perfquery -R` (what the warning
    # advises) and two more flaps leave it at 2: a reset, and growth since
    root = _hgx(node, monkeypatch)
    counter = port_dir(root, 0) / "counters" / "link_downed"
    counter.write_text("255\n")
    poller, debouncer = Poller(window=3, events=False), Debouncer(3)
    debouncer.update(poller.poll())
    counter.write_text("2\n")
    debouncer.update(poller.poll())
    assert [str(r.finding.text) for r in debouncer.failing] == [
        "mlx5_0:1 link_downed grew by 2 since it was last read"
    ]


def test_a_port_error_that_happens_again_while_held_is_raised_again(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a second flap within the two hours is news: said, counted and handed to the action layer
    [first, second] = _port_changes(node, monkeypatch, {"link_downed": 1}, {"link_downed": 2})
    assert first.new_failure
    assert second.new_failure
    [again] = second.raised
    assert again.since > first.raised[0].since  # raised at the poll that saw it again
    assert again.polls == 2
    assert [str(r.finding.text) for r in second.raised] == [
        "mlx5_0:1 link_downed grew by 1 since it was last read"
    ]


def _port_changes(
    node: Path, monkeypatch: pytest.MonkeyPatch, *changes: dict[str, int]
) -> list[Change]:
    root, poller, debouncer = _watched(node, monkeypatch)
    seen = []
    for change in changes:
        for counter, value in change.items():
            (port_dir(root, 0) / "counters" / counter).write_text(f"{value}\n")
        seen.append(debouncer.update(poller.poll()))
    return seen


def test_ports_that_cannot_be_read_are_said_and_not_judged(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gpuaccept.watch.poll as poll_module

    def refused() -> dict[str, dict[str, int | None]]:
        raise OSError("the reader gave up")

    play(h100_sxm())
    poller = Poller(window=1, events=False)
    assert poller.poll().ports_readable
    monkeypatch.setattr(poll_module, "read_port_counters", refused)
    poll = poller.poll()
    assert not poll.ports_readable
    assert "ports" in poll.unjudged
    assert poll.notes == ("InfiniBand/RoCE counters not read: OSError: the reader gave up",)
    state = WatchState()
    state.last = poll
    assert 'gpuaccept_watch_ports_readable{node="gpu-node-1"} 0.0' in render(state, "gpu-node-1")


def test_a_port_error_is_kept_two_hours_after_it_grew(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _hgx(node, monkeypatch)
    poller = Poller(window=1, events=False)
    poller.poll(now=1000.0)
    (port_dir(root, 0) / "counters" / "link_downed").write_text("1\n")

    def downed(now: float) -> list[bool]:
        found = poller.poll(now=now).findings
        return [f.fails for f in found if "link_downed" in str(f.text)]

    assert downed(1010.0) == [True]
    assert downed(1010.0 + 7200.0) == [True]  # not grown since, still held
    assert downed(1011.0 + 7200.0) == []


def test_once_judges_the_kernel_log_xid_with_accepts_table_and_records_it(node: Path) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S,000000+00:00", time.gmtime(time.time() - 60))
    node.write_text(f"{stamp} NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus.\n")
    play(h100_sxm())
    out = Collected()
    result = run(WatchRequest(once=True, metrics_port=None, act="report"), out)
    assert result.exit_code == 1
    assert "XID 79" in out.text()
    assert "[ACT] report: gpu-node-1: fail (events)" in out.text()
    with sqlite3.connect(os.environ["GPUACCEPT_HISTORY"]) as db:
        rows = db.execute("SELECT command, level, passed, failed_checks FROM runs").fetchall()
    assert rows == [("watch", "watch", 0, "events")]


def test_once_with_nvml_unread_judges_no_gpu_and_exits_3_not_0(node: Path) -> None:
    # a node whose driver cannot load read as a healthy one: exit 0 and no word
    play(h100_sxm(), init="fail")
    out = Collected()
    result = run(WatchRequest(once=True, metrics_port=None, no_history=True), out)
    assert result.exit_code == 3
    assert "[WATCH] NOT JUDGED: NVML was not read, so no GPU was judged (exit 3)\n" in out.text()
    # a failure the kernel log shows all the same is a failure
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S,000000+00:00", time.gmtime(time.time() - 60))
    node.write_text(f"{stamp} NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus.\n")
    result = run(WatchRequest(once=True, metrics_port=None, no_history=True, act="report"), out)
    assert result.exit_code == 1


def test_a_healthy_node_once_exits_0(node: Path) -> None:
    play(h100_sxm())
    result = run(WatchRequest(once=True, metrics_port=None, no_history=True), Collected())
    assert (result.exit_code, result.raised, result.polls) == (0, (), 1)


def test_nvml_failing_then_recovering_is_survived_and_counted(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing = iter([True, True])

    def reloading() -> None:
        if next(failing, False):
            raise fake_nvml.NVMLError(fake_nvml.NVML_ERROR_UNKNOWN)

    monkeypatch.setattr(fake_nvml, "nvmlInit", reloading)
    play(h100_sxm())
    out = Collected()
    request = WatchRequest(interval=0.1, polls=4, metrics_port=None, nvml_events=False)
    result = run(request, out)
    assert (result.exit_code, result.polls) == (0, 4)
    assert "watch: NVML not read" in out.text("err")
    assert "[WATCH] NVML read: 1 GPU(s)" in out.text()


def test_a_full_disk_keeps_the_records_and_writes_them_when_it_frees(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuaccept.store.history import SqliteHistory

    full = iter([True, True])
    real = SqliteHistory.append

    def append(self: Any, reports: Any) -> Any:
        if next(full, False):
            raise sqlite3.OperationalError("database or disk is full")
        return real(self, reports)

    monkeypatch.setattr(SqliteHistory, "append", append)
    throttles = [HW_POWER_BRAKE, HW_POWER_BRAKE, HW_POWER_BRAKE]
    poller, debouncer = Poller(window=3, events=False), Debouncer(3)
    state = WatchState()
    from gpuaccept.commands.watch import _Loop
    from gpuaccept.store.base import history_location

    out = Collected()
    loop = _Loop(
        WatchRequest(act="report"),
        out,
        state,
        debouncer,
        "n1",
        poller.rules,
        history_location(os.environ["GPUACCEPT_HISTORY"]),
    )
    for mask in throttles:
        play(h100_sxm(throttle=mask))
        loop.once(poller.poll())
    assert (state.history_errors, state.history_pending) == (2, 0)
    assert state.history_writes == 2  # the first poll's record and the brake's
    assert "database or disk is full" in out.text("err")
    assert 'gpuaccept_watch_history_write_errors_total{node="n1"} 2.0' in render(state, "n1")


def test_a_new_failure_goes_through_the_guards_in_shadow_mode(
    node: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = tmp_path / "slurm.json"
    fleet.write_text(json.dumps({"nodes": {"gpu-node-1": {"state": "idle"}}}))
    monkeypatch.setenv("PATH", f"{FAKE_SLURM}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM_STATE", str(fleet))
    monkeypatch.setenv("FAKE_SLURM_NOW", "2026-11-29T01:00:00")
    play(h100_sxm(remapped_rows=[0, 0, 0, 1]))
    out = Collected()
    run(WatchRequest(once=True, metrics_port=None, no_history=True), out)
    assert "[ACT] shadow: gpu-node-1: would drain" in out.text()
    assert json.loads(fleet.read_text())["nodes"]["gpu-node-1"]["state"] == "idle"
    out = Collected()
    run(WatchRequest(once=True, metrics_port=None, no_history=True, act="enforce"), out)
    assert json.loads(fleet.read_text())["nodes"]["gpu-node-1"]["state"] == "idle+drain"
    assert "gpuaccept quick: replace: health" in fleet.read_text()


def test_a_scheduler_that_cannot_be_asked_is_said_and_survived(
    node: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no sinfo
    play(h100_sxm(remapped_rows=[0, 0, 0, 1]))
    out = Collected()
    result = run(WatchRequest(once=True, metrics_port=None, no_history=True), out)
    assert result.exit_code == 1
    assert "watch: the action layer could not decide: EnvironmentProblem: sinfo not found" in (
        out.text("err")
    )


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"interval": 0.0}, "--interval 0: give seconds from 0.1 to 3600"),
        ({"interval": float("nan")}, "--interval nan"),
        ({"debounce_polls": 0}, "--debounce-polls 0"),
        ({"metrics_port": 70000}, "--metrics-port 70000"),
        ({"act": "yes"}, "--act 'yes'"),
        ({"polls": 0}, "--polls 0"),
        ({"history": "h.sqlite", "no_history": True}, "not with --no-history"),
    ],
)
def test_the_request_refuses_values_out_of_range(changes: dict[str, Any], said: str) -> None:
    with pytest.raises(InputError, match=said.replace("(", r"\(")):
        WatchRequest(**changes)


def test_metrics_keep_the_brake_apart_from_the_cap(node: Path) -> None:
    play(h100_sxm(0, throttle=HW_POWER_BRAKE), h100_sxm(1, throttle=SW_POWER_CAP))
    state = WatchState()
    state.last = Poller(events=False).poll()
    text = render(state, "n1")
    assert (
        'gpuaccept_watch_gpu_hw_power_brake{gpu="0",node="n1",uuid="GPU-00000000-0000-0000' in text
    )
    lines = [line for line in text.splitlines() if line.startswith("gpuaccept_watch_gpu_hw_")]
    assert [line.rsplit(" ", 1)[1] for line in lines] == ["1.0", "0.0"]
    caps = [line for line in text.splitlines() if line.startswith("gpuaccept_watch_gpu_sw_")]
    assert [line.rsplit(" ", 1)[1] for line in caps] == ["0.0", "1.0"]


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "GPUACCEPT_NVML_MODULE": "tests.fake_nvml",
        "FAKE_NVML_SCENARIO": str(tmp_path / "scenario.json"),
        "GPUACCEPT_KERNEL_LOG": str(tmp_path / "kernel.log"),
        "GPUACCEPT_SYSFS_ROOT": str(_no_ports(tmp_path)),
        "PYTHONPATH": str(REPO),
    }


def _no_ports(tmp_path: Path) -> Path:
    (tmp_path / "sysfs" / "sys").mkdir(parents=True, exist_ok=True)
    return tmp_path / "sysfs"


def _start(tmp_path: Path, scenario: dict[str, Any], *extra: str) -> subprocess.Popen[str]:
    (tmp_path / "scenario.json").write_text(json.dumps(scenario))
    (tmp_path / "kernel.log").write_text("")
    env = _env(tmp_path)
    command = [sys.executable, "-m", "gpuaccept", "watch", "--interval", "0.2"]
    return subprocess.Popen(
        [*command, "--metrics-port", "0", "--act", "report", *extra],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def metrics_url(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    for _ in range(5):
        line = process.stdout.readline()
        if "metrics on " in line:
            return line.split("metrics on ", 1)[1].strip()
    raise AssertionError("no metrics line")


def test_sigterm_stops_it_cleanly_with_exit_0_and_the_history_flushed(tmp_path: Path) -> None:
    history = tmp_path / "history.sqlite"
    process = _start(
        tmp_path, {"gpus": [h100_sxm(throttle=HW_POWER_BRAKE)]}, "--history", str(history)
    )
    try:
        url = metrics_url(process)
        deadline = time.monotonic() + 30
        text = ""
        while "gpuaccept_watch_node_fit" not in text or 'node_fit{node="' not in text:
            assert time.monotonic() < deadline
            text = urllib.request.urlopen(url, timeout=5).read().decode()
        while 'severity="fail"' not in text:  # the brake, once held 3 polls
            assert time.monotonic() < deadline, text
            time.sleep(0.1)
            text = urllib.request.urlopen(url, timeout=5).read().decode()
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=20)
    finally:
        process.kill()
    assert process.returncode == 0, stderr
    assert "stopped by SIGTERM" in stdout
    assert "Traceback" not in stderr
    with sqlite3.connect(history) as db:
        rows = db.execute("SELECT command, failed_checks FROM runs ORDER BY id").fetchall()
    assert rows == [("watch", ""), ("watch", "health")]


def test_an_event_is_kept_two_hours_after_it_was_seen_then_dropped(node: Path) -> None:
    links = [{"active": True, "version": 4, "crc": 0, "replay": 0, "recovery": 0}] * 18
    poller, debouncer = Poller(window=3, events=False), Debouncer(3)
    start = time.time()
    for at, replay in ((start, 0), (start + 10, 3), (start + 7000, 3)):
        play(h100_sxm(nvlink=[{**links[0], "replay": replay}, *links[1:]]))
        debouncer.update(poller.poll(now=at))
    assert len(debouncer.failing) == 1  # no growth since, still within 2 hours of the last one
    debouncer.update(poller.poll(now=start + 10 + 7201))
    assert debouncer.failing == []


def test_a_history_write_the_file_system_refuses_is_survived_and_said(tmp_path: Path) -> None:
    """A real failing write: the process may write no file past 8 KiB (RLIMIT_FSIZE: EFBIG, as
    a full disk refuses the next page with ENOSPC); the database is left whole."""
    import resource

    from gpuaccept.store.history import History

    history = tmp_path / "history.sqlite"
    with History.open(str(history)):
        pass
    # two pages: the check at start (page 1 rewritten and rolled back, its journal) fits, a
    # record's pages lie beyond
    limit = 8192

    def no_growth() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, not a killed process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    (tmp_path / "scenario.json").write_text(json.dumps({"gpus": [h100_sxm()]}))
    (tmp_path / "kernel.log").write_text("")
    command = [sys.executable, "-m", "gpuaccept", "watch", "--interval", "0.2", "--polls", "3"]
    done = subprocess.run(
        [*command, "--metrics-port", "0", "--act", "report", "--history", str(history)],
        cwd=REPO,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=no_growth,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "did not take the record" in done.stderr
    assert "1 record(s) could not be written to the history" in done.stderr
    with sqlite3.connect(history) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("SELECT count(*) FROM runs").fetchone() == (0,)


def test_a_gpu_gone_between_two_nvml_calls_is_a_poll_without_nvml(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    play(h100_sxm(throttle=HW_POWER_BRAKE))
    poller, debouncer = Poller(window=1, events=False), Debouncer(1)
    debouncer.update(poller.poll())
    assert debouncer.failing != []

    calls = iter([True])  # the health reading finds the GPU; the next call of the poll does not
    found = fake_nvml.nvmlDeviceGetHandleByIndex

    def gone(index: int) -> Any:
        if next(calls, False):
            return found(index)
        raise fake_nvml.NVMLError(fake_nvml.NVML_ERROR_GPU_IS_LOST)

    monkeypatch.setattr(fake_nvml, "nvmlDeviceGetHandleByIndex", gone)
    poll = poller.poll()
    assert not poll.nvml_up
    assert "GPU is lost" in str(poll.nvml_problem)
    debouncer.update(poll)
    assert debouncer.failing != []  # a poll that read nothing clears nothing


def test_a_poll_that_fails_on_the_watchs_own_fault_is_said_and_survived(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = iter([True])
    real = Poller.poll

    def poll(self: Poller, now: float | None = None) -> Any:
        if next(failures, False):
            raise ValueError("a bug")
        return real(self, now)

    monkeypatch.setattr(Poller, "poll", poll)
    play(h100_sxm())
    out = Collected()
    request = WatchRequest(interval=0.1, polls=2, metrics_port=None, no_history=True)
    result = run(request, out)
    assert (result.exit_code, result.polls) == (0, 2)
    assert "watch: the poll failed: ValueError: a bug" in out.text("err")


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_the_records_are_runs_of_command_watch_in_either_store(
    node: Path, store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from gpuaccept.store.history import History

    location = (
        str(tmp_path / "h.sqlite") if store == "sqlite" else request.getfixturevalue("pg_history")
    )
    play(h100_sxm(remapped_rows=[0, 0, 1, 0]))
    run(WatchRequest(once=True, metrics_port=None, act="report", history=location), Collected())
    with History.open(location) as history:
        [row] = history.newest_runs("watch")
        report = history.report(row.id)
    assert (report.command, report.level, report.verdict.failed_checks) == (
        "watch",
        "watch",
        ["health"],
    )
    assert report.actions is not None
    assert report.actions.action.value == "reset-gpu"  # remap-pending's row of the tables


def test_a_failure_is_handed_to_the_action_layer_once_while_it_holds(node: Path) -> None:
    play(h100_sxm(throttle=HW_POWER_BRAKE))
    out = Collected()
    request = WatchRequest(
        interval=0.1, polls=6, debounce_polls=2, metrics_port=None, act="report", no_history=True
    )
    run(request, out)
    assert out.text().count("[ACT] report: gpu-node-1: fail (health)") == 1


def test_records_the_history_refuses_are_kept_up_to_a_bound_and_the_rest_counted(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gpuaccept.commands.watch as command
    from gpuaccept.store.base import history_location
    from gpuaccept.store.history import SqliteHistory

    def full(self: Any, reports: Any) -> Any:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(SqliteHistory, "append", full)
    monkeypatch.setattr(command, "MAX_PENDING", 2)
    state = WatchState()
    poller = Poller(window=1, events=False)
    location = history_location(os.environ["GPUACCEPT_HISTORY"])
    out = Collected()
    loop = command._Loop(
        WatchRequest(act="report"), out, state, Debouncer(1), "n1", poller.rules, location
    )
    for mask in (0, HW_POWER_BRAKE, 0, HW_POWER_BRAKE, 0):  # five changes, five records
        play(h100_sxm(throttle=mask))
        loop.once(poller.poll())
    assert (state.history_pending, state.history_dropped, state.history_errors) == (2, 3, 5)
    assert out.text("err").count("did not take the record") == 1  # said once, counted each time


def test_a_rotated_kernel_log_does_not_clear_an_xid_the_window_still_holds(node: Path) -> None:
    """kern.log moved aside (or a ring buffer overwritten) mid-watch: the XID 79 it held is kept
    until its own line leaves aznhc's 2 h window, as the scan would have aged it; it read as
    cleared, and the node fit again."""
    play(h100_sxm())
    seen = time.time() - 60
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S,000000+00:00", time.gmtime(seen))
    node.write_text(f"{stamp} NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus.\n")
    poller, debouncer = Poller(window=1, events=False), Debouncer(1)
    now = time.time()
    assert "XID 79" in debouncer.update(poller.poll(now)).raised[0].finding.text
    node.rename(node.with_suffix(".1"))
    node.write_text("")  # the new, empty kern.log
    time.sleep(1.1)  # the reader keeps a log unchanged for a second
    assert not debouncer.update(poller.poll(now + 600)).cleared
    assert [r.finding.text for r in debouncer.failing if "XID 79" in r.finding.text]
    # two hours after the line itself, the window no longer holds it: cleared, as aging would
    later = seen + 7200 + 1
    assert [
        r.finding.text
        for r in debouncer.update(poller.poll(later)).cleared
        if "XID 79" in r.finding.text
    ]
    assert not [r for r in debouncer.failing if "XID 79" in r.finding.text]


def test_a_counter_that_stays_unreadable_is_one_state_said_once_not_a_warning_per_poll(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _hgx(node, monkeypatch)
    poller, debouncer = Poller(window=3, events=False), Debouncer(3)
    assert poller.poll().ports_readable
    (port_dir(root, 4) / "counters" / "symbol_error").write_text("N/A (no PMA)\n")
    raised, readable = [], []
    for _ in range(6):
        poll = poller.poll()
        readable.append(poll.ports_readable)
        raised += [str(r.finding.text) for r in debouncer.update(poll).raised]
    assert raised == [
        "mlx5_4:1: 1 error counter(s) unreadable at the last poll or this one (symbol_error): "
        "their growth is unknown, not judged"
    ]
    assert readable == [False] * 6
    assert poll.notes == ("InfiniBand/RoCE counters not all read: mlx5_4:1",)


def test_gpus_without_a_uuid_are_each_their_own_scope_and_limit(node: Path) -> None:
    # NVML that cannot say a GPU's UUID: the GPU is its index, never the text "None" two GPUs
    # would share (their temperatures judged against one limit)
    cool = h100_sxm(0, uuid=None, temperature_c=86, temperature_thresholds={"gpu_max": 90})
    hot = h100_sxm(1, uuid=None, temperature_c=86, temperature_thresholds={"gpu_max": 85})
    play(cool, hot)
    poller, debouncer = Poller(window=3, events=False), Debouncer(3)
    for _ in range(3):
        debouncer.update(poller.poll())
    assert [(r.finding.scope, str(r.finding.text)[:20]) for r in debouncer.raised.values()] == [
        ("gpu:1", "gpu1: 86 °C under lo")
    ]


def test_a_q_counter_at_its_top_says_the_watchs_span_not_a_run(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _hgx(node, monkeypatch)
    hw = port_dir(root, 0) / "hw_counters"
    hw.mkdir()
    (hw / "out_of_sequence").write_text(f"{(1 << 32) - 1}\n")
    poller = Poller(window=1, events=False)
    poller.poll()
    [said] = [str(f.text) for f in poller.poll().findings if "out_of_sequence" in str(f.text)]
    assert said.endswith(
        "it may no longer count, so its growth since it was last read is unknown (the driver "
        "clears it when the port's counters are reallocated, e.g. on a driver reload)"
    )


def test_a_ports_finding_is_labelled_with_its_port_in_the_metrics(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _hgx(node, monkeypatch)
    poller, debouncer = Poller(window=3, events=False), Debouncer(3)
    state = WatchState()
    state.last = poller.poll()
    debouncer.update(state.last)
    (port_dir(root, 6) / "counters" / "link_downed").write_text("2\n")
    state.last = poller.poll()
    debouncer.update(state.last)
    state.raised = tuple(debouncer.raised.values())
    scraped = render(state, "gpu-node-1")
    assert (
        'gpuaccept_watch_findings{cause="cause:port-errors",check="fabric",gpu="",'
        'node="gpu-node-1",port="mlx5_6:1",severity="fail"} 1.0'
    ) in scraped
