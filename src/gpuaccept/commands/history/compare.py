"""`history compare`: every figure of two runs side by side, with the change (B against A)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from gpuaccept.commands.history.common import AS_JSON, HISTORY, opened, run_id, write_table
from gpuaccept.commands.options import arg

if TYPE_CHECKING:
    from gpuaccept.commands.output import Output
    from gpuaccept.compare.comparison import ComparedFigure


@dataclass(frozen=True, kw_only=True)
class CompareRequest:
    # the earlier (reference) run id, as typed (common.run_id)
    run_a: Annotated[str, arg("The earlier (reference) run id.")]
    run_b: Annotated[str, arg("The run to compare with it.")]
    history: Annotated[str | None, HISTORY] = None
    as_json: Annotated[bool, AS_JSON] = False


@dataclass(frozen=True)
class CompareResult:
    figures: list[ComparedFigure]
    judged: bool  # both runs of one command, level and mode: a change may be called worse
    exit_code: int = 0


def run(request: CompareRequest, out: Output) -> CompareResult:
    from gpuaccept.compare.comparison import compare_reports
    from gpuaccept.naming import run_title

    run_a, run_b = request.run_a, request.run_b
    with opened(request.history) as store:
        a, b = store.report(run_id(run_a)), store.report(run_id(run_b))
    # Levels and modes size the work differently (a quick matmul is not a standard one): such
    # runs are shown side by side, but no change is called worse.
    alike = (a.command, a.level, a.device_mode) == (b.command, b.level, b.device_mode)
    figures = compare_reports(a, b)
    result = CompareResult(figures, alike)
    if request.as_json:
        out.line(json.dumps(_as_json(result, int(run_a), int(run_b)), indent=2))
        return result
    if not alike:
        out.line(
            f"[WARN] run {run_a} is `{run_title(a)}`, run {run_b} is `{run_title(b)}`: they "
            "measure different sizes, so the changes below are not judged"
        )
    if not figures:
        out.line(f"runs {run_a} and {run_b} have no figures")
        return result
    header = ["metric", "device", f"run {run_a}", f"run {run_b}", "unit", "change", "verdict"]
    write_table(out, header, [_row(figure, alike) for figure in figures])
    return result


def _row(figure: ComparedFigure, judged: bool) -> list[str]:
    from gpuaccept.naming import format_number

    change = figure.change_percent
    return [
        figure.metric,
        figure.device,
        format_number(figure.value_a),
        format_number(figure.value_b),
        figure.unit,
        "n/a" if change is None else f"{change:+.1f}%",
        ("worse" if figure.worse else "ok") if judged else "not judged",
    ]


def _as_json(result: CompareResult, run_a: int, run_b: int) -> dict[str, object]:
    return {
        "runs": [run_a, run_b],
        "judged": result.judged,
        "figures": [
            {
                "metric": f.metric,
                "device": f.device,
                "unit": f.unit,
                "value_a": f.value_a,
                "value_b": f.value_b,
                "change_percent": f.change_percent,
                "worse": f.worse if result.judged else None,
            }
            for f in result.figures
        ],
    }
