"""A node against its own past: figures compared with the median of its last comparable runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.commands.output import Collected
from gpuaccept.commands.recording import DropPolicy, compared_with_history
from gpuaccept.compare.self_comparison import compare_with_own_history, default_tolerance
from gpuaccept.results import CheckResult, Measurement, RunReport
from gpuaccept.store.history import History
from gpuaccept.verdict import Outcome, Status
from tests.run_reports import gpu_report, history_with, rejudged

runner = CliRunner()


def _history(tmp_path: Path, *reports: RunReport) -> Path:
    return history_with(tmp_path / "h.sqlite", *reports)


def _compare(path: Path, report: RunReport, **options: Any) -> Any:
    with History.open(path) as history:
        return compare_with_own_history(report, history, **options)


def _past(host: str = "n1", values: tuple[float, ...] = (800.0, 810.0, 790.0), **kw: Any) -> list:
    return [gpu_report(host, [v], hours=i, **kw) for i, v in enumerate(values)]


def test_a_figure_a_quarter_below_the_nodes_median_warns_naming_it(tmp_path: Path) -> None:
    path = _history(tmp_path, *_past())
    now = gpu_report("n1", [600.0], hours=10)
    comparison = _compare(path, now)
    [drop] = comparison.drops
    assert (drop.metric, drop.device, drop.median, drop.runs) == (
        "compute/matmul_bf16_tflops",
        "gpu0",
        800.0,
        3,
    )
    assert drop.change_percent == pytest.approx(-25.0)
    check = comparison.check(fail_on_drop=False)
    assert check.status is Status.WARN
    assert "compute/matmul_bf16_tflops on gpu0 -25.0% (600 vs 800 TFLOPS)" in check.message
    assert "last 3 comparable run(s)" in check.message
    # asked to, it fails the run
    assert comparison.check(fail_on_drop=True).status is Status.FAIL


def test_a_figure_within_the_tolerance_passes(tmp_path: Path) -> None:
    path = _history(tmp_path, *_past())
    comparison = _compare(path, gpu_report("n1", [650.0], hours=10))  # -18.75%
    assert comparison.drops == []
    check = comparison.check(fail_on_drop=True)
    assert check.status is Status.PASS
    assert check.message.startswith("2 figure(s) within 20% of")  # matmul and train time


def test_the_tolerance_is_a_bound_and_can_be_set(tmp_path: Path) -> None:
    path = _history(tmp_path, *_past(values=(800.0,)))
    assert _compare(path, gpu_report("n1", [640.0], hours=10)).drops == []  # exactly -20%
    assert len(_compare(path, gpu_report("n1", [639.0], hours=10)).drops) == 1
    assert _compare(path, gpu_report("n1", [639.0], hours=10), tolerance_percent=25).drops == []


def test_a_time_that_grew_is_a_drop_and_a_faster_figure_is_not(tmp_path: Path) -> None:
    path = _history(tmp_path, *_past())
    slower_training = gpu_report("n1", [1600.0], hours=10, train_seconds=15.0)  # +25%
    [drop] = _compare(path, slower_training).drops
    assert (drop.metric, drop.unit) == ("train/train_elapsed", "s")


def test_the_median_of_the_last_five_comparable_runs_is_the_yardstick(tmp_path: Path) -> None:
    # an old, much faster run is beyond the last five; one slow run among them is outvoted
    values = (4000.0, 800.0, 800.0, 100.0, 800.0, 800.0)
    path = _history(tmp_path, *_past(values=values))
    comparison = _compare(path, gpu_report("n1", [790.0], hours=10))
    assert comparison.drops == []
    figure = next(f for f in comparison.figures if f.metric == "compute/matmul_bf16_tflops")
    assert (figure.median, figure.runs) == (800.0, 5)
    assert comparison.run_ids == [6, 5, 4, 3, 2]  # newest first


def test_only_comparable_runs_count(tmp_path: Path) -> None:
    fast = 2000.0
    others = [
        gpu_report("n2", [fast], hours=1),  # another node
        gpu_report("n1", [fast], hours=2, passed=False),  # a failed run
        gpu_report("n1", [fast], hours=3, command="bench"),  # another command
        rejudged(gpu_report("n1", [fast], hours=4), level="quick"),  # another level
        rejudged(gpu_report("n1", [fast], hours=5), device_mode="cpu"),  # the CPU twins
        gpu_report("n1", [fast], hours=6, model="NVIDIA A100-SXM4-80GB"),  # other GPUs
    ]
    path = _history(tmp_path, *others, *_past(values=(800.0,)))
    comparison = _compare(path, gpu_report("n1", [790.0], hours=10))
    assert comparison.drops == []
    assert len(comparison.run_ids) == 1


def test_a_changed_software_stack_starts_the_comparison_afresh(tmp_path: Path) -> None:
    before = _past(extra_environment={"torch": {"version": "2.12.0", "cuda": "12.9"}})
    path = _history(tmp_path, *before)
    now = gpu_report(
        "n1", [100.0], hours=10, extra_environment={"torch": {"version": "2.13.0", "cuda": "12.9"}}
    )
    comparison = _compare(path, now)
    check = comparison.check(fail_on_drop=True)
    assert check.status is Status.SKIP
    assert "3 on another: the stack changed" in check.message


def test_a_first_run_is_not_compared_and_says_so(tmp_path: Path) -> None:
    path = _history(tmp_path)
    check = _compare(path, gpu_report("n1", [100.0])).check(fail_on_drop=True)
    assert check.status is Status.SKIP
    assert check.message == (
        "first passing accept standard (GPU mode) run on n1: nothing to compare with yet"
    )


def test_the_comparison_joins_the_verdict_only_when_asked_to_fail(tmp_path: Path) -> None:
    path = _history(tmp_path, *_past())
    now = gpu_report("n1", [400.0], hours=10)
    warned = compared_with_history(now, path, DropPolicy(None, fail=False), Collected())
    assert warned.checks[-1].name == "history"
    assert warned.checks[-1].status is Status.WARN
    assert warned.verdict.outcome is Outcome.PASS
    failed = compared_with_history(now, path, DropPolicy(None, fail=True), Collected())
    assert failed.verdict.outcome is Outcome.FAIL
    assert failed.verdict.failed_checks == ["history"]
    assert RunReport.model_validate_json(failed.model_dump_json()) == failed


def test_a_run_that_judged_nothing_or_was_interrupted_is_not_compared(tmp_path: Path) -> None:
    path = _history(tmp_path, *_past())
    skipped = CheckResult(name="health", area="HEALTH", status=Status.SKIP, message="no GPU")
    nothing = rejudged(gpu_report("n1", [100.0], hours=10), checks=[skipped])
    assert nothing.verdict.outcome is Outcome.NOT_JUDGED
    # a PASS of the comparison must not turn a run that judged nothing into a pass
    assert (
        compared_with_history(nothing, path, DropPolicy(None, fail=False), Collected()) == nothing
    )
    stopped = rejudged(gpu_report("n1", [100.0], hours=10), interrupted_by=15)
    assert compared_with_history(stopped, path, DropPolicy(None, fail=True), Collected()) == stopped
    assert (
        compared_with_history(gpu_report("n1", [1.0]), None, DropPolicy(None, True), Collected())
        .checks[-1]
        .name
        != "history"
    )


def test_the_cpu_twins_have_a_wider_default_tolerance() -> None:
    assert default_tolerance("cuda") == 20.0
    assert default_tolerance("cpu") == 50.0


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "1001"])
def test_a_drop_tolerance_that_cannot_be_a_percentage_is_refused(value: str) -> None:
    done = runner.invoke(app, ["accept", "--device", "cpu", "--drop-tolerance", value])
    assert done.exit_code == 2
    assert "--drop-tolerance" in done.output
    assert "Traceback" not in done.output


def _mixed(hours: float, models: tuple[str, str], tflops: tuple[float, float]) -> RunReport:
    report = gpu_report("n1", list(tflops), hours=hours)
    compute = report.checks[0]
    measurements = [
        m.model_copy(update={"device_name": models[m.device_index or 0]})
        for m in compute.measurements
    ]
    gpus = [{"index": i, "name": models[i], "uuid": f"GPU-{i}"} for i in range(2)]
    return rejudged(
        report,
        checks=[compute.model_copy(update={"measurements": measurements}), *report.checks[1:]],
        environment={**report.environment, "gpus": gpus},
    )


def test_a_figure_is_compared_only_with_the_same_gpu_model_in_its_slot(tmp_path: Path) -> None:
    """Boards moved between slots: the set of models (and so the stack) is the same, but gpu0 is
    now the slower model, which is no drop of gpu0."""
    h100, a100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
    path = _history(tmp_path, _mixed(0, (h100, a100), (800.0, 300.0)))
    comparison = _compare(path, _mixed(10, (a100, h100), (300.0, 800.0)))
    assert comparison.drops == []
    assert [f.metric for f in comparison.figures] == ["train/train_elapsed"]


def test_fleet_names_a_node_whose_newest_accept_found_it_slower_than_before(
    tmp_path: Path,
) -> None:
    path = _history(tmp_path, *_past("n1"), *_past("n2"))
    slow = compared_with_history(
        gpu_report("n1", [500.0], hours=10), path, DropPolicy(None, fail=False), Collected()
    )
    steady = compared_with_history(
        gpu_report("n2", [800.0], hours=10), path, DropPolicy(None, fail=False), Collected()
    )
    with History.open(path) as history:
        history.append([(slow, "test"), (steady, "test")])
    done = runner.invoke(app, ["history", "fleet", "--history", str(path), "--json"])
    assert done.exit_code == 1, done.output  # both passed, no GPU lags its fleet: the drop
    view = json.loads(done.output)
    [named] = view["slower_than_before"]
    assert (named["node"], named["status"]) == ("n1", "warn")
    assert "compute/matmul_bf16_tflops on gpu0 -37.5%" in named["message"]
    text = runner.invoke(app, ["history", "fleet", "--history", str(path)])
    assert "n1 (run 7): slower than it was" in text.output


def test_the_check_carries_the_compared_figures_as_a_table(tmp_path: Path) -> None:
    path = _history(tmp_path, *_past())
    check = _compare(path, gpu_report("n1", [600.0], hours=10)).check(fail_on_drop=False)
    assert check.details["tolerance_percent"] == 20.0
    assert check.details["compared_runs"] == [3, 2, 1]
    assert check.details["columns"] == [
        ["metric", "figure"],
        ["device", "device"],
        ["value", "now"],
        ["median", "median before"],
        ["change", "change"],
        ["runs", "runs"],
    ]
    assert check.details["rows"][0] == {
        "metric": "compute/matmul_bf16_tflops",
        "device": "gpu0",
        "value": "600 TFLOPS",
        "median": "800 TFLOPS",
        "change": "-25.0%",
        "runs": 3,
    }
    assert (check.name, check.area) == ("history", "HISTORY")


def test_more_than_three_drops_are_summed_up(tmp_path: Path) -> None:
    path = _history(tmp_path, *[gpu_report("n1", [800.0] * 5, hours=i) for i in range(2)])
    check = _compare(path, gpu_report("n1", [500.0, 510.0, 520.0, 530.0, 540.0], hours=9)).check(
        fail_on_drop=False
    )
    assert check.message.startswith("slower than it was: 5 figure(s) more than 20% worse than")
    assert "on gpu0 -37.5%" in check.message
    assert "on gpu2 -35.0%" in check.message
    assert "gpu3" not in check.message  # the three worst, then a count
    assert check.message.endswith(" and 2 more")
    four = _compare(path, gpu_report("n1", [500.0, 510.0, 520.0, 530.0, 800.0], hours=9))
    assert four.check(fail_on_drop=False).message.endswith(" and 1 more")


def test_nothing_to_compare_says_why(tmp_path: Path) -> None:
    path = _history(tmp_path, *_past())
    no_host = rejudged(gpu_report("n1", [800.0], hours=10), environment={})
    assert _compare(path, no_host).nothing_to_compare == (
        "the run captured no node name: no history of this node to compare with"
    )
    other_figures = rejudged(
        gpu_report("n1", [800.0], hours=10),
        checks=[
            CheckResult(
                name="memory",
                area="MEMORY",
                status=Status.PASS,
                message="ok",
                measurements=[Measurement(name="hbm_gbps", value=3000.0, unit="GB/s")],
            )
        ],
    )
    assert _compare(path, other_figures).nothing_to_compare == (
        "no figure of this run was measured by the earlier accept standard (GPU mode) runs"
    )


def test_only_a_judged_uninterrupted_run_takes_the_check() -> None:
    from gpuaccept.compare.self_comparison import with_check

    extra = CheckResult(name="history", area="HISTORY", status=Status.PASS, message="ok")
    stopped = rejudged(gpu_report("n1", [1.0]), interrupted_by=15)
    with pytest.raises(ValueError, match=r"^only a judged, uninterrupted run"):
        with_check(stopped, extra)
    skipped = CheckResult(name="health", area="HEALTH", status=Status.SKIP, message="no GPU")
    nothing = rejudged(gpu_report("n1", [1.0]), checks=[skipped])
    with pytest.raises(ValueError, match=r"^only a judged, uninterrupted run"):
        with_check(nothing, extra)
    cpu = rejudged(gpu_report("n1", [1.0]), device_mode="cpu")
    assert with_check(cpu, extra).verdict.mode == "cpu"


def test_the_edges_of_each_rule(tmp_path: Path) -> None:
    from gpuaccept.compare.self_comparison import SelfFigure

    # a figure without a direction (a temperature) is never a drop, however far it moved
    assert not SelfFigure("health/temp", "gpu0", "C", 90.0, 40.0, 3).dropped(20.0)
    # a time exactly 20% longer is within the tolerance, as a rate exactly 20% lower is
    assert not SelfFigure("train/train_elapsed", "node", "s", 12.0, 10.0, 3).dropped(20.0)
    assert SelfFigure("train/train_elapsed", "node", "s", 12.01, 10.0, 3).dropped(20.0)
    path = _history(tmp_path, *[gpu_report("n1", [800.0, 800.0], hours=i) for i in range(3)])
    # three drops are named, worst first, without a count
    three = _compare(path, gpu_report("n1", [500.0, 600.0], hours=10, train_seconds=20.0))
    check = three.check(fail_on_drop=False)
    assert check.message.endswith(
        "run(s): train/train_elapsed on cpu +66.7% (20 vs 12 s), compute/matmul_bf16_tflops on "
        "gpu0 -37.5% (500 vs 800 TFLOPS), compute/matmul_bf16_tflops on gpu1 -25.0% (600 vs 800 "
        "TFLOPS)"
    )
    # the PASS and SKIP checks keep their area and table
    steady = _compare(path, gpu_report("n1", [800.0] * 2, hours=10)).check(fail_on_drop=False)
    assert (steady.area, len(steady.details["rows"])) == ("HISTORY", 3)
    first = _compare(_history(tmp_path / "empty"), gpu_report("n1", [800.0]))
    assert (first.run_ids, first.figures, first.drops, first.tolerance_percent) == ([], [], [], 20)
    assert first.check(fail_on_drop=False).area == "HISTORY"


def test_figures_without_a_direction_or_a_value_are_left_out_not_the_rest(
    tmp_path: Path,
) -> None:
    def with_extra(report: RunReport, extra: list[Measurement]) -> RunReport:
        compute = report.checks[0]
        measurements = [*extra, *compute.measurements]
        compute = compute.model_copy(update={"measurements": measurements})
        return rejudged(report, checks=[compute, *report.checks[1:]])

    temperature = Measurement(name="temperature", value=40.0, unit="C", device_index=0)
    path = _history(tmp_path, *[with_extra(r, [temperature]) for r in _past()])
    nan = Measurement(name="temperature", value=float("nan"), unit="TFLOPS", device_index=0)
    now = with_extra(gpu_report("n1", [500.0], hours=10), [temperature, nan])
    comparison = _compare(path, now)
    assert [f.metric for f in comparison.figures] == [
        "compute/matmul_bf16_tflops",
        "train/train_elapsed",
    ]
    assert len(comparison.drops) == 1


def test_the_cpu_twins_are_held_to_their_own_default(tmp_path: Path) -> None:
    past = [rejudged(r, device_mode="cpu") for r in _past()]
    path = _history(tmp_path, *past)
    now = rejudged(gpu_report("n1", [560.0], hours=10), device_mode="cpu")  # -30%
    comparison = _compare(path, now)
    assert comparison.tolerance_percent == 50.0
    assert comparison.drops == []


def test_a_stack_change_is_explained_in_full(tmp_path: Path) -> None:
    before = _past(extra_environment={"torch": {"version": "2.12.0"}})
    now = gpu_report("n1", [800.0], hours=10, extra_environment={"torch": {"version": "2.13.0"}})
    assert _compare(_history(tmp_path, *before), now).nothing_to_compare == (
        "no passing accept standard (GPU mode) run on n1 with this software stack and GPU "
        "models (3 on another: the stack changed; `gpuaccept history compare` shows the runs "
        "either side)"
    )


def test_hourly_quick_runs_never_push_the_standard_runs_out_of_reach(tmp_path: Path) -> None:
    """Issue #30 §4: the 50 newest runs were scanned before the level was filtered, so a Slurm
    health check's hourly quick runs left every standard run out of reach."""
    standard = _past(values=(800.0, 800.0, 800.0))
    quick = [
        gpu_report("n1", [900.0], hours=10 + i).model_copy(update={"level": "quick"})
        for i in range(60)
    ]
    path = _history(tmp_path, *standard, *quick)
    comparison = _compare(path, gpu_report("n1", [600.0], hours=100))
    assert comparison.nothing_to_compare is None
    [drop] = comparison.drops
    assert (drop.median, drop.runs) == (800.0, 3)


def test_runs_are_ordered_by_their_instant_not_their_text(tmp_path: Path) -> None:
    """A stamp with an offset names an instant: 10:00+05:00 is before 06:00+00:00."""
    early = gpu_report("n1", [800.0]).model_copy(update={"started_at": "2026-11-20T10:00:00+05:00"})
    late = gpu_report("n1", [500.0]).model_copy(update={"started_at": "2026-11-20T06:00:00+00:00"})
    path = _history(tmp_path, early, late)
    comparison = _compare(path, gpu_report("n1", [800.0], hours=500), comparable_runs=1)
    [figure] = [f for f in comparison.figures if f.unit == "TFLOPS"]
    assert figure.median == 500.0  # the later run, though its text sorts first


def test_a_slow_decline_is_held_against_the_nodes_first_runs(tmp_path: Path) -> None:
    """A node losing 2.6% a run for 20 runs ends 40% below its first run and within 8% of its
    rolling median: the rolling median alone passed it."""
    values = [1000.0 * 0.974**i for i in range(21)]
    path = _history(tmp_path, *[gpu_report("n1", [v], hours=i) for i, v in enumerate(values[:-1])])
    comparison = _compare(path, gpu_report("n1", [values[-1]], hours=30))
    [figure] = [f for f in comparison.figures if f.unit == "TFLOPS"]
    assert figure.change_percent > -10  # within the tolerance of the recent runs
    assert figure.baseline_change_percent is not None
    assert figure.baseline_change_percent < -35
    assert figure.baseline_runs == 5
    check = comparison.check(fail_on_drop=False)
    assert check.status is Status.WARN
    assert "against the node's first 5 comparable run(s)" in check.message
    assert "a slow decline" in check.message


def test_runs_dated_in_the_future_and_non_finite_figures_are_never_the_past(
    tmp_path: Path,
) -> None:
    future = [gpu_report("n1", [100.0], hours=24 * 365 * 73 + i) for i in range(5)]  # 2099
    broken = [gpu_report("n1", [float("nan")], hours=1)]  # a failed measurement
    path = _history(tmp_path, *_past(), *future, *broken)
    comparison = _compare(path, gpu_report("n1", [600.0], hours=10))
    [drop] = comparison.drops
    assert drop.median == 800.0  # not the 2099 runs' 100, nor a NaN median


def test_failing_runs_never_push_the_passing_ones_out_and_a_run_a_minute_old_counts(
    tmp_path: Path,
) -> None:
    """The scan reads the passing runs only (60 failing runs newer than them fill no window),
    and a run that started a minute ago is the past, not the future."""
    from datetime import UTC, datetime, timedelta

    failing = [gpu_report("n1", [100.0], hours=10 + i, passed=False) for i in range(60)]
    moments_ago = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    recent = gpu_report("n1", [700.0]).model_copy(update={"started_at": moments_ago})
    path = _history(tmp_path, *_past(), *failing, recent)
    comparison = _compare(path, gpu_report("n1", [600.0], hours=100), comparable_runs=1)
    [figure] = [f for f in comparison.figures if f.unit == "TFLOPS"]
    assert figure.median == 700.0  # the run of a minute ago, the newest passing one


def test_a_figure_the_first_runs_never_had_is_held_to_the_recent_ones_only(
    tmp_path: Path,
) -> None:
    later = [gpu_report("n1", [800.0, 790.0], hours=10 + i) for i in range(5)]
    # the same node and stack, whose first runs measured gpu0 only
    early = [
        gpu_report("n1", [800.0], hours=i).model_copy(update={"environment": later[0].environment})
        for i in range(5)
    ]
    path = _history(tmp_path, *early, *later)
    comparison = _compare(path, gpu_report("n1", [800.0, 780.0], hours=30))
    gpu1 = next(f for f in comparison.figures if f.unit == "TFLOPS" and f.device == "gpu1")
    assert (gpu1.baseline, gpu1.baseline_runs, gpu1.median) == (None, 0, 790.0)


def test_a_median_of_zero_is_no_change() -> None:
    from gpuaccept.compare.self_comparison import SelfFigure

    figure = SelfFigure("m", "gpu0", "TFLOPS", 5.0, 0.0, 3, baseline=0.0, baseline_runs=3)
    assert (figure.change_percent, figure.baseline_change_percent) == (0.0, 0.0)
    assert not figure.dropped(20.0)


def test_a_changed_training_runs_loss_is_held_to_no_past_and_no_past_to_it(
    tmp_path: Path,
) -> None:
    """`train llm --steps 30` after 500-step runs warned 'llm_final_loss +112.7% (3.369 vs
    1.584 nats)': a loss whose convergence the workload did not judge is no figure of the node."""

    def with_loss(report: RunReport, loss: float, judged: bool) -> RunReport:
        workload = CheckResult(
            name="workload",
            area="WORKLOAD",
            status=Status.PASS,
            message="ok",
            duration_seconds=9.5,
            measurements=[Measurement(name="llm_final_loss", value=loss, unit="nats")],
            details={"convergence_judged": judged},
        )
        return rejudged(report, checks=[*report.checks, workload])

    path = _history(tmp_path, *[with_loss(r, 1.584, True) for r in _past()])
    short = with_loss(gpu_report("n1", [800.0], hours=10), 3.369, False)
    comparison = _compare(path, short)
    assert "workload/llm_final_loss" not in [f.metric for f in comparison.figures]
    assert comparison.drops == []
    # a run of the preset's schedule is still held to its past loss
    worse = with_loss(gpu_report("n1", [800.0], hours=10), 3.369, True)
    [drop] = _compare(path, worse).drops
    assert drop.metric == "workload/llm_final_loss"
    # and a changed run in the past is no yardstick for it
    path = _history(tmp_path / "b", *[with_loss(r, 9.0, False) for r in _past()])
    assert "workload/llm_final_loss" not in [f.metric for f in _compare(path, worse).figures]
