"""gpuaccept's own records (act/ledger.py) and the parts of act around them that a mutation run
found unheld: what each change records, the re-read before acting, the reports a GPU is
followed into, the rule that calls two failures alike."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpuaccept.act import slurm
from gpuaccept.act.ledger import Ledger, load_ledger, now_utc, save_ledger
from gpuaccept.act.policy import Decision, Guard, SchedNode, Trip, alike, decide
from gpuaccept.act.repeats import earlier_reports
from gpuaccept.act.rounds import NodeRun
from gpuaccept.errors import GpuacceptError, InputError
from tests.act.test_offenders import UUID, _run

T0 = datetime(2026, 11, 28, 1, 0, 0, tzinfo=UTC)


def test_every_change_to_the_records_says_who_what_and_on_which_stack() -> None:
    ledger = Ledger().trip(T0, "a drain of n1 was refused")
    (tripped,) = ledger.events
    assert (tripped.event, tripped.by, tripped.why) == (
        "tripped",
        "gpuaccept",
        "a drain of n1 was refused",
    )
    assert ledger.trip(T0, "again") == ledger  # the first trip says when the fleet failed
    nodes = tuple(f"n{i}" for i in range(7))
    held = ledger.hold_regression(T0, "aaaaaaaa", ("compute", "memory"), nodes)
    event = held.events[-1]
    assert (event.event, event.by, event.stack) == ("regression", "gpuaccept", "aaaaaaaa")
    assert event.why == "7 node(s) failed alike (compute, memory): n0, n1, n2, n3, n4"
    assert held.hold_regression(T0, "aaaaaaaa", ("x",), ("z",)) == held
    cleared = held.clear_regression(T0, "aaaaaaaa", "bob", "torch pinned back")
    event = cleared.events[-1]
    assert (event.event, event.by, event.why, event.stack) == (
        "cleared",
        "bob",
        "torch pinned back",
        "aaaaaaaa",
    )
    assert cleared.held_regressions() == {}


def test_a_reset_or_clear_of_nothing_is_refused_saying_what_is_held() -> None:
    with pytest.raises(InputError) as nothing:
        Ledger().reset(T0, "a", "b")
    assert str(nothing.value) == "the circuit breaker is not tripped: nothing to reset"
    with pytest.raises(InputError) as none_held:
        Ledger().clear_regression(T0, "aaaaaaaa", "a", "b")
    assert str(none_held.value) == "stack aaaaaaaa is not held as a regression (held: none)"
    two = Ledger().hold_regression(T0, "bbbbbbbb", ("x",), ("n1",))
    two = two.hold_regression(T0, "cccccccc", ("y",), ("n2",))
    with pytest.raises(InputError) as others:
        two.clear_regression(T0, "aaaaaaaa", "a", "b")
    assert str(others.value).endswith("(held: bbbbbbbb, cccccccc)")


def test_the_records_are_written_for_a_person_to_read_and_a_bad_place_names_the_option(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.json"
    save_ledger(path, Ledger().trip(T0, "x"))
    text = path.read_text()
    assert text.startswith('{\n  "version": 1,')  # indented: an operator reads and edits it
    assert load_ledger(path).tripped is not None
    with pytest.raises(GpuacceptError) as refused:
        save_ledger(tmp_path, Ledger())  # a directory
    assert "--state" in str(refused.value)
    assert now_utc().tzinfo is not None


def test_two_failures_are_alike_when_they_share_a_check_as_a_reason_lists_them() -> None:
    assert alike("compute, memory", ("compute",))
    assert alike(("memory",), "compute, memory")
    assert not alike("compute, memory", ("events",))
    assert not alike("", "")  # no check named is no check shared
    assert not alike(("",), ("",))


def test_a_tripped_breakers_refusal_says_how_to_reset_it() -> None:
    free = SchedNode("n1", False, "", None)
    decision = decide(
        "fail", "quick", ["x"], free, [free], datetime(2026, 11, 28), tripped=Trip(T0, "why")
    )
    assert decision.why == (
        "failed, NOT drained: the circuit breaker tripped at 2026-11-28T01:00:00+00:00 (why) and "
        "holds until a person resets it (gpuaccept act breaker reset --by NAME --why TEXT)"
    )


def test_a_gpu_is_followed_into_the_reports_of_hosts_it_ran_on_and_no_others(
    tmp_path: Path,
) -> None:
    other = "GPU-00000000-0000-0000-0000-000000000009"
    reports = {
        "own": _run("gpu01", 1, remap=True),
        "moved": _run("gpu02", 2, remap=True),  # the same GPU, moved to gpu02
        "stranger": _run("gpu03", 3, remap=True, uuid=other),
    }
    for name, report in reports.items():
        (tmp_path / f"gpuaccept-accept-{name}.json").write_text(report.model_dump_json())
    this = tmp_path / "gpuaccept-accept-now.json"
    this.write_text(_run("gpu01", 4, remap=True).model_dump_json())
    found, _ = earlier_reports(tmp_path, "gpu01", this, gpus=frozenset({UUID}))
    assert sorted(r.hostname or "" for r in found) == ["gpu01", "gpu02"]
    alone, _ = earlier_reports(tmp_path, "gpu01", this)
    assert [r.hostname for r in alone] == ["gpu01"]


def test_hosts_said_of_a_gpu_are_those_it_ran_on() -> None:
    from gpuaccept.act.offenders import offences

    earlier = [
        _run("gpu01", 0, remap=True),
        _run("gpu01", 1, remap=False),
        _run("gpu09", 2, remap=True, uuid="GPU-00000000-0000-0000-0000-000000000009"),
    ]
    now = _run("gpu07", 50, remap=True)
    (gpu,) = [o for o in offences(now, earlier) if o.what.startswith("GPU")]
    assert gpu.hosts == ("gpu01", "gpu07")


def test_nothing_is_done_to_a_node_that_changed_between_the_decision_and_the_act(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An administrator took the node DOWN after act read Slurm and before it drained: read
    again just before acting, the node is left as it is and the records are untouched."""
    fresh = [SchedNode("n1", False, "", None)]
    down = [SchedNode("n1", False, "admin", None, held="Slurm shows it DOWN")]
    reads = iter([fresh, down])
    monkeypatch.setattr(slurm, "read_nodes", lambda partition=None, node=None: next(reads))
    done: list[Decision] = []
    monkeypatch.setattr(slurm, "carry_out", done.append)
    run = NodeRun("n1", "fail", "quick", ("compute",), "aaaaaaaa", "drain")
    state = tmp_path / "state.json"
    decision, changed = slurm.act_on_node(run, Guard(), state, "enforce")
    assert (decision.action, changed, done) == ("drain", "Slurm shows it DOWN", [])
    assert not state.exists()


@pytest.mark.parametrize(
    ("decided", "now", "said"),
    [
        ("drain", SchedNode("n1", False, "", None), ""),
        ("drain", SchedNode("n1", True, "admin: fan", None), "drained meanwhile (admin: fan)"),
        ("drain", SchedNode("n1", True, "", None), "drained meanwhile (no reason)"),
        ("resume", SchedNode("n1", True, "gpuaccept quick: x", None), ""),
        ("resume", SchedNode("n1", False, "", None), "no longer drained by gpuaccept"),
        ("resume", SchedNode("n1", True, "gpuaccept quick: x", None, held="down"), "down"),
    ],
)
def test_still_as_decided_reads_the_node_again(
    monkeypatch: pytest.MonkeyPatch, decided: str, now: SchedNode, said: str
) -> None:
    asked: list[str | None] = []

    def read(partition: str | None = None, node: str | None = None) -> list[SchedNode]:
        asked.append(node)
        return [now]

    monkeypatch.setattr(slurm, "read_nodes", read)
    assert slurm.still_as_decided(Decision(decided, "n1", "why")) == said  # type: ignore[arg-type]
    assert asked == ["n1"]  # only the node itself is read again
    monkeypatch.setattr(slurm, "read_nodes", lambda partition=None, node=None: [])
    assert slurm.still_as_decided(Decision(decided, "n1", "why")) == "Slurm no longer lists it"  # type: ignore[arg-type]


def test_a_ledger_file_that_is_not_one_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"version": 2}))
    with pytest.raises(InputError) as refused:
        load_ledger(path)
    assert str(refused.value).startswith(f"act state {path}: not gpuaccept's act state (version")


def test_sinfo_lines_are_read_whole_whatever_the_reason_holds() -> None:
    """A reason may hold '|' (it is the last field); a line that is not a node's is passed
    over, not an end; Slurm's `none` is no reason."""
    text = "\n".join(
        [
            "garbage without fields",
            f"{'n1':<10}|{'idle+drain':<20}|{'2026-11-28T01:00:00':<20}|admin: a | b | c",
            f"{'n2':<10}|{'idle':<20}|{'Unknown':<20}|none",
        ]
    )
    n1, n2 = slurm.parse_sinfo(text)
    assert (n1.name, n1.reason, n1.held) == (
        "n1",
        "admin: a | b | c",
        "drained by someone else (admin: a | b | c)",
    )
    assert n1.reason_time == datetime(2026, 11, 28, 1, 0, 0)
    assert (n2.name, n2.reason, n2.drained, n2.held) == ("n2", "", False, "")


def test_a_resume_is_not_made_on_a_node_taken_down_since_it_was_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ours = [SchedNode("n1", True, "gpuaccept quick: drain: compute", None)]
    down = [SchedNode("n1", True, "gpuaccept quick: drain: compute", None, held="DOWN")]
    reads = iter([ours, down])
    monkeypatch.setattr(slurm, "read_nodes", lambda partition=None, node=None: next(reads))
    done: list[Decision] = []
    monkeypatch.setattr(slurm, "carry_out", done.append)
    run = NodeRun("n1", "pass", "standard", (), "aaaaaaaa", "none", ran=("compute",))
    decision, changed = slurm.act_on_node(run, Guard(), tmp_path / "state.json", "enforce")
    assert (decision.action, changed, done) == ("resume", "DOWN", [])


def test_the_records_keep_a_weeks_drains_and_let_older_ones_go() -> None:
    from datetime import timedelta

    ledger = Ledger().drained(T0, "old")
    ledger = ledger.drained(T0 + timedelta(days=7), "edge")  # the old one is a week old: kept
    assert [d.node for d in ledger.drains] == ["old", "edge"]
    ledger = ledger.drained(T0 + timedelta(days=7, seconds=1), "new")
    assert [d.node for d in ledger.drains] == ["edge", "new"]
    assert ledger.drains_since(T0 + timedelta(days=7)) == ["edge", "new"]
