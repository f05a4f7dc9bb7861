"""Repeat offenders and a GPU's life across hosts (issue #31 §4): incidents, not runs, are
counted; a GPU keeps its count when it moves; `act slurm` says replace; `history gpu UUID`."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from typer.testing import CliRunner

from gpuaccept.act.offenders import gpu_incidents, incidents, node_incidents, offences
from gpuaccept.cli import app
from gpuaccept.results import RunReport, Status
from gpuaccept.store.history import History
from tests.run_reports import gpu_report, rejudged

UUID = "GPU-0b55801c-cc06-7e13-d5d1-f7b201b3c062"


def _run(host: str, hours: float, remap: bool, uuid: str = UUID) -> RunReport:
    """An accept run on `host` with one GPU (`uuid`, serial SN1); `remap`: its health check
    failed on a pending row remapping of that GPU (recommended: reset-gpu)."""
    base = gpu_report(host, [790.0], hours=hours)
    environment = {
        **base.environment,
        "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": uuid, "serial": "SN1"}],
    }
    checks = list(base.checks)
    if remap:
        checks[0] = checks[0].model_copy(
            update={
                "name": "health",
                "status": Status.FAIL,
                "message": "gpu0: row remapping pending (reset the GPU)",
                "details": {
                    "findings": [
                        {
                            "status": "fail",
                            "text": "gpu0: row remapping pending (reset the GPU)",
                            "kind": "cause",
                            "code": "remap-pending",
                            "gpu": uuid,
                        }
                    ]
                },
            }
        )
    return rejudged(base, checks=checks, environment=environment, level="quick")


def test_an_incident_is_a_stretch_of_failures_after_a_pass() -> None:
    runs = [("2026-11-01T01:00:00+00:00", True), ("2026-11-01T02:00:00+00:00", True)]
    assert incidents(runs) == ["2026-11-01T01:00:00+00:00"]  # one stretch: one incident
    runs += [("2026-11-01T03:00:00+00:00", False), ("2026-11-01T04:00:00+00:00", True)]
    runs += [("2026-11-01T03:30:00+00:00", None)]  # judged nothing: passed over
    assert incidents(runs) == ["2026-11-01T01:00:00+00:00", "2026-11-01T04:00:00+00:00"]


def test_a_node_failing_hour_after_hour_while_drained_is_one_incident() -> None:
    stretch = [_run("gpu01", hours, remap=True) for hours in range(10)]
    assert len(node_incidents(stretch)) == 1
    assert offences(stretch[-1], stretch[:-1]) == []


def test_three_incidents_in_seven_days_make_a_repeat_offender() -> None:
    runs = [
        _run("gpu01", 0, remap=True),
        _run("gpu01", 1, remap=False),
        _run("gpu01", 50, remap=True),
        _run("gpu01", 51, remap=False),
    ]
    now = _run("gpu01", 100, remap=True)
    found = offences(now, runs)
    assert [o.what for o in found] == ["node gpu01", f"GPU {UUID}"]
    assert found[1].said == (
        f"GPU {UUID} failed in 3 incidents within 7 days: a repeat offender, replace it"
    )
    # a week later the first incident has aged out
    later = _run("gpu01", 170, remap=True)
    assert offences(later, [*runs, now, _run("gpu01", 101, remap=False)]) != []
    # two incidents: one repair that did not hold, a person inspects before anything is replaced
    # (issue #49 §4; gpud's DefaultRebootThreshold, act/offenders.py)
    assert [o.escalation for o in offences(later, runs[2:])] == ["inspect", "inspect"]
    assert offences(later, runs[2:], inspect_after=0) == []
    assert [o.escalation for o in offences(now, runs, limit=4)] == ["inspect", "inspect"]
    assert offences(now, runs, limit=4, inspect_after=4) == []


def test_a_gpu_keeps_its_count_when_it_moves_to_another_host() -> None:
    on_a = [_run("gpu01", 0, True), _run("gpu01", 1, False), _run("gpu01", 50, True)]
    moved = _run("gpu07", 60, remap=False)
    now = _run("gpu07", 100, remap=True)
    assert len(gpu_incidents(UUID, [*on_a, moved, now])) == 3
    (gpu,) = [o for o in offences(now, [*on_a, moved]) if o.what.startswith("GPU")]
    assert gpu.count == 3
    # a failure of the node that names no GPU is no incident of this GPU's
    drained = gpu_report("gpu07", [500.0], passed=False, hours=70)
    drained = rejudged(
        drained, environment={**drained.environment, "gpus": moved.environment["gpus"]}
    )
    assert drained.action_plan.action.value == "drain"
    assert len(gpu_incidents(UUID, [*on_a, moved, drained])) == 2
    # another GPU in the same slot starts clean
    fresh = _run("gpu07", 100, remap=True, uuid="GPU-11111111-2222-3333-4444-555555555555")
    assert [o for o in offences(fresh, [*on_a, moved]) if o.what.startswith("GPU")] == []


def test_history_gpu_follows_the_gpu_across_hosts(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    runs = [
        _run("gpu01", 0, True),
        _run("gpu01", 1, False),
        _run("gpu01", 50, True),
        _run("gpu07", 60, False),
        _run("gpu07", 100, True),
        _run("gpu09", 101, False, uuid="GPU-11111111-2222-3333-4444-555555555555"),
    ]
    with History.open(path) as store:
        store.append([(r, "test") for r in runs])
    done = CliRunner().invoke(app, ["history", "gpu", UUID, "--history", str(path)])
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert len(lines) == 2 + 5 + 1  # header, rule, five runs, the sentence
    assert lines[2].split()[2:4] == ["gpu07", "0"]
    assert lines[2].endswith("reset-gpu")
    assert lines[-1] == (
        f"GPU {UUID} (serial SN1): 5 run(s) on gpu01, gpu07, moved between 2 hosts; 3 "
        "incident(s) in the 7 days before its newest run: a repeat offender, replace it "
        "(3 incidents >= the limit)"
    )
    as_json = json.loads(
        CliRunner().invoke(app, ["history", "gpu", UUID, "--history", str(path), "--json"]).stdout
    )
    assert (as_json["offender"], as_json["hosts"], as_json["incidents"]) == (
        True,
        ["gpu01", "gpu07"],
        3,
    )
    none = CliRunner().invoke(app, ["history", "gpu", "GPU-99999999-0000", "--history", str(path)])
    assert none.exit_code == 2  # issue #53 §5: an unknown GPU is an input error, not a clean life
    assert none.output.strip().splitlines() == [
        f"gpuaccept history gpu: error: history {path}: no run recorded with GPU "
        "GPU-99999999-0000 (check the UUID against "
        "`nvidia-smi -L` on its node, and that its runs went to this history)"
    ]
    bad = CliRunner().invoke(app, ["history", "gpu", "0; DROP TABLE runs", "--history", str(path)])
    assert bad.exit_code == 2
    assert "is not a GPU UUID" in bad.output


def test_a_history_from_before_run_gpus_is_filled_from_its_reports(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with History.open(path) as store:
        store.append([(_run("gpu01", 0, True), "test"), (_run("gpu07", 5, False), "test")])
    with sqlite3.connect(path) as db:  # as gpuaccept wrote it before schema 3
        db.execute("DROP TABLE run_gpus")
        db.execute("PRAGMA user_version = 2")
    with History.open(path) as store:
        found = store.gpu_runs(UUID)
    assert [(row.hostname, index, serial) for row, index, serial in found] == [
        ("gpu07", 0, "SN1"),
        ("gpu01", 0, "SN1"),
    ]


def test_act_drains_a_repeat_offender_for_replacement(fleet: Path, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    for number, (hours, remap) in enumerate([(0, True), (1, False), (50, True), (51, False)]):
        (reports / f"gpuaccept-accept-r{number}.json").write_text(
            _run("gpu01", hours, remap).model_dump_json()
        )
    now = reports / "gpuaccept-accept-now.json"
    now.write_text(_run("gpu01", 100, True).model_dump_json())
    done = CliRunner().invoke(app, ["act", "slurm", str(now), "--node", "gpu01"])
    assert done.exit_code == 1, done.stdout + done.stderr
    assert "[ACT] gpu01: node gpu01 failed in 3 incidents within 7 days" in done.stdout
    reason = json.loads(fleet.read_text())["nodes"]["gpu01"]["reason"]
    assert reason.startswith("gpuaccept quick: replace: health [stack ")
    # another node, whose earlier reports are not these, with the same GPU moved into it: the
    # GPU is followed by its UUID (issue #49 §4), its incidents on gpu01 count
    other = tmp_path / "other"
    other.mkdir()
    (other / "gpuaccept-accept-now.json").write_text(_run("gpu02", 100, True).model_dump_json())
    plain = CliRunner().invoke(
        app,
        [
            "act",
            "slurm",
            str(other / "gpuaccept-accept-now.json"),
            "--node",
            "gpu02",
            "--earlier",
            str(reports),
            "--breaker-share",
            "0.5",  # gpu01's drain would hold the breaker at 2% of 50 nodes
        ],
    )
    assert plain.exit_code == 1
    reason = json.loads(fleet.read_text())["nodes"]["gpu02"]["reason"]
    assert reason.startswith("gpuaccept quick: replace: health [stack ")
    assert f"GPU {UUID} (on gpu01, gpu02) failed in" in plain.stdout


def test_incidents_are_ordered_by_the_instant_not_the_text() -> None:
    """03:00+02:00 is 01:00 UTC: before 02:00 UTC, though it sorts after it as text."""
    runs = [
        ("2026-11-01T02:00:00+00:00", False),
        ("2026-11-01T03:00:00+02:00", True),
        ("2026-11-01T04:00:00+00:00", True),
    ]
    assert incidents(runs) == ["2026-11-01T03:00:00+02:00", "2026-11-01T04:00:00+00:00"]


def test_the_window_holds_its_first_instant() -> None:
    from gpuaccept.act.offenders import within

    newest = "2026-11-08T00:00:00+00:00"
    assert within(["2026-11-01T00:00:00+00:00", newest], newest, 7) == 2
    assert within(["2026-10-31T23:59:59+00:00"], newest, 7) == 0


def test_a_run_that_remediated_the_gpu_counts_though_its_capture_lost_the_gpu() -> None:
    lost = _run("gpu01", 50, remap=True)
    lost = rejudged(lost, environment={**lost.environment, "gpus": []})
    runs = [_run("gpu01", 0, True), _run("gpu01", 1, False), lost, _run("gpu01", 51, False)]
    assert len(gpu_incidents(UUID, runs)) == 2


def test_a_failure_naming_no_gpu_counts_for_the_node_only() -> None:
    def unnamed(hours: float, failed: bool) -> RunReport:
        report = gpu_report("gpu01", [500.0 if failed else 790.0], passed=not failed, hours=hours)
        system = {**report.environment["system"], "hostname": None}
        return rejudged(report, environment={**report.environment, "system": system})

    runs = [unnamed(0, True), unnamed(1, False), unnamed(2, True), unnamed(3, False)]
    now = unnamed(4, True)
    assert [o.what for o in offences(now, runs)] == ["node (unnamed)"]


def test_a_gpus_life_without_runs_or_with_a_report_gone() -> None:
    from gpuaccept.act.offenders import gpu_life

    empty = gpu_life(UUID, [], {})
    assert (empty.runs, empty.incidents, empty.offender) == ([], 0, False)
    report = _run("gpu01", 0, True)
    row = (1, report.started_at, "gpu01", "accept", "FAILURE: health", 0, "SN1")
    gone = gpu_life(
        UUID, [row, (2, report.started_at, "gpu01", "accept", "PASS", 0, None)], {1: report}
    )
    assert [(r.run, r.command, r.verdict, r.action.value) for r in gone.runs] == [
        (1, "accept", "FAILURE: health", "reset-gpu"),
        (2, "accept", "PASS", "none"),
    ]
    assert gpu_life(UUID, [row], {1: report}, limit=1).offender
    assert not gpu_life(UUID, [row], {1: report}, limit=0).offender  # 0: never


def test_the_nodes_past_says_replace_only_for_an_offender_within_its_days() -> None:
    from gpuaccept.act.repeats import node_past

    runs = [
        _run("gpu01", 0, remap=True),
        _run("gpu01", 1, remap=False),
        _run("gpu01", 50, remap=True),
        _run("gpu01", 51, remap=False),
        _run("gpu01", 99, remap=True),
    ]
    now = _run("gpu01", 100, remap=True)
    past = node_past(now, runs, 24, 3, 7)
    assert past.repeats == 1  # the run an hour before failed the same check
    assert [o.what for o in past.offences] == ["node gpu01", f"GPU {UUID}"]
    assert past.action("reset-gpu") == "replace"
    inspect = node_past(now, runs, 24, 0, 7)  # --replace-after 0: inspection at most
    assert inspect.action("reset-gpu") == "drain"
    never = node_past(now, runs, 24, 0, 7, 0)  # and --inspect-after 0: never
    assert (never.offences, never.action("reset-gpu")) == ((), "reset-gpu")
    assert node_past(now, runs, 24, 3, 2).offences == ()  # two days hold one incident


def test_a_gpu_a_kernel_log_xid_names_by_its_pci_address_is_followed_by_its_uuid() -> None:
    """A kernel-log XID names the GPU by PCI domain:bus:device; the run's capture ties that
    address to the GPU's UUID, so the GPU's incidents follow it to its next host (GB200's domain
    `0008`, spelled as NVML and as the driver spell it)."""

    def xid_run(host: str, hours: float, failed: bool) -> RunReport:
        run = _run(host, hours, remap=False)
        gpus = [{**run.environment["gpus"][0], "pci_bus_id": "00000008:01:00.0"}]
        checks = list(run.checks)
        if failed:
            checks[0] = checks[0].model_copy(
                update={
                    "name": "events",
                    "status": Status.FAIL,
                    "message": "Xid 79 on PCI 0008:01:00",
                    "details": {
                        "findings": [
                            {
                                "status": "fail",
                                "text": "PCI 0008:01:00: Xid 79: GPU has fallen off the bus",
                                "kind": "xid",
                                "code": "79",
                                "gpu": "PCI 0008:01:00",
                            }
                        ]
                    },
                }
            )
        return rejudged(
            run, checks=checks, environment={**run.environment, "gpus": gpus}, level="quick"
        )

    runs = [xid_run("gpu01", 0, True), xid_run("gpu01", 1, False), xid_run("gpu07", 50, False)]
    now = xid_run("gpu07", 51, True)
    assert now.action_plan.out_of_service_uuids(now.environment["gpus"]) == [UUID]
    # the history keeps the GPU by its UUID too (it kept none for a PCI-named finding)
    from gpuaccept.store.history import fleet_columns

    assert now.out_of_service_uuids == [UUID]
    assert json.loads(fleet_columns(now)[1]) == [UUID]
    (gpu,) = [o for o in offences(now, runs) if o.what.startswith("GPU")]
    assert (gpu.count, gpu.escalation, gpu.hosts) == (2, "inspect", ("gpu01", "gpu07"))
