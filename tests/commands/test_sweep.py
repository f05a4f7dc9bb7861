"""`sweep` as library calls, without Typer (issue #54 §3), over Slurm stand-ins
(tests/fake_slurm_sweep: sinfo, squeue and sbatch over one state file): which nodes get a job,
which are skipped and why, what sbatch is given, and the history as the sweep's memory."""

from __future__ import annotations

import json
import os
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuaccept.commands.output import Collected
from gpuaccept.commands.sweep import SweepRequest, run
from gpuaccept.errors import InputError
from gpuaccept.store.history import History
from tests.run_reports import gpu_report, rejudged

FAKES = Path(__file__).resolve().parents[1] / "fake_slurm_sweep"
REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "slurm" / "accept-node.sbatch"

FLEET = {
    "gpu00": {"state": "idle"},  # never tested: due first
    "gpu01": {"state": "idle"},  # tested 2 h ago (its report in the results): not due
    "gpu02": {"state": "mixed"},  # a user's job on it
    "gpu03": {"state": "idle+drain", "reason": "admin: fan"},
    "gpu04": {"state": "idle"},  # a sweep job of it is queued
    "gpu05": {"state": "idle"},  # never tested: due, after gpu00
    "gpu06": {"state": "down*", "reason": "Not responding"},
}


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "slurm.json"
    jobs = [{"id": "77", "name": "gpuaccept-sweep:gpu04"}, {"id": "78", "name": "users-job"}]
    state.write_text(json.dumps({"nodes": FLEET, "jobs": jobs}))
    monkeypatch.setenv("FAKE_SWEEP_STATE", str(state))
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    results = tmp_path / "results"
    results.mkdir()
    two_hours_ago = datetime.now(UTC) - timedelta(hours=2)
    report = rejudged(
        gpu_report("gpu01", [790.0]),
        started_at=two_hours_ago.isoformat(),
        finished_at=(two_hours_ago + timedelta(minutes=1)).isoformat(),
    )
    (results / "accept-55-gpu01.json").write_text(report.model_dump_json())
    return state


def _request(tmp_path: Path, **changes: Any) -> SweepRequest:
    values: dict[str, Any] = {
        "results": tmp_path / "results",
        "script": SCRIPT,
        "history": str(tmp_path / "history.sqlite"),
        "max_nodes": 2,
    }
    return SweepRequest(**(values | changes))


def _jobs(state: Path) -> list[dict[str, Any]]:
    return list(json.loads(state.read_text())["jobs"])


def test_a_round_submits_the_most_overdue_idle_node_under_the_cap(
    fleet: Path, tmp_path: Path
) -> None:
    out = Collected()
    result = run(_request(tmp_path), out)
    # the cap of two holds: gpu04's queued job is one, gpu00 the other; gpu05 waits its turn
    assert result.submitted == {"gpu00": "102"}
    said = out.text()
    assert "[SWEEP] imported 1 new report(s) into the history\n" in said
    assert "[SWEEP] gpu00: job 102 (due: never tested)\n" in said
    assert "[SWEEP] gpu01: skip: tested 2.0 h ago (cadence 24 h)\n" in said
    assert "[SWEEP] gpu02: skip: busy: jobs run on it\n" in said
    assert "[SWEEP] gpu03: skip: held: drained by someone else (admin: fan)\n" in said
    assert "[SWEEP] gpu04: skip: under test: a sweep job of it is queued or running\n" in said
    assert "[SWEEP] gpu05: skip: due, but the fleet's cap holds: 2 of 2 under test\n" in said
    assert "[SWEEP] gpu06: skip: held: Slurm shows it DOWN*" in said
    assert said.splitlines()[-1] == (
        "[SWEEP] 1 submitted; 2 node(s) under test, the cap 2; 7 node(s) seen"
    )
    job = _jobs(fleet)[-1]
    assert job["name"] == "gpuaccept-sweep:gpu00"
    assert job["options"]["nodelist"] == "gpu00"
    assert job["options"]["nice"] == "10000"
    assert "--exclusive" in job["flags"]
    assert job["options"]["export"] == f"ALL,GPUACCEPT_RESULTS={tmp_path / 'results'}"
    assert job["options"]["chdir"] == str(REPO)  # the script runs tasks/ from its root
    assert job["args"] == [str(SCRIPT), "quick"]
    assert "qos" not in job["options"]


def test_the_next_round_finds_the_job_queued_and_submits_no_more(
    fleet: Path, tmp_path: Path
) -> None:
    run(_request(tmp_path), Collected())
    out = Collected()
    again = run(_request(tmp_path), out)
    assert again.submitted == {}
    assert "[SWEEP] gpu00: skip: under test" in out.text()
    assert "imported" not in out.text()  # the history holds the report already


def test_the_history_is_the_sweeps_memory_of_a_test(fleet: Path, tmp_path: Path) -> None:
    run(_request(tmp_path, max_nodes=0), Collected())
    with History.open(tmp_path / "history.sqlite") as history:
        assert [row.hostname for row in history.newest_runs("accept")] == ["gpu01"]


def test_the_sweeps_memory_is_the_same_in_a_postgresql_history(
    fleet: Path, tmp_path: Path, pg_history: str
) -> None:
    """The sweep reads and writes the history through store.base.History: a fleet's PostgreSQL
    store answers as the SQLite file does."""
    out = Collected()
    result = run(_request(tmp_path, history=pg_history), out)
    assert result.submitted == {"gpu00": "102"}
    assert "[SWEEP] gpu01: skip: tested 2.0 h ago (cadence 24 h)\n" in out.text()
    with History.open(pg_history) as history:
        assert [row.hostname for row in history.newest_runs("accept")] == ["gpu01"]


def test_a_qos_a_partition_and_the_sites_options_are_handed_to_sbatch(
    fleet: Path, tmp_path: Path
) -> None:
    state = json.loads(fleet.read_text())
    state["nodes"]["gpu05"]["partitions"] = ["gpu", "idle-checks"]
    fleet.write_text(json.dumps(state))
    result = run(
        _request(
            tmp_path,
            partition="idle-checks",
            qos="scavenger",
            nice=500,
            level="standard",
            sbatch_option=("--account=ops", "--time=30"),
        ),
        Collected(),
    )
    assert result.submitted == {"gpu05": "102"}
    job = _jobs(fleet)[-1]
    assert (job["options"]["qos"], job["options"]["partition"]) == ("scavenger", "idle-checks")
    assert job["options"]["nice"] == "500"
    assert job["args"][-1] == "standard"
    assert (job["options"]["account"], job["options"]["time"]) == ("ops", "30")


def test_shadow_mode_submits_nothing_and_says_what_it_would(fleet: Path, tmp_path: Path) -> None:
    out = Collected()
    result = run(_request(tmp_path, act="shadow", max_nodes=5), out)
    assert result.submitted == {}
    assert len(_jobs(fleet)) == 2
    assert "[SWEEP] gpu00: would submit (due: never tested; --act shadow)\n" in out.text()
    assert "[SWEEP] gpu05: would submit (due: never tested; --act shadow)\n" in out.text()


def test_a_report_that_cannot_be_read_is_said_and_the_round_goes_on(
    fleet: Path, tmp_path: Path
) -> None:
    (tmp_path / "results" / "accept-56-gpu05.json").write_text("{ not json")
    out = Collected()
    result = run(_request(tmp_path), out)
    assert result.submitted == {"gpu00": "102"}
    assert "sweep: not imported: " in out.text("err")
    assert "accept-56-gpu05.json" in out.text("err")


def test_two_rounds_at_once_never_pass_the_cap_together(
    fleet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each round reads the queue before it submits: without the lock, two rounds on a slow
    controller both found room for one more and submitted two (seen with the lock removed)."""
    monkeypatch.setenv("FAKE_SWEEP_SBATCH_DELAY", "1")
    state = json.loads(fleet.read_text())
    state["jobs"] = []  # nothing under test: the cap of one admits one node
    fleet.write_text(json.dumps(state))
    results: list[dict[str, str]] = []
    rounds = [
        threading.Thread(
            target=lambda: results.append(
                run(_request(tmp_path, max_nodes=1), Collected()).submitted
            )
        )
        for _ in range(2)
    ]
    for one in rounds:
        one.start()
    for one in rounds:
        one.join(timeout=60)
    assert sorted(len(submitted) for submitted in results) == [0, 1]
    assert [job["name"] for job in _jobs(fleet)] == ["gpuaccept-sweep:gpu00"]


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"act": "submit"}, "--act 'submit': give one of shadow, enforce"),
        ({"level": "deep"}, "--level 'deep': give one of quick, standard, full"),
        ({"cadence_hours": 0}, "--cadence-hours 0: give hours above 0"),
        ({"cadence_hours": float("inf")}, "--cadence-hours inf: give hours above 0"),
        ({"max_nodes": -1}, "--max-nodes -1: give nodes from 0 to 100000"),
        ({"max_per_pool": -2}, "--max-per-pool -2: give nodes from 0 to 100000"),
        ({"nice": -5}, "--nice -5: give 0 to 2147483645"),
        ({"qos": "low;rm"}, "--qos 'low;rm': give a QOS name"),
        ({"sbatch_option": ("account=ops",)}, "--sbatch-option 'account=ops': give one sbatch"),
        ({"sbatch_option": ("--time=1 --x",)}, "--sbatch-option '--time=1 --x': give one sbatch"),
        (
            {"sbatch_option": ("--nodelist=gpu07",)},
            "--sbatch-option '--nodelist=gpu07': the sweep sets it itself",
        ),
        ({"sbatch_option": "--account=ops"}, "--sbatch-option: give a list of options"),
    ],
)
def test_a_request_out_of_its_bounds_is_refused_in_one_line(
    tmp_path: Path, changes: dict[str, Any], said: str
) -> None:
    with pytest.raises(InputError) as refused:
        _request(tmp_path, **changes)
    assert str(refused.value).startswith(said)


def test_a_script_that_is_not_there_is_refused_before_slurm_is_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm client at all
    with pytest.raises(InputError, match=r"^--script .*: not a file"):
        run(_request(tmp_path, script=tmp_path / "nope.sbatch"), Collected())


def test_a_partition_with_no_node_is_refused_not_swept_as_empty(
    fleet: Path, tmp_path: Path
) -> None:
    # sinfo -p answers a misspelt partition with no line and exit 0 (Slurm 22.05 here): a round
    # that said "0 node(s) seen" and exited 0 would sweep nothing from its timer for ever
    with pytest.raises(InputError, match=r"^--partition gpus: no node is in it"):
        run(_request(tmp_path, partition="gpus"), Collected())
    assert len(_jobs(fleet)) == 2


def test_a_test_is_a_run_at_the_sweeps_level_or_deeper(fleet: Path, tmp_path: Path) -> None:
    """A quick run (Slurm's health check, a preflight) an hour ago kept a node 'tested' for a
    standard sweep, which then never came due while the health check ran."""
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1)

    def run_at(node: str, level: str, when: datetime) -> Any:
        report = rejudged(
            gpu_report(node, [790.0]),
            started_at=when.isoformat(),
            finished_at=(when + timedelta(minutes=1)).isoformat(),
        )
        return report.model_copy(update={"level": level})

    with History.open(tmp_path / "history.sqlite") as history:
        history.append([(run_at("gpu01", "quick", an_hour_ago), "health check")])
    standard = Collected()
    run(_request(tmp_path, level="standard", max_nodes=9, act="shadow"), standard)
    # gpu01's newest run is the quick one; its standard run (2 h ago) is its test
    assert "[SWEEP] gpu01: skip: tested 2.0 h ago (cadence 24 h)\n" in standard.text()
    full = Collected()
    run(_request(tmp_path, level="full", max_nodes=9, act="shadow"), full)
    assert "[SWEEP] gpu01: would submit (due: never tested; --act shadow)\n" in full.text()
    quick = Collected()
    run(_request(tmp_path, level="quick", max_nodes=9, act="shadow"), quick)
    assert "[SWEEP] gpu01: skip: tested 1.0 h ago (cadence 24 h)\n" in quick.text()
