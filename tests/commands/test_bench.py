"""`bench` called as a library (gpuaccept.commands.bench.*), without Typer, on the CPU with tiny
sweeps: a table's rows and the verdict, --json and --csv written, a progress callback advanced
once per step, an interruption written as INTERRUPTED with 128 + the signal, and bad requests
refused in one line before anything is measured."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gpuaccept.commands.bench import collectives, every, matmul, membw, nbody
from gpuaccept.commands.bench.common import BenchRequest
from gpuaccept.commands.output import Collected
from gpuaccept.errors import InputError, Interrupted
from gpuaccept.results import RunReport, Status


def test_matmul_says_its_table_and_writes_the_json(tmp_path: Path) -> None:
    out = Collected()
    result = matmul.run(
        matmul.MatmulRequest(
            device="cpu",
            dtypes=("fp32",),
            m="64",
            n="64",
            k="32,64",
            warmup=0,
            iterations=1,
            json_path=tmp_path / "m.json",
            no_history=True,
        ),
        out,
    )
    assert result.exit_code == 0
    assert result.report is not None
    [check] = result.report.checks
    assert (check.name, check.status) == ("matmul", Status.PASS)
    assert [(row["m"], row["k"]) for row in check.details["rows"]] == [(64, 32), (64, 64)]
    text = out.text()
    assert "[BENCH] matmul fp32: 2 shape(s), 0 warm-up + 1 timed each" in text
    assert "median TFLOPS" in text  # the table
    assert f"[REPORT] {tmp_path / 'm.json'}" in text
    assert text.rstrip().splitlines()[-1].startswith("[RESULT] SUCCESS")
    written = RunReport.model_validate_json((tmp_path / "m.json").read_text())
    assert (written.command, written.level) == ("bench", "matmul")
    assert written.checks[0].details["rows"] == check.details["rows"]
    assert out.text("err") == ""


def test_membw_writes_a_csv_row_per_kernel_and_size_and_advances_once_a_step(
    tmp_path: Path,
) -> None:
    steps: list[tuple[int, str]] = []
    advanced = [0]

    @contextmanager
    def progress(total: int, label: str) -> Iterator[Callable[[], None]]:
        steps.append((total, label))

        def advance() -> None:
            advanced[0] += 1

        yield advance

    out = Collected()
    result = membw.run(
        membw.MembwRequest(
            device="cpu",
            begin="1K",
            end="2K",
            factor=2,
            warmup=0,
            iterations=1,
            csv_path=tmp_path / "m.csv",
            history=str(tmp_path / "h.sqlite"),
        ),
        out,
        progress,
    )
    assert result.exit_code == 0
    assert steps == [(8, "membw: STREAM copy/scale/add/triad, arrays of 1 KiB..2 KiB")]
    assert advanced == [8]
    with (tmp_path / "m.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [(row["kernel"], row["array_bytes"]) for row in rows] == [
        (kernel, size) for size in ("1024", "2048") for kernel in ("copy", "scale", "add", "triad")
    ]
    text = out.text()
    assert f"[REPORT] {tmp_path / 'm.csv'}" in text
    assert "[HISTORY] run 1 recorded in" in text


def test_nbody_measures_its_bodies_within_the_error_bound(tmp_path: Path) -> None:
    out = Collected()
    result = nbody.run(
        nbody.NbodyRequest(
            device="cpu", bodies="16,32", kernel="torch", warmup=0, iterations=1, no_history=True
        ),
        out,
    )
    assert result.exit_code == 0
    assert result.report is not None
    [check] = result.report.checks
    assert [row["bodies"] for row in check.details["rows"]] == [16, 32]
    assert all(row["max_relative_error"] < 1e-4 for row in check.details["rows"])
    assert "[BENCH] nbody fp32: 16, 32 bodies, kernel torch-tiled" in out.text()


def test_an_interruption_is_written_as_interrupted_with_the_signals_exit_code(
    tmp_path: Path,
) -> None:
    @contextmanager
    def progress(total: int, label: str) -> Iterator[Callable[[], None]]:
        def advance() -> None:
            raise Interrupted(15)  # SIGTERM arriving during the sweep's first step

        yield advance

    out = Collected()
    result = membw.run(
        membw.MembwRequest(
            device="cpu",
            begin="1K",
            end="1K",
            warmup=0,
            iterations=1,
            json_path=tmp_path / "m.json",
            no_history=True,
        ),
        out,
        progress,
    )
    assert result.exit_code == 143
    assert "[BENCH] interrupted by SIGTERM: stopped, writing what finished" in out.text()
    assert (
        out.text()
        .rstrip()
        .endswith("[RESULT] INTERRUPTED by SIGTERM during membw; no verdict on the rest")
    )
    written = RunReport.model_validate_json((tmp_path / "m.json").read_text())
    assert written.checks[0].status == Status.ERROR


@pytest.mark.parametrize(
    ("run", "fragment"),
    [
        (
            lambda out: matmul.run(matmul.MatmulRequest(device="cpu", preset="huge"), out),
            "--preset must be quick or full (got 'huge')",
        ),
        (
            lambda out: matmul.run(matmul.MatmulRequest(device="cpu", m="0"), out),
            "--m '0'",
        ),
        (
            lambda out: membw.run(membw.MembwRequest(device="cpu", begin="1M", end="1K"), out),
            "below the begin size",
        ),
        (
            lambda out: nbody.run(nbody.NbodyRequest(device="cpu", bodies="1"), out),
            "--bodies: n-body needs at least 2 bodies",
        ),
        (
            lambda out: collectives.run(
                collectives.CollectivesRequest(device="cpu", ranks=0, no_history=True), out
            ),
            "--ranks must be at least 1 (got 0)",
        ),
        (
            lambda out: collectives.run(
                collectives.CollectivesRequest(device="cpu", ops=("all_to_one",), no_history=True),
                out,
            ),
            "--op 'all_to_one': choose from",
        ),
    ],
)
def test_a_bad_request_is_refused_in_one_line_before_anything_runs(
    run: Callable[[Collected], object], fragment: str
) -> None:
    out = Collected()
    with pytest.raises(InputError) as refused:
        run(out)
    assert fragment in str(refused.value)
    assert "\n" not in str(refused.value)
    assert not any(text.startswith("[BENCH]") for _, text in out.lines)


def test_outputs_that_collide_are_refused_before_anything_runs(tmp_path: Path) -> None:
    same = tmp_path / "r.json"
    out = Collected()
    with pytest.raises(InputError, match="--json"):
        every.run(BenchRequest(device="cpu", json_path=same, csv_path=same, no_history=True), out)
    assert out.lines == []
    assert not same.exists()


def test_single_process_benchmarks_refuse_torchrun(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(InputError, match="only `gpuaccept bench collectives` runs under torchrun"):
        matmul.run(matmul.MatmulRequest(device="cpu", no_history=True), Collected())
