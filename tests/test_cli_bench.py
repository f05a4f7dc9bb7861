"""`gpuaccept bench` end to end on CPU: tables, --json (results model), --csv, and bad arguments."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.measure.collectives import BUS_FACTORS
from gpuaccept.results import RunReport, Status


def bench(*args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "WORLD_SIZE"} | (extra_env or {})
    return subprocess.run(
        [sys.executable, "-m", "gpuaccept", "bench", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
    )


def _report(path: Path) -> RunReport:
    return RunReport.model_validate_json(path.read_text())


def test_matmul_sweep_writes_json_and_csv(tmp_path: Path) -> None:
    run = bench(
        "matmul",
        "--device",
        "cpu",
        "--m",
        "64",
        "--n",
        "64",
        "--k",
        "32,64",
        "--dtype",
        "fp32",
        "--dtype",
        "fp64",
        "-w",
        "1",
        "-n",
        "2",
        "--json",
        str(tmp_path / "m.json"),
        "--csv",
        str(tmp_path / "m.csv"),
    )
    assert run.returncode == 0, run.stderr
    assert "median TFLOPS" in run.stdout
    check, _history = _report(tmp_path / "m.json").checks
    assert check.name == "matmul"
    assert len(check.details["rows"]) == 4
    assert {m.name for m in check.measurements} == {"matmul_fp32_tflops", "matmul_fp64_tflops"}
    with (tmp_path / "m.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["dtype"], r["k"]) for r in rows] == [
        ("fp32", "32"),
        ("fp32", "64"),
        ("fp64", "32"),
        ("fp64", "64"),
    ]


def test_collectives_table_is_nccl_tests_shaped(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    run = bench(
        "collectives",
        "--device",
        "cpu",
        "-b",
        "8",
        "-e",
        "4K",
        "-f",
        "8",
        "-w",
        "1",
        "-n",
        "2",
        "--json",
        str(out),
    )
    assert run.returncode == 0, run.stderr
    headers = [line.split() for line in run.stdout.splitlines() if "size (B)" in line]
    # one table per collective; all_reduce and broadcast run in place only, all_to_all out of
    # place only (as nccl-tests): no n/a columns
    assert len(headers) == 5
    in_place = ["collective", "size", "(B)", "count", "ip", "us", "ip", "algbw", "ip", "busbw"]
    in_place += ["ip", "#wrong"]
    assert headers[0] == headers[3] == in_place
    assert headers[1][:8] == ["collective", "size", "(B)", "count", "oop", "us", "oop", "algbw"]
    out_of_place = [*in_place[:4], *(w.replace("ip", "oop") for w in in_place[4:])]
    assert headers[4] == out_of_place
    assert all(len(" ".join(h)) < 120 for h in headers)
    assert "n/a" not in run.stdout
    check, _history = _report(out).checks
    assert check.details["world_size"] == 2
    assert check.details["backend"] == "gloo"
    rows = check.details["rows"]
    assert {r["collective"] for r in rows} == set(BUS_FACTORS)
    for row in rows:
        variant = "oop" if row["collective"] == "all_to_all" else "ip"  # its only variant
        assert row[f"{variant}_wrong"] == 0
        assert row[f"{variant}_busbw_gbps"] == pytest.approx(
            row[f"{variant}_algbw_gbps"] * BUS_FACTORS[row["collective"]](2)
        )


def test_min_busbw_fails_the_run(tmp_path: Path) -> None:
    run = bench(
        "collectives",
        "--device",
        "cpu",
        "--op",
        "all_reduce",
        "-b",
        "1K",
        "-e",
        "1K",
        "-w",
        "0",
        "-n",
        "1",
        "--min-busbw",
        "1000000",
        "--json",
        str(tmp_path / "c.json"),
    )
    assert run.returncode == 1
    assert "below 0.9 x --min-busbw" in run.stdout
    assert "[RESULT] FAILURE: collectives" in run.stdout
    assert _report(tmp_path / "c.json").checks[0].status == Status.FAIL


def test_every_benchmark_runs_by_default(tmp_path: Path) -> None:
    run = bench("--device", "cpu", "--json", str(tmp_path / "all.json"))
    assert run.returncode == 0, run.stderr
    report = _report(tmp_path / "all.json")
    assert [c.name for c in report.checks] == [
        "matmul",
        "membw",
        "transfer",
        "collectives",
        "nbody",
        "history",
    ]
    assert all(c.status == Status.PASS for c in report.checks[:-1])
    assert report.checks[-1].status == Status.SKIP  # a first run: nothing to compare with
    assert report.environment["python"]["version"]
    nbody = report.checks[-2]
    assert all(r["max_relative_error"] < 1e-4 for r in nbody.details["rows"])


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["membw", "-b", "-8"], "-b/--begin '-8'"),
        (["membw", "-b", "1M", "-e", "1K"], "below the begin size"),
        (["transfer", "-b", "1K", "-e", "1M", "-f", "1"], "-f must be at least 2"),
        (["matmul", "--dtype", "fp7"], "unknown dtype 'fp7'"),
        (["matmul", "--dtype", "tf32"], "--dtype tf32 cannot run on cpu"),
        (["matmul", "--m", "0"], "--m '0'"),
        (["matmul", "--preset", "huge"], "--preset must be quick or full"),
        (["collectives", "--op", "all_to_one"], "--op 'all_to_one'"),
        (["collectives", "--ranks", "0"], "--ranks must be at least 1"),
        (["nbody", "--bodies", "1"], "at least 2 bodies"),
        (["nbody", "--dtype", "bf16"], "fp32 or fp64"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(args: list[str], fragment: str) -> None:
    # in this process (the argument checks need no fresh interpreter, and 11 of them would
    # cost 25 s of start-up); the error edge is the same root group as the console script's
    from typer.testing import CliRunner

    from gpuaccept.cli import app

    result = CliRunner().invoke(app, ["bench", *args[:1], "--device", "cpu", *args[1:]])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"gpuaccept bench {args[0]}: error: ")
    assert fragment in lines[0]
    assert "[BENCH]" not in result.stdout  # refused before anything ran


def test_single_device_benchmarks_refuse_torchrun() -> None:
    run = bench("matmul", "--device", "cpu", extra_env={"WORLD_SIZE": "2"})
    assert run.returncode == 2
    assert "only `gpuaccept bench collectives` runs under torchrun" in run.stderr


def test_collectives_under_torchrun(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "gpuaccept",
            "bench",
            "collectives",
            "--device",
            "cpu",
            "--op",
            "all_reduce",
            "-b",
            "1K",
            "-e",
            "4K",
            "-f",
            "4",
            "-w",
            "1",
            "-n",
            "2",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.count("[RESULT] SUCCESS") == 1  # rank 0 alone reports
    check, _history = _report(out).checks
    assert check.details["world_size"] == 2
    assert all(row["ip_wrong"] == 0 for row in check.details["rows"])


@pytest.mark.parametrize("option", [["--device", "cuda"], ["--no-history"], ["--json", "x.json"]])
def test_an_option_of_bench_before_a_benchmarks_name_is_refused(option: list[str]) -> None:
    """`bench --device cuda matmul` ran matmul on the CPU with its own defaults and exited 0
    (the operator review of issue #51): the option went to `bench`, not to matmul."""
    done = CliRunner().invoke(app, ["bench", *option, "matmul", "--m", "8"])
    assert done.exit_code == 2
    assert done.stderr.splitlines() == [
        f"gpuaccept bench: error: {option[0]} before 'matmul' is `bench`'s own (for every "
        f"benchmark at once); for matmul put it after the name: gpuaccept bench matmul "
        f"{option[0]} ..."
    ]
