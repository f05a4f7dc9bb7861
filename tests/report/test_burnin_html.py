"""A burn-in report on the HTML page: one chart per stressor and per load figure, the windows
that found something listed, and a series a hand-edited report damaged still drawn."""

from __future__ import annotations

from gpuaccept.burnin.checks import burnin_checks
from gpuaccept.burnin.plan import BurnInPlan, BurnInProgress, WindowFigures
from gpuaccept.report.charts import series_chart_png
from gpuaccept.report.html import render_html
from tests.run_reports import T0, judged_report

PLAN = BurnInPlan.build(4 * 3600, 3600, 2, ["gemm-bf16", "hbm"])


def _report(series_update: object = None) -> object:
    progress = BurnInProgress(plan=PLAN.fingerprint(), devices=["gpu0", "gpu1"])
    for window, stressor in enumerate(["gemm-bf16", "hbm", "gemm-bf16", "hbm"]):
        progress.record(
            WindowFigures(
                window=window,
                stressor=stressor,
                seconds=3600,
                unit="TFLOPS" if stressor == "gemm-bf16" else "GB/s",
                throughput={"gpu0": 700.0, "gpu1": 690.0},
                load={"gpu0": {"power_p90_w": 690.0, "temperature_max_c": 71.0}},
                hardware=["window 3 (gemm-bf16): gpu1: hardware slowdown"] if window == 2 else [],
            )
        )
    checks = burnin_checks(progress, PLAN, device_mode="cuda", straggler_tolerance_percent=10)
    if series_update is not None:
        details = {**checks[2].details, "series": series_update}
        checks[2] = checks[2].model_copy(update={"details": details})
    return judged_report(
        command="burnin",
        level="4h",
        device_mode="cuda",
        started_at=T0.isoformat(),
        finished_at=T0.isoformat(),
        duration_seconds=14400.0,
        checks=checks,
        environment={"system": {"hostname": "gpu017"}},
    )


def test_a_burn_in_is_drawn_per_stressor_and_load_figure_with_its_findings_listed() -> None:
    page = render_html(_report(), {})  # type: ignore[arg-type]
    for title in (
        "burn-in gemm-bf16 throughput per device",
        "burn-in hbm throughput per device",
        "burn-in power (90th percentile of the window) per device",
        "burn-in temperature (window maximum) per device",
    ):
        assert f'alt="{title}"' in page
    assert "SM clock" not in page  # no window measured it: no empty chart
    assert "window 3 (gemm-bf16): gpu1: hardware slowdown" in page
    assert '"series"' not in page  # drawn, not dumped as a table of numbers


def test_a_damaged_series_is_drawn_from_what_is_left() -> None:
    damaged = [
        {"window": 0, "stressor": "hbm", "throughput": {"gpu0": "fast"}, "seconds": "x"},
        {
            "window": "one",
            "stressor": "hbm",
            "start_seconds": 0,
            "seconds": 60,
            "throughput": {"gpu0": 1.0},
            "events": ["XID 79"],
        },
        "not a window",
    ]
    page = render_html(_report([damaged[0], damaged[1]]), {})  # type: ignore[arg-type]
    assert 'alt="burn-in hbm throughput per device"' in page
    assert "XID 79" in page
    assert series_chart_png("empty", "GB/s", {}).startswith(b"\x89PNG")
    assert series_chart_png("zeros", "GB/s", {"gpu0": [(0.5, 0.0)]}).startswith(b"\x89PNG")
