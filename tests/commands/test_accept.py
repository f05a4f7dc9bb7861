"""`accept` called as a library (`gpuaccept.commands.accept.run`), without Typer: a quick run on
the CPU twins is judged and written, a failing one gives exit 1 and the failure's action, and
bad requests are refused in one line before any work."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from gpuaccept.commands.accept import AcceptRequest, run
from gpuaccept.commands.output import Collected
from gpuaccept.errors import InputError
from gpuaccept.results import RunReport


def quick(**changes: Any) -> AcceptRequest:
    """The CPU twins of two checks that judge no timing (seconds, whatever else the machine
    runs), not recorded, with `changes` over it."""
    request = AcceptRequest(
        level="quick", only=["inventory", "stack"], device="cpu", no_history=True
    )
    return dataclasses.replace(request, **changes)


def test_a_quick_run_passes_and_writes_its_report(tmp_path: Path) -> None:
    reports = tmp_path / "reports"  # created by the run, as --report-dir is
    out = Collected()
    written: list[RunReport] = []
    result = run(quick(report_dir=reports), out, written)
    said = out.text()
    assert result.exit_code == 0, said + out.text("err")
    assert result.report is not None
    assert result.report.verdict.outcome == "pass"
    assert [check.name for check in result.report.checks] == ["inventory", "stack"]
    # the report handed over as soon as it was complete (--json prints it) is the one returned
    assert written == [result.report]
    # the file the [REPORT] line names holds the verdict returned
    [path] = reports.iterdir()
    assert f"[REPORT] {path}\n" in said
    assert json.loads(path.read_text())["verdict"]["outcome"] == "pass"
    [summary] = [text for kind, text in out.lines if kind == "summary"]
    assert "| INVENTORY | inventory | pass" in summary
    assert "[ACTION] none: nothing to do\n" in said
    assert said.splitlines()[-1].startswith("[RESULT] SUCCESS in CPU mode"), said
    assert "[HISTORY]" not in said  # --no-history: neither compared nor recorded
    assert out.text("err") == ""


def test_a_failed_check_gives_exit_1_and_its_action(tmp_path: Path) -> None:
    out = Collected()
    request = quick(expect_gpus=64)
    result = run(request, out)
    said = out.text()
    assert result.exit_code == 1, said
    assert result.report is not None
    assert result.report.verdict.outcome == "fail"
    assert "expected 64 GPU(s) (--expect-gpus)" in said
    assert "[ACTION] reboot-node: the node's action" in said
    assert said.splitlines()[-1] == "[RESULT] FAILURE: inventory"


def test_the_history_compares_and_records_the_run(tmp_path: Path) -> None:
    history = tmp_path / "history.sqlite"
    out = Collected()
    request = quick(no_history=False, history=str(history))
    result = run(request, out)
    assert result.exit_code == 0, out.text()
    assert f"[HISTORY] run 1 recorded in {history}\n" in out.text()
    assert history.is_file()


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        (
            {"pairwise": True},
            "--pairwise compares nodes: run accept under torchrun or srun across nodes "
            "(slurm/accept-multinode.sbatch, k8s/multinode-indexed-job.yaml)",
        ),
        (
            {"rails": True},
            "--rails runs one GPU of every node per rail: run accept under torchrun or srun "
            "across nodes (slurm/accept-multinode.sbatch, k8s/multinode-indexed-job.yaml)",
        ),
        ({"rails_tolerance": 5.0}, "--rails-tolerance judges --rails: give both, or neither"),
        ({"topology": Path("topo.conf")}, "--topology guides --isolate: give both, or neither"),
        (
            {"isolate": True, "min_busbw": 100.0},
            "--isolate finds the bad nodes of a multi-node job: run accept under torchrun or "
            "srun across nodes (slurm/accept-multinode.sbatch)",
        ),
        (
            {"drop_tolerance": 0.0},
            "--drop-tolerance 0: give a percentage above 0 and at most 1000",
        ),
    ],
)
def test_a_bad_request_is_refused_in_one_line_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changes: dict[str, object], says: str
) -> None:
    for launcher in ("WORLD_SIZE", "SLURM_NTASKS"):  # one node, whatever runs the tests
        monkeypatch.delenv(launcher, raising=False)
    reports = tmp_path / "reports"
    out = Collected()
    request = quick(**changes, report_dir=reports)
    with pytest.raises(InputError) as refused:
        run(request, out)
    assert str(refused.value) == says
    assert out.lines == []  # refused before a line was said or a file written
    assert not reports.exists()


@pytest.mark.parametrize(
    ("values", "line"),
    [
        ({"check_timeout": 0.0}, "--check-timeout 0: give at least 1"),
        ({"check_timeout": -1.0}, "--check-timeout -1: give at least 1"),
        ({"check_timeout": float("nan")}, "--check-timeout: must be a finite number (got nan)"),
        ({"expect_gpus": -3}, "--expect-gpus -3: give at least 0"),
        ({"dcgm": 5}, "--dcgm 5: give 0 to 4"),
        ({"baseline_runs": 0}, "--baseline-runs 0: give at least 1"),
        ({"min_busbw": float("inf")}, "--min-busbw: must be a finite number (got inf)"),
        ({"rails_tolerance": 100.0}, "--rails-tolerance 100: give 0 to 99"),
        ({"expect_nics": "8"}, "--expect-nics: a number, not '8'"),
        ({"only": "inventory"}, "--only: give a list of check names, not one string"),
    ],
)
def test_a_request_holds_the_options_bounds_for_a_caller_without_typer(
    values: dict[str, object], line: str
) -> None:
    """The parser bounds each option for the CLI; a library caller gets the same bounds from the
    request itself, each refused in one line (a timeout of 0 or NaN was taken, or used the
    level's default without a word; -3 GPUs passed)."""
    with pytest.raises(InputError) as refused:
        AcceptRequest(device="cpu", no_history=True, **values)  # type: ignore[arg-type]
    assert str(refused.value) == line


def test_a_request_takes_paths_as_text(tmp_path: Path) -> None:
    request = AcceptRequest(device="cpu", report_dir=str(tmp_path))  # type: ignore[arg-type]
    assert request.report_dir == tmp_path


@pytest.mark.parametrize(
    ("values", "line"),
    [
        (
            {"no_history": True, "history": "h.sqlite"},
            "--history and --no-history: give one or the other",
        ),
        (
            {"no_history": True, "fail_on_drop": True},
            "--fail-on-drop holds the run against this node's history: not with --no-history",
        ),
        (
            {"no_history": True, "drop_tolerance": 30.0},
            "--drop-tolerance holds the run against this node's history: not with --no-history",
        ),
        (
            {"no_history": True, "dcgm": 2},
            "--dcgm 2 runs DCGM's diagnostics on the GPUs: not with --device cpu",
        ),
    ],
)
def test_options_that_contradict_each_other_are_refused(
    values: dict[str, object], line: str, tmp_path: Path
) -> None:
    """Each was taken in silence (the operator review of issue #51): the history option or the
    drop rule ignored, DCGM never run and never mentioned."""
    out = Collected()
    with pytest.raises(InputError) as refused:
        run(AcceptRequest(level="quick", device="cpu", **values), out)  # type: ignore[arg-type]
    assert str(refused.value) == line
    assert out.lines == []


def test_a_signal_wrapped_by_an_import_while_planning_still_leaves_the_interrupted_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM inside a pydantic class being imported during planning came out as a RuntimeError:
    the run ended with a traceback, exit 1 and no report (seen once in the everyday suite)."""
    import signal

    from gpuaccept.commands.accept import command
    from gpuaccept.errors import Interrupted

    def planning(*_: object) -> None:
        raise RuntimeError("Error calling __set_name__") from Interrupted(signal.SIGTERM)

    monkeypatch.setattr(command, "plan_accept", planning)
    request = AcceptRequest(device="cpu", no_history=True, report_dir=tmp_path)
    with pytest.raises(Interrupted) as stopped:
        command.run(request, Collected())
    assert stopped.value.exit_code == 143
    (report,) = tmp_path.glob("*.json")
    assert '"interrupted"' in report.read_text()
