"""The burn-in's plan and checkpoint: durations, the rotation, and an honest resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuaccept.burnin.plan import (
    BurnInPlan,
    BurnInProgress,
    WindowFigures,
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


def _window(plan: BurnInPlan, window: int) -> WindowFigures:
    return WindowFigures(
        window=window,
        stressor=plan.stressor(window),
        seconds=plan.seconds_of(window),
        throughput={"gpu0": 800.0, "gpu1": 790.0},
    )


def test_an_evicted_burn_in_resumes_where_it_stopped_with_its_load_time_honest(
    tmp_path: Path,
) -> None:
    plan = BurnInPlan.build(1500, 300, gpu_count=2)
    path = tmp_path / "burnin.json"
    first = BurnInProgress.resume(path, plan)  # no checkpoint yet: a fresh start
    for window in range(3):
        first.record(_window(plan, window))
        first.save(path)
    # the job is evicted here, hours may pass; the restarted job reads the checkpoint
    again = BurnInProgress.resume(path, plan)
    assert again.next_window == 3
    assert again.load_seconds == 900.0  # three windows of load, not the wall time since the start
    assert again.windows[2].throughput == {"gpu0": 800.0, "gpu1": 790.0}
    with pytest.raises(ValueError, match="window 5 recorded after 2"):
        again.record(_window(plan, 5))


def test_a_checkpoint_of_another_plan_or_no_checkpoint_at_all_is_refused(tmp_path: Path) -> None:
    plan = BurnInPlan.build(1500, 300, gpu_count=2)
    path = tmp_path / "burnin.json"
    progress = BurnInProgress.resume(path, plan)
    progress.record(_window(plan, 0))
    progress.save(path)
    other = BurnInPlan.build(3000, 300, gpu_count=2)
    with pytest.raises(InputError, match="give the same --duration, --window and --schedule"):
        BurnInProgress.resume(path, other)
    path.write_text('{"schema_version": 1, "plan": "x"')  # cut short
    with pytest.raises(InputError, match="not a burn-in checkpoint"):
        BurnInProgress.resume(path, plan)
    shuffled = BurnInProgress(plan=plan.fingerprint(), windows=[_window(plan, 1)])
    shuffled_path = tmp_path / "shuffled.json"
    shuffled_path.write_text(shuffled.model_dump_json())
    with pytest.raises(InputError, match="not in order"):
        BurnInProgress.resume(shuffled_path, plan)
