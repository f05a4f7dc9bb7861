"""Self- and fleet comparisons key on the GPU where the figure is a GPU's (issue #31 §4): a board
swapped in under the same index is not held to the one it replaced; a GPU that moved to another
node keeps its own past there; a GPU counts once in the fleet's median, wherever it ran, and is
never its own peer."""

from __future__ import annotations

from pathlib import Path

from gpuaccept.compare.comparison import fleet_view
from gpuaccept.compare.fleet_comparison import compare_with_fleet
from gpuaccept.compare.self_comparison import compare_with_own_history
from gpuaccept.results import RunReport
from gpuaccept.store.history import History
from gpuaccept.verdict import Status
from tests.compare.test_fleet_comparison import burnin_report
from tests.run_reports import gpu_report, history_with, rejudged


def _on(host: str, uuid: str, tflops: float, hours: float) -> RunReport:
    """An accept run on `host` whose one GPU is the board `uuid`."""
    report = gpu_report(host, [tflops], hours=hours)
    gpus = [{**report.environment["gpus"][0], "uuid": uuid}]
    return rejudged(report, environment={**report.environment, "gpus": gpus})


def _compare(path: Path, report: RunReport) -> object:
    with History.open(path) as history:
        return compare_with_own_history(report, history)


def test_a_board_swapped_in_is_not_held_to_the_one_it_replaced(tmp_path: Path) -> None:
    """n1's gpu0 was board A (800 TFLOPS); after an RMA it is board B at 600: not "slower than it
    was" (B has no past), and A's figures are not B's yardstick; B's own next run is."""
    path = history_with(tmp_path / "h.db", *(_on("n1", "GPU-A", 800.0, h) for h in range(3)))
    swapped = _compare(path, _on("n1", "GPU-B", 600.0, 10))
    compared = [f.metric for f in swapped.figures]  # type: ignore[attr-defined]
    assert compared == ["train/train_elapsed"]  # the node's own figure, not the board's
    assert swapped.drops == []  # type: ignore[attr-defined]

    # without UUIDs in the captures the slot is all there is: compared as before
    def anonymous(tflops: float, hours: float) -> RunReport:
        report = gpu_report("n1", [tflops], hours=hours)
        gpus = [{"index": 0, "name": report.environment["gpus"][0]["name"]}]
        return rejudged(report, environment={**report.environment, "gpus": gpus})

    slots = history_with(tmp_path / "a.db", *(anonymous(800.0, h) for h in range(3)))
    (drop,) = _compare(slots, anonymous(600.0, 10)).drops  # type: ignore[attr-defined]
    assert (drop.device, drop.median) == ("gpu0", 800.0)

    # two GPUs without UUIDs stay two slots: only the slow one is named
    def pair(first: float, second: float, hours: float) -> RunReport:
        report = gpu_report("n3", [first, second], hours=hours)
        gpus = [{"index": i, "name": g["name"]} for i, g in enumerate(report.environment["gpus"])]
        return rejudged(report, environment={**report.environment, "gpus": gpus})

    two = history_with(tmp_path / "two.db", *(pair(800.0, 700.0, h) for h in range(3)))
    (slow,) = _compare(two, pair(600.0, 700.0, 10)).drops  # type: ignore[attr-defined]
    assert (slow.device, slow.median) == ("gpu0", 800.0)
    # B's own past, once it has one, is its yardstick
    history_with(path, _on("n1", "GPU-B", 600.0, 11), _on("n1", "GPU-B", 610.0, 12))
    later = _compare(path, _on("n1", "GPU-B", 420.0, 13))
    (drop,) = later.drops  # type: ignore[attr-defined]
    assert drop.median == 605.0


def test_a_gpu_that_moved_keeps_its_past(tmp_path: Path) -> None:
    """Board A ran on n1 at 800; moved to n2, its first run there at 500 is 37.5% below its own
    past: warned, naming where that past was; board C on n2 with no past is not compared."""
    past = [_on("n1", "GPU-A", 800.0, h) for h in range(3)]
    # more comparable runs than the yardstick takes (5, newest first) and a quick run, which is
    # no standard run's yardstick: neither may change the median
    older = [_on("n1", "GPU-A", 400.0, h) for h in (-30, -20, -10)]
    quick = rejudged(_on("n1", "GPU-A", 100.0, 2.5), level="quick")
    path = history_with(tmp_path / "h.db", *older, *past, quick)
    moved = _compare(path, _on("n2", "GPU-A", 500.0, 10))
    (drop,) = moved.drops  # type: ignore[attr-defined]
    assert drop.device == "gpu0 (GPU-A, its past on n1)"
    assert (drop.median, drop.runs) == (800.0, 5)
    check = moved.check(fail_on_drop=False)  # type: ignore[attr-defined]
    assert check.status is Status.WARN
    assert "5 comparable run(s) on other hosts of GPUs that moved here" in check.message
    assert check.details["compared_runs_of_moved_gpus"] == [2, 3, 4, 5, 6]
    fresh = _compare(path, _on("n2", "GPU-C", 500.0, 10))
    assert "first passing accept standard" in fresh.nothing_to_compare  # type: ignore[attr-defined]


def test_a_moved_gpu_counts_once_in_the_fleet_and_is_never_its_own_peer(tmp_path: Path) -> None:
    """Burn-ins: GPU X ran on n1 (at 100) and moved to n4 (at 100); n2 and n3 have one GPU each
    (at 100). X on n5 has two peers (Y, Z: its own older figures are not its peers): no median;
    another GPU W has three (X once, at its newest; Y; Z)."""

    def named(report: RunReport, uuid: str) -> RunReport:
        gpus = [{**report.environment["gpus"][0], "uuid": uuid, "index": 0}]
        return rejudged(report, environment={**report.environment, "gpus": gpus})

    runs = [
        named(burnin_report("n1", [100.0], hours=0), "GPU-X"),
        named(burnin_report("n2", [100.0], hours=1), "GPU-Y"),
        named(burnin_report("n3", [100.0], hours=2), "GPU-Z"),
        named(burnin_report("n4", [100.0], hours=3), "GPU-X"),
    ]
    path = history_with(tmp_path / "h.db", *runs)
    with History.open(path) as history:
        latest = history.points("burnin-throughput/burnin_gemm_bf16", latest_only=True)
        assert sorted(p.gpu_uuid or "" for p in latest) == ["GPU-X", "GPU-Y", "GPU-Z"]
        assert next(p for p in latest if p.gpu_uuid == "GPU-X").hostname == "n4"
        # X now on n5, slow: its peers are Y and Z only (2 < 3): not compared, said
        slow_x = named(burnin_report("n5", [50.0], hours=4), "GPU-X")
        check = compare_with_fleet(slow_x, history, 10)
        assert check.details["figures"] == []
        assert check.details["not_compared"] == ["NVIDIA H100 80GB HBM3"]
        # another GPU W on n5 has three peers: X (once, at its newest), Y, Z
        slow_w = named(burnin_report("n5", [50.0], hours=4), "GPU-W")
        check = compare_with_fleet(slow_w, history, 10)
        assert check.status is Status.FAIL
        assert "the median 100 of 3" in check.message
        view = fleet_view(
            history.list_runs(), history.points(latest_only=True), tolerance_percent=10
        )
        assert len([f for f in view.figures if f.point.gpu_uuid == "GPU-X"]) == 1
