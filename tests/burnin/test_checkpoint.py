"""A burn-in checkpoint is not a pass (issue #30 §1): bound to its run and its node, refused
when a run could not have written it, and every window judged again from its figures."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaccept.burnin.checkpoint import CheckpointLock, resume, save_checkpoint
from gpuaccept.burnin.evidence import StoredLoad, StoredReference, WindowRecord
from gpuaccept.burnin.plan import BurnInPlan, BurnInProgress
from gpuaccept.burnin.window import judge_record
from gpuaccept.cli import app
from gpuaccept.errors import InputError
from gpuaccept.probe.nvml_events import GpuEvent
from tests.burnin.records import BAD, GOOD, as_run, binding, device, record

PLAN = BurnInPlan.build(1500, 300, gpu_count=3, schedule=["gemm-bf16", "hbm"])
DEVICES = ["gpu0", "gpu1", "gpu2"]
UUIDS: list[str | None] = ["GPU-0a", "GPU-1b", "GPU-2c"]
BOUND = binding(PLAN, DEVICES, uuids=UUIDS)


def _healthy(window: int) -> WindowRecord:
    return record(PLAN, window, {d: device(800.0 - i) for i, d in enumerate(DEVICES)})


def _save(path: Path, records: list[WindowRecord], bound: Any = BOUND) -> None:
    progress = BurnInProgress(plan=PLAN.fingerprint(), devices=bound.devices)
    for stored in records:
        progress.record(judge_record(stored), stored)
    save_checkpoint(path, as_run(progress), bound)


def test_an_evicted_burn_in_resumes_where_it_stopped_with_its_load_time_honest(
    tmp_path: Path,
) -> None:
    path = tmp_path / "burnin.json"
    assert resume(path, BOUND).next_window == 0  # no checkpoint yet: a fresh start
    _save(path, [_healthy(w) for w in range(3)])
    again = resume(path, BOUND)
    assert again.next_window == 3
    assert again.load_seconds == 900.0  # three windows of load, not the wall time since the start
    assert again.windows[2].throughput == {"gpu0": 800.0, "gpu1": 799.0, "gpu2": 798.0}
    assert not any(w.failures for w in again.windows)
    with pytest.raises(ValueError, match="window 4 recorded after 2"):
        again.record(judge_record(_healthy(4)), _healthy(4))


def test_the_file_holds_figures_only_and_a_resume_judges_them_again(tmp_path: Path) -> None:
    """The failing run whose findings were deleted by hand: there are none to delete, and the
    figures bring every finding back."""
    path = tmp_path / "burnin.json"
    slowed = StoredLoad(samples=60, loaded_samples=50, reason_hits={"hardware slowdown": 40})
    wrong = StoredReference(rule="within the bound", checked=8, worst_ratio=3.0, outside="row 2")
    xid = GpuEvent(kind="xid", gpu_uuid="GPU-1b", at="2026-11-25T00:00:00+00:00", xid=79)
    records = [
        record(PLAN, 0, {"gpu0": device(), "gpu1": device(), "gpu2": device(digest=BAD)}),
        record(
            PLAN,
            1,
            {"gpu0": device(), "gpu1": device(load=slowed), "gpu2": device(500.0)},
            events=[xid],
        ),
        record(PLAN, 2, {"gpu0": device(), "gpu1": device(reference=wrong)}, lost={"gpu2": "?"}),
    ]
    records[0] = records[0].model_copy(
        update={"devices": {**records[0].devices, "gpu2": device(digest=BAD, differing_row=17)}}
    )
    _save(path, records)
    stored = json.loads(path.read_text())["windows"]
    verdicts = {"correctness", "hardware", "stragglers", "warnings", "failures"}
    assert all(not verdicts & set(window) for window in stored)
    windows = resume(path, BOUND).windows
    assert windows[0].correctness == [
        "window 1 (gemm-bf16): gpu2 computed other bits than the majority (gpu0, gpu1), "
        "first in row 17"
    ]
    assert "gpu1: hardware slowdown under load in 40 of 50 samples" in windows[1].hardware[-1]
    assert any("XID 79" in text or "Xid 79" in text for text in windows[1].hardware)
    [slow] = windows[1].stragglers
    assert "gpu2 is a straggler" in slow
    assert windows[2].hardware == ["window 3 (gemm-bf16): gpu2 was lost: ?"]
    assert (
        "gpu1 is wrong against the reference (within the bound): row 2"
        in (windows[2].correctness[0])
    )


def _edited(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _set(where: list[Any], value: Any) -> Any:
    def change(data: Any) -> None:
        for key in where[:-1]:
            data = data[key]
        data[where[-1]] = value

    return change


def _rename_device(data: Any) -> None:
    window = data["windows"][0]["devices"]
    window["gpu7"] = window.pop("gpu2")


def _beyond_the_plan(data: Any) -> None:
    first = data["windows"][0]
    data["windows"] = [{**first, "window": i, "seed": i} for i in range(PLAN.window_count + 1)]


def _a_verdict_added(data: Any) -> None:
    data["windows"][0]["correctness"] = []


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (_beyond_the_plan, "holds 6 windows, the plan has 5"),
        (_set(["windows", 0, "seconds"], 1e308), "window 1 lasted 1e+308 s, the plan's window"),
        (_set(["windows", 0, "stressor"], "gpu-burn"), "window 1 ran 'gpu-burn', the plan runs"),
        (_set(["windows", 0, "seed"], 99), "window 1 ran under another seed"),
        (_rename_device, "window 1 accounts for gpu0, gpu1, gpu7, this burn-in runs on"),
        (_set(["windows", 0, "devices", "gpu0", "throughput"], float("nan")), "throughput"),
        (_set(["windows", 0, "devices", "gpu0", "throughput"], -800.0), "throughput"),
        (_set(["windows", 0, "devices", "gpu0", "throughput"], 0.0), "throughput"),
        (_set(["windows", 0, "devices", "gpu0", "digest"], "same"), "digest"),
        (_set(["windows", 0, "devices", "gpu0", "load", "power_p90_w"], 1e400), "power_p90_w"),
        (_set(["schema_version"], 1), "another version of gpuaccept (checkpoint schema 1,"),
        (_set(["schema_version"], 99), "checkpoint schema 99, this one reads 2"),
        (_set(["schema_version"], "2"), "checkpoint schema '2'"),
        (_set(["seed"], 3), "was written with --seed 3, not 0"),
        (_set(["node", "gpu_uuids"], ["GPU-0a", "GPU-1b", "GPU-9z"]), "written on other GPUs"),
        (_set(["devices"], ["gpu0", "gpu1"]), "was written on gpu0, gpu1, this burn-in runs"),
        (_a_verdict_added, "Extra inputs are not permitted"),
        (_set(["started_at"], "2099-01-01T00:00:00+00:00"), "dated 2099-01-01T00:00:00+00:00"),
        (_set(["started_at"], "2026-11-27T00:00:00"), "started_at: Input should have timezone"),
        (_set(["run_seconds"], 1e9), "claims 1e+09 s run since"),
        (_set(["run_seconds"], 539.0), "claims 539 s run, its windows lasted 600 s"),
        (_set(["run_seconds"], -1.0), "run_seconds: Input should be greater than or equal to 0"),
        (_set(["run_seconds"], float("inf")), "run_seconds: Input should be a finite number"),
        (lambda data: data.clear(), "not a burn-in checkpoint (no windows in it)"),
    ],
)
def test_a_checkpoint_this_run_could_not_have_written_is_refused(
    tmp_path: Path, change: Any, says: str
) -> None:
    path = tmp_path / "burnin.json"
    _save(path, [_healthy(0), _healthy(1)])
    _edited(path, change)
    with pytest.raises(InputError, match=r"^--checkpoint ") as refused:
        resume(path, BOUND)
    assert says in str(refused.value)
    assert "\n" not in str(refused.value)


def test_another_nodes_checkpoint_is_refused_on_the_cpu_twin_by_its_hostname(
    tmp_path: Path,
) -> None:
    cpus = ["cpu0", "cpu1", "cpu2"]
    theirs = binding(PLAN, cpus, hostname="node-a")
    path = tmp_path / "burnin.json"
    _save(path, [record(PLAN, 0, {d: device() for d in cpus})], theirs)
    with pytest.raises(InputError, match="was written on node-a, this is node-b"):
        resume(path, binding(PLAN, cpus, hostname="node-b"))
    assert resume(path, theirs).next_window == 1


def test_the_same_gpus_under_a_new_hostname_resume(tmp_path: Path) -> None:
    """A container restarted on the same GPUs has a new hostname; the GPUs are the node."""
    path = tmp_path / "burnin.json"
    _save(path, [_healthy(0)])
    moved = binding(PLAN, DEVICES, uuids=UUIDS, hostname="container-2")
    assert resume(path, moved).next_window == 1


def test_a_second_holder_of_the_lock_is_refused_with_the_first_ones_pid(tmp_path: Path) -> None:
    path = tmp_path / "burnin.json"
    held = CheckpointLock(path).acquire()
    try:
        with pytest.raises(InputError, match=rf"in use by another burn-in \(pid {os.getpid()}\)"):
            CheckpointLock(path).acquire()
    finally:
        held.release()
    CheckpointLock(path).acquire().release()  # released: the next run takes it


CLI = ["burnin", "--duration", "3s", "--window", "1s", "--schedule", "gemm-bf16"]
CLI_PLAN = BurnInPlan.build(3, 1, gpu_count=3, schedule=["gemm-bf16"])
CPUS = ["cpu0", "cpu1", "cpu2"]


def _bits(window: int, cpu: str) -> Any:
    return device(digest=BAD if (window, cpu) == (1, "cpu2") else GOOD)


def test_a_complete_checkpoint_with_a_wrong_window_fails_without_running_anything(
    tmp_path: Path,
) -> None:
    path = tmp_path / "burnin.json"
    records = [record(CLI_PLAN, w, {d: _bits(w, d) for d in CPUS}) for w in range(3)]
    progress = BurnInProgress(plan=CLI_PLAN.fingerprint(), devices=CPUS)
    for stored in records:
        progress.record(judge_record(stored), stored)
    save_checkpoint(path, as_run(progress), binding(CLI_PLAN, CPUS))
    result = CliRunner().invoke(
        app, [*CLI, "--device", "cpu", "--no-history", "--checkpoint", str(path)]
    )
    assert result.exit_code == 1, result.output
    assert "judged again from their figures" in result.output
    assert "[BURNIN] window 1/3: gemm-bf16" not in result.output  # nothing ran
    assert "window 2 (gemm-bf16): cpu2 computed other bits than the majority" in result.output


def test_a_held_checkpoint_is_refused_by_the_cli_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "burnin.json"
    held = CheckpointLock(path).acquire()
    try:
        result = CliRunner().invoke(
            app, [*CLI, "--device", "cpu", "--no-history", "--checkpoint", str(path)]
        )
    finally:
        held.release()
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert f"in use by another burn-in (pid {os.getpid()})" in line


def test_another_nodes_gpus_are_named_in_the_refusal(tmp_path: Path) -> None:
    path = tmp_path / "burnin.json"
    _save(path, [_healthy(0)], binding(PLAN, DEVICES, uuids=UUIDS, hostname="node-a"))
    theirs = binding(PLAN, DEVICES, uuids=["GPU-x", None, "GPU-z"], hostname="node-b")
    with pytest.raises(InputError) as refused:
        resume(path, theirs)
    assert str(refused.value) == (
        f"--checkpoint {path} was written on other GPUs (GPU-0a, GPU-1b, GPU-2c on node-a), this "
        "node has GPU-x, ?, GPU-z: a burn-in certifies the GPUs it loaded; give another "
        "checkpoint file"
    )
    cpu_written = tmp_path / "cpu.json"
    _save(cpu_written, [_healthy(0)], binding(PLAN, DEVICES, hostname="node-b"))
    with pytest.raises(InputError, match=r"written on other GPUs \(no GPU on node-b\)"):
        resume(cpu_written, theirs)


def test_a_finished_burn_in_reported_again_from_its_checkpoint_is_refused(
    tmp_path: Path,
) -> None:
    """Issue #30 §1 ("consider a digest of the file kept in the history"): the report keeps the
    digest of its windows' records; a checkpoint holding every window whose windows the history
    already reports is the same burn-in shown again with a new date, and is refused naming the
    run, under any file name. The first report from it (a run stopped after its last window,
    before its report) is made, and another burn-in's windows are not confused with it. (Each
    run gets its own copy of the file: the lock is held until the process ends, and these runs
    share one process.)"""
    history = ["--history", str(tmp_path / "history.sqlite")]

    def checkpoint(name: str, rate: float) -> Path:
        path = tmp_path / name
        windows = [record(CLI_PLAN, w, {d: device(rate) for d in CPUS}) for w in range(3)]
        progress = BurnInProgress(plan=CLI_PLAN.fingerprint(), devices=CPUS)
        for stored in windows:
            progress.record(judge_record(stored), stored)
        save_checkpoint(path, as_run(progress), binding(CLI_PLAN, CPUS))
        return path

    def burnin(path: Path, *more: str) -> Any:
        return CliRunner().invoke(app, [*CLI, "--device", "cpu", "--checkpoint", str(path), *more])

    first = burnin(checkpoint("first.json", 800.0), *history)
    assert first.exit_code == 0, first.output
    again = checkpoint("again.json", 800.0)  # the same windows, another file
    refused = burnin(again, *history)
    assert refused.exit_code == 2, refused.output
    (line,) = [text for text in refused.output.splitlines() if text.strip()]
    assert f"--checkpoint {again}: its 3 windows are already reported, as run 1 (" in line
    assert "[BURNIN]" not in refused.output  # refused before any work
    # without a history there is nothing to look them up in: reported, as the first was
    alone = burnin(checkpoint("alone.json", 800.0), "--no-history")
    assert alone.exit_code == 0, alone.output
    # another burn-in's windows (other figures) are not the reported one
    other = burnin(checkpoint("other.json", 799.0), *history)
    assert other.exit_code == 0, other.output


def test_a_resumed_burn_in_is_one_run_from_its_first_start_for_all_its_processes_time(
    tmp_path: Path,
) -> None:
    """The checkpoint keeps when the burn-in began and how long its processes ran, so the run that
    finishes it reports the whole burn-in (not the 16.6 s of its last process beside "30 s of
    load", as on the H100 on 2026-11-27)."""
    from datetime import UTC, datetime, timedelta

    path = tmp_path / "burnin.json"
    _save(path, [_healthy(w) for w in range(2)])
    kept = json.loads(path.read_text())
    began = datetime.fromisoformat(kept["started_at"])
    assert kept["run_seconds"] >= 600.0
    again = resume(path, BOUND)
    assert again.started_at == began
    assert again.run_seconds() == pytest.approx(kept["run_seconds"], abs=5.0)
    assert again.run_seconds() >= kept["run_seconds"]
    # a little under its windows' load (a window may end early) still resumes
    _edited(path, _set(["run_seconds"], 541.0))
    assert resume(path, BOUND).earlier_seconds == 541.0
    _save(path, [_healthy(w) for w in range(2)])
    # written again by the resumed run: still the first start, the time adding up
    save_checkpoint(path, again, BOUND)
    assert json.loads(path.read_text())["started_at"] == kept["started_at"]
    assert json.loads(path.read_text())["run_seconds"] >= kept["run_seconds"]
    # a file written before these were kept: begun now, run for its windows' load
    _edited(path, lambda data: [data.pop("started_at"), data.pop("run_seconds")])
    older = resume(path, BOUND)
    assert older.earlier_seconds == 600.0
    assert datetime.now(UTC) - older.started_at < timedelta(seconds=60)


def test_windows_are_held_to_the_sites_limits_live_and_resumed(tmp_path: Path) -> None:
    """A site's `--rules` limits (here the NVLink CRC rate) judge the burn-in's windows as they
    judge accept's checks, and the stored windows of a resumed burn-in too: the windows had been
    held to the built-in limits whatever --rules said."""
    import dataclasses

    from gpuaccept.actions import ActionRules, LimitRow, builtin_rules
    from gpuaccept.probe.nvml_health import CounterSnapshot, ErrorCounters

    strict = builtin_rules().merged(
        ActionRules.model_validate({"limit": {"nvlink_crc_per_second": LimitRow(value=1)}}),
        "site strict.toml",
    )

    def crc(at: float, count: int) -> CounterSnapshot:
        return CounterSnapshot(at, (ErrorCounters("GPU-0a", 0, nvlink={0: (count, 0, 0)}),))

    # 600 CRC errors in a 300 s window: 2/s, under DCGM's 100/s, over the site's 1/s
    window = _healthy(0).model_copy(update={"counters": (crc(0, 0), crc(300, 600))})
    assert not any("CRC" in text for text in judge_record(window).hardware)
    [failed] = [t for t in judge_record(window, rules=strict).hardware if "CRC" in t]
    assert "at or above the limit 1 of site strict.toml" in failed
    path = tmp_path / "burnin.json"
    _save(path, [window])
    assert not any("CRC" in text for text in resume(path, BOUND).windows[0].hardware)
    site_bound = dataclasses.replace(BOUND, rules=strict)
    resumed = resume(path, site_bound).windows[0].hardware
    assert [t for t in resumed if "CRC" in t] == [failed]


def test_the_cli_hands_its_rules_to_the_windows(tmp_path: Path) -> None:
    from gpuaccept.commands.burnin.plan import plan_from as _plan

    rules = tmp_path / "strict.toml"
    rules.write_text('[limit]\nnvlink_crc_per_second = { value = 1, source = "ours" }\n')
    job = _plan(
        duration="60s", window=None, schedule=None, device="cpu", cpu_devices=2, seed=0,
        checkpoint=None, checkpoint_every=None, checkpoint_exit_code=None,
        straggler_tolerance=None, report_dir=None, junit=None, history=None, no_history=True,
        rules=rules,
    )  # fmt: skip
    assert job.settings.rules is not None
    assert job.settings.rules.limit_of("nvlink_crc_per_second") == 1
    assert job.settings.binding.rules is job.settings.rules


def test_figures_above_the_models_physical_peak_are_refused(tmp_path: Path) -> None:
    """Issue #50 §7: every window's figures edited to 1e6 TFLOPS resumed and passed: equal to
    each other (no straggler) and above every floor. No H100 runs above its peak (989 TFLOPS
    bf16 dense, references.toml), so such a file was written by a hand."""
    import dataclasses

    from gpuaccept.burnin.floors import reference_floors
    from gpuaccept.references import load_shipped_references

    floors = reference_floors(
        load_shipped_references(), [(d, "NVIDIA H100 80GB HBM3", None) for d in DEVICES]
    )
    bound = dataclasses.replace(BOUND, floors=floors)
    path = tmp_path / "burnin.json"
    _save(path, [_healthy(0), _healthy(1)], bound)
    assert resume(path, bound).next_window == 2  # 800 TFLOPS, 800 GB/s: below every peak

    def everything_a_million(data: Any) -> None:
        for window in data["windows"]:
            for work in window["devices"].values():
                work["throughput"] = 1e6

    _edited(path, everything_a_million)
    with pytest.raises(InputError) as refused:
        resume(path, bound)
    assert str(refused.value) == (
        f"--checkpoint {path}: window 1: gpu0 ran 1e+06 TFLOPS, above the H100 SXM's peak 989 "
        "TFLOPS (bf16_tflops, references.toml): no device measures that, the file was edited "
        "or damaged; give another checkpoint file"
    )
    _edited(path, _set(["windows", 0, "devices", "gpu0", "throughput"], 989.0))  # at the peak
    _edited(path, _set(["windows", 0, "devices", "gpu1", "throughput"], 989.0))
    _edited(path, _set(["windows", 0, "devices", "gpu2", "throughput"], 989.0))
    with pytest.raises(InputError, match="window 2: gpu0 ran 1e\\+06 TFLOPS, above the H100"):
        resume(path, bound)  # the hbm window, held to the memory's peak


def test_a_node_that_keeps_a_key_refuses_a_checkpoint_changed_within_physics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #50 §7: below the peak, an edit (a slow GPU's figure raised to its peers') is a
    believable figure. With the node's key (GPUACCEPT_CHECKPOINT_KEY), every file carries a
    keyed digest of what it holds: any change, a missing digest, or a digest without the key
    to check it refuses the file."""
    key = tmp_path / "node.key"
    key.write_text("c2VjcmV0LW9mLXRoaXMtbm9kZS1vbmx5LTMyYnl0ZXM=\n")
    monkeypatch.setenv("GPUACCEPT_CHECKPOINT_KEY", str(key))
    path = tmp_path / "burnin.json"
    slow = record(PLAN, 0, {"gpu0": device(500.0), "gpu1": device(800.0), "gpu2": device(799.0)})
    _save(path, [slow, _healthy(1)])
    assert resume(path, BOUND).windows[0].stragglers  # as written: gpu0 is slow
    data = json.loads(path.read_text())
    path.write_text(json.dumps(data, indent=2, sort_keys=True))  # re-encoded, not changed
    assert resume(path, BOUND).next_window == 2

    def refused(change: Any) -> str:
        path.write_text(json.dumps(data))
        _edited(path, change)
        with pytest.raises(InputError) as said:
            resume(path, BOUND)
        return str(said.value)

    assert refused(_set(["windows", 0, "devices", "gpu0", "throughput"], 800.0)) == (
        f"--checkpoint {path}: its keyed digest does not match what it holds: changed after it "
        "was written, or written with another key; give another checkpoint file"
    )
    assert "carries no keyed digest and this node keeps a key" in refused(
        lambda d: d.pop("windows_hmac")
    )
    monkeypatch.delenv("GPUACCEPT_CHECKPOINT_KEY")
    assert "written with the node's key and GPUACCEPT_CHECKPOINT_KEY is not set" in refused(
        lambda d: None
    )


@pytest.mark.parametrize(
    ("content", "says"),
    [("short\n", "holds 5 bytes of key, at least 16"), (None, "no such file")],
)
def test_a_key_file_that_is_not_one_stops_the_burn_in_before_a_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str | None, says: str
) -> None:
    key = tmp_path / "node.key"
    if content is not None:
        key.write_text(content)
    monkeypatch.setenv("GPUACCEPT_CHECKPOINT_KEY", str(key))
    with pytest.raises(InputError, match=says):
        resume(tmp_path / "not-yet.json", BOUND)  # even with no checkpoint to resume yet


def test_a_device_of_no_known_model_is_held_to_the_fastest_gpus_peak(tmp_path: Path) -> None:
    """The CPU twin (or a GPU references.toml lacks) has no model peak: no device measures more
    than the fastest GPU references.toml knows, so 1e6 TFLOPS is refused there too."""
    from gpuaccept.burnin.checkpoint import fastest_peaks

    fastest = fastest_peaks()
    bf16, said = fastest["gemm-bf16"]
    assert bf16 >= 2250  # B200's dense bf16 at least (FIELD-NOTES)
    assert said.endswith("(bf16_tflops), the fastest GPU references.toml knows")
    cpus = ["cpu0", "cpu1", "cpu2"]
    bound = binding(PLAN, cpus)
    path = tmp_path / "burnin.json"
    _save(path, [record(PLAN, 0, {d: device(0.5) for d in cpus})], bound)
    assert resume(path, bound).next_window == 1
    _edited(path, _set(["windows", 0, "devices", "cpu1", "throughput"], 1e6))
    with pytest.raises(InputError, match=r"window 1: cpu1 ran 1e\+06 TFLOPS, above the .*'s "):
        resume(path, bound)
    _edited(path, _set(["windows", 0, "devices", "cpu1", "throughput"], bf16))  # at it: kept
    assert resume(path, bound).next_window == 1


def test_a_keyed_file_written_before_the_temperature_limit_was_kept_still_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The load's temperature limit (2026-11-29) joins the keyed digest only where it holds a
    value: a file signed before the field existed (no such key in its loads) still matches, and
    a limit a file holds cannot be changed unseen."""
    key = tmp_path / "node.key"
    key.write_text("c2VjcmV0LW9mLXRoaXMtbm9kZS1vbmx5LTMyYnl0ZXM=\n")
    monkeypatch.setenv("GPUACCEPT_CHECKPOINT_KEY", str(key))
    path = tmp_path / "burnin.json"
    _save(path, [_healthy(0)])
    data = json.loads(path.read_text())
    for load in (d["load"] for d in data["windows"][0]["devices"].values()):
        assert load.pop("temperature_limit_c") is None
        assert load.pop("temperature_limit_kind") is None
    # as the code before the field wrote and signed it: its digest over what it held then
    body = {k: v for k, v in data.items() if k != "windows_hmac"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    secret = key.read_text().strip().encode()
    data["windows_hmac"] = hmac.new(secret, text.encode(), hashlib.sha256).hexdigest()
    path.write_text(json.dumps(data))
    assert resume(path, BOUND).next_window == 1

    hot = StoredLoad(
        samples=60,
        loaded_samples=50,
        temperature_max_c=80.0,
        temperature_limit_c=87.0,
        temperature_limit_kind="maximum operating",
    )
    _save(path, [record(PLAN, 0, {d: device(800.0 - i, load=hot) for i, d in enumerate(DEVICES)})])
    assert resume(path, BOUND).next_window == 1
    _edited(path, _set(["windows", 0, "devices", "gpu0", "load", "temperature_limit_c"], 95.0))
    with pytest.raises(InputError, match="its keyed digest does not match"):
        resume(path, BOUND)
