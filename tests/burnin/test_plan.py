"""The burn-in's plan and checkpoint: durations, the rotation, and an honest resume."""

from __future__ import annotations

import pytest

from gpuaccept.burnin.plan import (
    BurnInPlan,
    parse_duration,
    spoken_duration,
)
from gpuaccept.errors import InputError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("30s", 30.0),
        ("5m", 300.0),
        ("24h", 86400.0),
        ("1h30m", 5400.0),
        ("7d", 604800.0),
        ("0.5h", 1800.0),
        (" 2H ", 7200.0),
    ],
)
def test_durations_read_as_people_write_them(text: str, seconds: float) -> None:
    assert parse_duration(text, "--duration") == seconds


@pytest.mark.parametrize("text", ["", "h", "5x", "-5m", "0", "0s", "31d", "1e400", "5m 3", "nan"])
def test_a_duration_that_is_no_duration_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(InputError, match=r"^--duration "):
        parse_duration(text, "--duration")


def test_the_rotation_gives_each_window_its_stressor_and_the_last_window_what_is_left() -> None:
    plan = BurnInPlan.build(3600 + 120, 300, gpu_count=8)
    assert plan.stressors == ("gemm-bf16", "gemm-fp32", "hbm", "host-transfer", "all-reduce")
    assert plan.window_count == 13
    assert [plan.stressor(w) for w in (0, 4, 5, 12)] == [
        "gemm-bf16",
        "all-reduce",
        "gemm-bf16",
        "hbm",  # 12 = 2 rounds of 5, then the third
    ]
    assert [plan.seconds_of(w) for w in (0, 11, 12)] == [300, 300, 120]
    assert BurnInPlan.build(600, 300, gpu_count=1).window_count == 2  # exact: no empty window
    assert plan.describe() == [
        "[BURNIN] 1h2m of load in 13 window(s) of 5m",
        "[BURNIN] stressors in turn, one per window: gemm-bf16, gemm-fp32, hbm, host-transfer, "
        "all-reduce",
    ]


def test_durations_are_spoken_as_they_are_written() -> None:
    assert [spoken_duration(s) for s in (86400, 5400, 90, 30, 0.5, 259200)] == [
        "24h",
        "1h30m",
        "1m30s",
        "30s",
        "0.5s",
        "72h",
    ]
    for text in ("24h", "1h30m", "90s", "7d"):
        assert parse_duration(spoken_duration(parse_duration(text, "--duration")), "x") == (
            parse_duration(text, "--duration")
        )


def test_one_gpu_has_no_all_reduce_and_a_schedule_is_checked() -> None:
    assert "all-reduce" not in BurnInPlan.build(600, 60, gpu_count=1).stressors
    custom = BurnInPlan.build(600, 60, gpu_count=2, schedule=["hbm", "all-reduce"])
    assert custom.stressors == ("hbm", "all-reduce")
    with pytest.raises(InputError, match="all-reduce needs at least two GPUs"):
        BurnInPlan.build(600, 60, gpu_count=1, schedule=["all-reduce"])
    with pytest.raises(InputError, match="unknown stressor 'gpu-burn'"):
        BurnInPlan.build(600, 60, gpu_count=2, schedule=["gemm-bf16", "gpu-burn"])
    with pytest.raises(InputError, match="longer than --duration"):
        BurnInPlan.build(60, 300, gpu_count=2)


@pytest.mark.parametrize(
    ("duration", "window", "says"),
    [
        # a window shorter than a second measures start-up; 10 s of them ran for minutes
        ("10s", "0.01s", "--window '0.01s': at least 1s"),
        # "0s of load" was a pass
        ("0.001s", "0.001s", "--duration '0.001s': at least 1s"),
        # 2.6 billion windows were accepted
        ("30d", "1s", "--duration 720h in windows of 1s is 2592000 windows, more than the 10080"),
    ],
)
def test_windows_and_durations_are_bounded(duration: str, window: str, says: str) -> None:
    def plan() -> BurnInPlan:
        seconds = parse_duration(duration, "--duration")
        return BurnInPlan.build(seconds, parse_duration(window, "--window"), gpu_count=2)

    with pytest.raises(InputError) as refused:
        plan()
    assert says in str(refused.value)


def test_the_longest_plan_allowed_is_a_week_of_one_minute_windows() -> None:
    assert BurnInPlan.build(7 * 86400, 60, gpu_count=8).window_count == 10080
    with pytest.raises(InputError, match="10081 windows"):
        BurnInPlan.build(7 * 86400 + 60, 60, gpu_count=8)
