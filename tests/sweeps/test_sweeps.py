"""`gpuaccept bench` sweeps on CPU: sizes, collectives (2 gloo ranks), n-body, matmul, tables."""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from typing import Any

import pytest
import torch

from gpuaccept.distributed.local_ranks import run_ranks
from gpuaccept.errors import InputError
from gpuaccept.measure import collectives as coll
from gpuaccept.measure.matmul import matmul_sweep
from gpuaccept.measure.nbody import (
    FLOPS_PER_INTERACTION,
    accelerations,
    initial_bodies,
    measure_nbody,
    nbody_max_relative_error,
)
from gpuaccept.report.tables import render_csv, render_table
from gpuaccept.results import Status
from gpuaccept.sweeps.collectives import CollectiveRun, collectives_result
from gpuaccept.sweeps.matmul import run_matmul
from gpuaccept.sweeps.sizes import int_range, parse_size, size_sweep
from tests.run_reports import judged_report

CPU = torch.device("cpu")


@pytest.mark.parametrize(
    ("text", "value"),
    [("8", 8), ("64K", 65536), ("256M", 256 * 2**20), ("1G", 2**30), ("4kb", 4096)],
)
def test_sizes_read_like_nccl_tests(text: str, value: int) -> None:
    assert parse_size(text, "-b") == value


@pytest.mark.parametrize("text", ["-8", "0", "abc", "1T", ""])
def test_bad_sizes_are_input_errors(text: str) -> None:
    with pytest.raises(InputError, match="-b"):
        parse_size(text, "-b")


def test_size_sweep() -> None:
    assert size_sweep(8, 128, 2) == [8, 16, 32, 64, 128]
    assert size_sweep(8, 100, 4) == [8, 32]
    assert size_sweep(64, 64, 1) == [64]
    with pytest.raises(InputError, match="below the begin"):
        size_sweep(1024, 8, 2)
    with pytest.raises(InputError, match="at least 2"):
        size_sweep(8, 1024, 1)


def test_shape_ranges() -> None:
    assert int_range("1024:4096:1024", "--m") == [1024, 2048, 3072, 4096]
    assert int_range("64,128", "--m") == [64, 128]
    for bad in ("0", "4096:1024:1024", "1:8:0", "x"):
        with pytest.raises(InputError, match="--m"):
            int_range(bad, "--m")


def _sweep_rank(rank: int, world: int, spec: coll.SweepSpec) -> list[coll.CollectiveRow]:
    return coll.collective_sweep_rank(rank, world, spec)


@pytest.fixture(scope="module")
def sweeps() -> dict[str, list[coll.CollectiveRow]]:
    return {
        op: run_ranks(_sweep_rank, 2, coll.SweepSpec(op, (8, 1024, 65536), 1, 3), 240, "gloo")[0]
        for op in coll.COLLECTIVES
    }


@pytest.mark.parametrize("op", coll.COLLECTIVES)
def test_collective_sweep_is_exact_and_follows_nccl_tests(
    sweeps: dict[str, list[coll.CollectiveRow]], op: str
) -> None:
    rows = sweeps[op]
    assert [row.nbytes for row in rows] == [8, 1024, 65536]
    for row in rows:
        assert row.count * 4 == row.nbytes
        if op == "all_to_all":  # out of place only, as nccl-tests (src/alltoall.cu:43-44)
            assert (row.in_place_seconds, row.in_place_wrong) == (None, None)
            assert row.out_of_place_wrong == 0
            seconds = row.out_of_place_seconds
            assert seconds is not None
            assert row.busbw_gbps(seconds) == pytest.approx(row.algbw_gbps(seconds) * 0.5)
            continue
        assert row.in_place_wrong == 0
        in_place = row.in_place_seconds
        assert in_place is not None
        assert row.busbw_gbps(in_place) == pytest.approx(
            row.algbw_gbps(in_place) * coll.BUS_FACTORS[op](2)
        )
        assert row.algbw_gbps(in_place) == pytest.approx(row.nbytes / in_place / 1e9)
        if op in ("all_gather", "reduce_scatter"):
            assert row.out_of_place_wrong == 0
            assert row.out_of_place_seconds is not None
        else:  # torch offers these in place only
            assert row.out_of_place_seconds is None
            assert row.busbw_gbps(row.out_of_place_seconds) is None


def _corrupting_rank(rank: int, world: int, spec: coll.SweepSpec) -> list[coll.CollectiveRow]:
    real = coll._all_gather

    def faulty(output: torch.Tensor, source: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        done = real(output, source, *args, **kwargs)
        if rank == 1:
            output[0] += 1  # a flipped result on one rank, as a bad link or GPU would give
        return done

    coll._all_gather = faulty
    return coll.collective_sweep_rank(rank, world, spec)


def test_a_wrong_result_is_counted_and_fails_the_benchmark() -> None:
    spec = coll.SweepSpec("all_gather", (1024,), 0, 1)
    rows = run_ranks(_corrupting_rank, 2, spec, 120, "gloo")[0]
    assert rows[0].in_place_wrong == 1
    assert rows[0].out_of_place_wrong == 1
    result = collectives_result(CollectiveRun({"all_gather": rows}, 2, "gloo"), None, 0.0)
    assert result.status == Status.FAIL
    assert "2 wrong element(s)" in result.message


def test_min_busbw_fails_like_nccl_tests_min_bw(
    sweeps: dict[str, list[coll.CollectiveRow]],
) -> None:
    run = CollectiveRun({"all_reduce": sweeps["all_reduce"]}, 2, "gloo")
    average = coll.average_busbw_gbps(sweeps["all_reduce"])
    assert collectives_result(run, average * 0.5, 0.0).status == Status.PASS
    # within 10% of the floor passes, as NCCL_TESTS_MIN_BW allows
    assert collectives_result(run, average / 0.91, 0.0).status == Status.PASS
    failed = collectives_result(run, average / 0.89, 0.0)
    assert failed.status == Status.FAIL
    assert "below 0.9 x --min-busbw" in failed.message


def test_one_rank_records_no_bus_bandwidth_where_nccl_tests_factor_is_zero() -> None:
    # measured on an H100 (docs/results/2026-11-27-nvidia-h100-session.md): one rank gave
    # all_reduce 0.0 GB/s as a figure for the history, and --min-busbw failed it
    rows = {
        op: run_ranks(
            coll.collective_sweep_rank, 1, coll.SweepSpec(op, (1024,), 0, 1), 120, "gloo"
        )[0]
        for op in ("all_reduce", "all_to_all", "broadcast")
    }
    assert coll.average_busbw_gbps(rows["all_reduce"]) == 0.0  # nccl-tests' own figure at n = 1
    result = collectives_result(CollectiveRun(rows, 1, "gloo"), 1e-6, 0.0)
    assert [m.name for m in result.measurements] == ["broadcast_avg_busbw_gbps"]
    assert result.measurements[0].value > 0
    assert result.status == Status.PASS, result.message
    assert "all_reduce, all_to_all: correctness only, no bus bandwidth on 1 rank" in result.message
    # a wrong element on one rank still fails: correctness is judged without a bandwidth
    wrong = [replace(rows["all_reduce"][0], in_place_wrong=3)]
    failed = collectives_result(CollectiveRun({"all_reduce": wrong}, 1, "gloo"), None, 0.0)
    assert failed.status == Status.FAIL
    assert failed.measurements == []
    assert "all_reduce: 3 wrong element(s)" in failed.message
    # two ranks keep every figure, zero or not
    two = collectives_result(
        CollectiveRun({"all_reduce": rows["all_reduce"]}, 2, "gloo"), None, 0.0
    )
    assert [m.name for m in two.measurements] == ["all_reduce_avg_busbw_gbps"]


def test_nbody_tiling_does_not_change_the_answer() -> None:
    positions, _, masses = initial_bodies(300, CPU, "fp64")
    torch.testing.assert_close(
        accelerations(positions, masses, tile=7), accelerations(positions, masses, tile=300)
    )


def test_nbody_conserves_momentum() -> None:
    # Newton's third law: the mass-weighted accelerations of a closed system sum to zero.
    positions, _, masses = initial_bodies(400, CPU, "fp64")
    net = (masses[:, None] * accelerations(positions, masses, tile=64)).sum(0)
    assert float(net.abs().max()) < 1e-9


def test_nbody_matches_the_float64_reference() -> None:
    assert nbody_max_relative_error(CPU, "fp64", 256, 50) < 1e-12
    assert nbody_max_relative_error(CPU, "fp32", 256, 50) < 1e-4


def test_nbody_flops_follow_cuda_samples() -> None:
    figure = measure_nbody(CPU, "fp32", 128, 32, 0, 2)
    assert figure.gflops == pytest.approx(figure.interactions_per_second * 20 / 1e9)
    assert FLOPS_PER_INTERACTION == {"fp32": 20, "fp64": 30}


def test_matmul_sweep_times_every_shape_including_fp8() -> None:
    shapes = [(64, 32, 48), (32, 64, 64)]
    for dtype in ("fp32", "bf16", "fp8"):
        figures = matmul_sweep(CPU, dtype, shapes, 0, 2)
        assert [(f.m, f.n, f.k) for f in figures] == shapes
        assert all(f.median_tflops > 0 for f in figures)
    with pytest.raises(InputError, match="cannot run on cpu"):
        matmul_sweep(CPU, "tf32", shapes, 0, 1)


def test_matmul_result_reports_the_best_shape() -> None:
    result = run_matmul(CPU, ["fp32"], [(32, 32, 32), (128, 128, 128)], 1, 3)
    rows = result.details["rows"]
    best = max(rows, key=lambda row: row["median_tflops"])
    (measurement,) = result.measurements
    assert measurement.value == best["median_tflops"]
    assert f"{best['m']}x{best['n']}x{best['k']}" in result.message
    assert all(row["percent_of_peak"] is None for row in rows)  # the CPU has no peak table entry


def test_tables_and_csv_carry_every_row(sweeps: dict[str, list[coll.CollectiveRow]]) -> None:
    run = CollectiveRun({"broadcast": sweeps["broadcast"]}, 2, "gloo")
    result = collectives_result(run, None, 0.0)
    table = render_table(result).splitlines()
    assert len(table) == 2 + 3  # header, rule, one line per size
    assert "n/a" in table[2]  # broadcast has no out-of-place variant
    report = judged_report(
        tool_version="t",
        command="bench",
        level="collectives",
        device_mode="cpu",
        started_at="2026-11-01T08:00:00+00:00",
        finished_at="2026-11-01T08:00:01+00:00",
        duration_seconds=0.0,
        checks=[result],
    )
    parsed = list(csv.DictReader(io.StringIO(render_csv(report))))
    assert len(parsed) == 3
    assert parsed[0]["benchmark"] == "collectives"
    assert parsed[0]["oop_time_us"] == ""
    assert float(parsed[2]["ip_busbw_gbps"]) == pytest.approx(
        result.details["rows"][2]["ip_busbw_gbps"]
    )
