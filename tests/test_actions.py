"""gpuaccept.actions (issue #31 §1): the closed set, the bounds a status puts on a finding's
action, the node's action, the stored plan a report keeps (and refuses when edited), and a
site's `--rules FILE`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from gpuaccept.actions import (
    Action,
    ActionPlan,
    Cause,
    builtin_rules,
    finding_records,
    load_rules,
    plan_actions,
)
from gpuaccept.errors import InputError
from gpuaccept.report.reading import validated_report
from gpuaccept.results import CheckResult, RunReport, Status
from tests.run_reports import gpu_report


def _check(
    name: str, status: Status, *findings: tuple[str, str, str | None, str | None]
) -> CheckResult:
    """A check whose details keep `findings` as (status, text, kind, code) records."""
    records = [
        {"status": s, "text": text, "kind": kind, "code": code, "gpu": None}
        for s, text, kind, code in findings
    ]
    details = {"findings": records} if records else {}
    return CheckResult(name=name, area="X", status=status, message="said", details=details)


def test_the_closed_set_is_ordered_from_least_to_most_severe() -> None:
    assert [a.value for a in Action] == [
        "none",
        "monitor",
        "rerun",
        "reset-gpu",
        "reboot-node",
        "drain",
        "replace",
    ]
    assert [a.takes_out_of_service for a in Action] == [False, False, False, True, True, True, True]


def test_a_failing_finding_is_at_least_rerun_and_a_warning_at_most_monitor() -> None:
    # XID 43 is IGNORE in the catalogue; failing, it still recommends a rerun
    failing = _check("events", Status.FAIL, ("fail", "XID 43", "xid", "43"))
    assert plan_actions([failing]).action is Action.RERUN
    # XID 79 is RESTART_BM; as a warning (an old XID), no more than monitor
    warning = _check("events", Status.WARN, ("warn", "XID 79, 30 h ago", "xid", "79"))
    assert plan_actions([warning]).action is Action.MONITOR
    ignored = _check("events", Status.WARN, ("warn", "XID 43", "xid", "43"))
    assert plan_actions([ignored]).action is Action.NONE
    erring = CheckResult(name="compute", area="X", status=Status.ERROR, message="timed out")
    assert plan_actions([erring]).action is Action.RERUN


def test_the_nodes_action_is_the_most_severe_and_passes_and_skips_add_none() -> None:
    checks = [
        _check("events", Status.FAIL, ("fail", "XID 79", "xid", "79")),
        _check("health", Status.FAIL, ("fail", "remap failed", "cause", "remap-failure")),
        CheckResult(name="stack", area="X", status=Status.PASS, message="ok"),
        CheckResult(name="dcgm", area="X", status=Status.SKIP, message="not asked"),
    ]
    plan = plan_actions(checks)
    assert plan.action is Action.REPLACE
    assert [(r.check, r.action) for r in plan.recommendations] == [
        ("events", Action.REBOOT_NODE),
        ("health", Action.REPLACE),
    ]
    assert plan.sentence == "replace (health: remap failed)"
    assert plan_actions([checks[2], checks[3]]).recommendations == []


def test_a_check_without_findings_takes_its_rows_action() -> None:
    assert plan_actions([_check("inventory", Status.FAIL)]).action is Action.REBOOT_NODE
    assert plan_actions([_check("burnin-throughput", Status.FAIL)]).action is Action.RERUN
    assert plan_actions([_check("burnin-correctness", Status.FAIL)]).action is Action.DRAIN
    assert plan_actions([_check("stack", Status.WARN)]).action is Action.MONITOR


def test_a_failing_check_whose_records_explain_only_warnings_still_gets_a_failure() -> None:
    check = _check("events", Status.FAIL, ("warn", "XID 13", "xid", "13"))
    plan = plan_actions([check])
    assert [(r.status, r.action) for r in plan.recommendations] == [
        (Status.WARN, Action.MONITOR),
        (Status.FAIL, Action.DRAIN),
    ]


def test_forged_or_unknown_records_fall_back_on_the_checks_action() -> None:
    check = CheckResult(
        name="health",
        area="X",
        status=Status.FAIL,
        message="said",
        details={
            "findings": [
                "not a record",
                {"status": "bogus", "text": "x"},
                {"status": "fail", "text": "new", "kind": "cause", "code": "no-such-cause"},
            ]
        },
    )
    (recommendation,) = plan_actions([check]).recommendations
    assert recommendation.action is Action.DRAIN
    assert recommendation.cause == "cause no-such-cause: no row; the check's action"


def test_a_cause_stays_the_string_every_writer_reads() -> None:
    cause = Cause("gpu0: row remapping pending", "cause", "remap-pending", "GPU-1")
    assert cause == "gpu0: row remapping pending"
    assert "; ".join([cause, "x"]) == "gpu0: row remapping pending; x"
    import pickle

    again = pickle.loads(pickle.dumps(cause))
    assert (again, again.kind, again.code, again.gpu) == (cause, "cause", "remap-pending", "GPU-1")
    assert finding_records([cause], ["plain"]) == [
        {
            "status": "fail",
            "text": "gpu0: row remapping pending",
            "kind": "cause",
            "code": "remap-pending",
            "gpu": "GPU-1",
        },
        {"status": "warn", "text": "plain", "kind": None, "code": None, "gpu": None},
    ]


def test_a_plan_whose_action_is_not_its_worst_is_refused() -> None:
    plan = plan_actions([_check("inventory", Status.FAIL)])
    with pytest.raises(ValidationError, match="not the most severe"):
        ActionPlan.model_validate({**plan.model_dump(), "action": "none"})


def test_every_builtin_row_cites_its_source() -> None:
    rules = builtin_rules()
    assert len(rules.xid) == 172  # 1-172: the catalogue's range (XID_RANGE)
    assert len(rules.sxid) == 93
    assert len(rules.dcgm_error) == 133
    assert all(row.catalog and row.line > 0 for row in rules.xid.values())
    # a row whose verdict departs from its action, or that has no bucket, says why
    assert all(row.why for row in rules.xid.values() if row.judge or row.catalog == "-")
    assert all(row.line > 0 and row.class_ for row in rules.sxid.values())
    assert all(row.line > 0 for row in rules.dcgm_error.values())
    assert all(row.source for row in rules.cause.values())
    assert set(rules.dcgm_severity) == {
        "NONE",
        "MONITOR",
        "ISOLATE",
        "UNKNOWN",
        "TRIAGE",
        "CONFIG",
        "RESET",
    }


# --- the plan in the report ---------------------------------------------------------------


def _failed_report() -> RunReport:
    return gpu_report("node1", [500.0], passed=False)


def test_a_report_stores_its_plan_and_refuses_an_edited_one() -> None:
    report = _failed_report()
    planned = report.model_copy(update={"actions": plan_actions(report.checks)})
    stored = RunReport.model_validate_json(planned.model_dump_json())
    assert stored.actions is not None
    assert stored.actions.action is Action.DRAIN
    edited = json.loads(planned.model_dump_json())
    edited["actions"]["recommendations"][0]["action"] = "none"
    edited["actions"]["action"] = "none"
    with pytest.raises(ValidationError, match="the stored actions are not the ones its checks"):
        validated_report(edited)  # the reader refuses it: the model validates, it plans nothing


def test_a_report_from_before_plans_existed_is_planned_by_the_builtin_tables() -> None:
    report = _failed_report()
    assert report.actions is None
    assert report.action_plan.action is Action.DRAIN
    assert report.action_plan.rules == builtin_rules().label


def test_a_plan_by_a_sites_tables_is_kept_as_it_was_made(tmp_path: Path) -> None:
    rules_file = tmp_path / "site.toml"
    rules_file.write_text('[check.compute]\nfail = "replace"\n')
    rules = load_rules(rules_file)
    report = _failed_report()
    planned = report.model_copy(update={"actions": plan_actions(report.checks, rules)})
    stored = RunReport.model_validate_json(planned.model_dump_json())
    assert stored.action_plan.action is Action.REPLACE
    assert stored.action_plan.rules.startswith("site site.toml (sha256 ")


def test_a_comparison_added_to_a_site_planned_run_needs_the_sites_rules(tmp_path: Path) -> None:
    from gpuaccept.compare.self_comparison import with_check

    rules_file = tmp_path / "site.toml"
    rules_file.write_text('[check.history]\nwarn = "none"\n')
    rules = load_rules(rules_file)
    report = gpu_report("node1", [790.0])
    planned = report.model_copy(update={"actions": plan_actions(report.checks, rules)})
    history = CheckResult(name="history", area="HISTORY", status=Status.WARN, message="slower")
    with pytest.raises(ValueError, match="pass those rules"):
        with_check(planned, history)
    compared = with_check(planned, history, rules)
    assert compared.action_plan.action is Action.NONE  # the site's row, not the built-in monitor


# --- a site's rules file --------------------------------------------------------------------


def test_a_sites_rows_replace_the_builtin_ones_and_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(
        '[xid]\n79 = { action = "replace" }\n'
        '[cause.below-floor]\naction = "drain"\n'
        '[recovery_action]\n"drain P2P" = "reset-gpu"\n'
    )
    rules = load_rules(path)
    assert rules.xid["79"].action is Action.REPLACE
    assert rules.xid["48"] == builtin_rules().xid["48"]
    assert rules.cause["below-floor"].action is Action.DRAIN
    assert rules.cause["remap-pending"] == builtin_rules().cause["remap-pending"]
    assert rules.recovery_action["drain P2P"] is Action.RESET_GPU
    assert rules.label != builtin_rules().label


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[xid]\n79 = { action = "fix-it" }\n', "xid.79.action"),
        ('[xid]\nabc = { action = "drain" }\n', "a key is a code, a whole number"),
        # issue #49 §5: a key that can never match is refused, naming it
        ('[xid]\n0 = { action = "drain" }\n', "xid.0: not an XID of NVIDIA's catalogue (1-172)"),
        ('[xid]\n999 = { action = "drain" }\n', "xid.999: not an XID of NVIDIA's catalogue"),
        ('[xid]\n"079" = { action = "drain" }\n', "xid.'079': a key is a code, a whole number"),
        ('[xid]\n079 = { action = "drain" }\n', "without leading zeros"),
        ('[sxid]\n"024007" = { action = "drain" }\n', "sxid.'024007'"),
        ('[check.comptue]\nfail = "drain"\n', "check.comptue: no such check (known: burnin, "),
        ('[cause.remap-pendin]\naction = "drain"\n', "cause.remap-pendin: no such cause"),
        ('[recovery_action]\nreboot = "drain"\n', "recovery_action.reboot: no such recovery"),
        ('[dcgm_severity]\nFATAL = "drain"\n', "dcgm_severity.FATAL: no such dcgm severity"),
        ('[dcgm_error]\n5 = { name = "X", severity = "BAD" }\n', "dcgm_error.5.severity"),
        ('[dcgm_error]\n5 = { name = "X", severity = "RESET", line = "7" }\n', "line"),
        ('[cause.remap-pending]\naction = "none"\nsauce = "typo"\n', "sauce"),
        ("[actions]\nx = 1\n", "actions"),
        ("schema = 2\n", "schema"),
        ("schema = 1\n", "changes no row"),
        ("[xid\n", "rules"),
        ("[limit]\nsram_ecc = { value = 5 }\n", "limit.sram_ecc: not a limit gpuaccept judges by"),
        ("[limit]\nsram_corrected = { value = 0 }\n", "limit.sram_corrected.value"),
        ("[limit]\ndram_ecc = { value = inf }\n", "limit.dram_ecc.value"),
        ('[limit]\ndram_ecc = { value = "many" }\n', "limit.dram_ecc.value"),
        (
            '[xid.94]\naction = "rerun"\nrepeat = { count = 1, hours = 1, action = "drain" }\n',
            "xid.94.repeat.count",
        ),
        (
            '[xid.94]\naction = "rerun"\nrepeat = { count = 3, hours = 0, action = "drain" }\n',
            "xid.94.repeat.hours",
        ),
        (
            '[xid.94]\naction = "rerun"\nrepeat = { count = 3, hours = 1, action = "pray" }\n',
            "xid.94.repeat.action",
        ),
    ],
)
def test_a_faulty_rules_file_is_one_line_naming_the_file(
    tmp_path: Path, text: str, said: str
) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(text)
    with pytest.raises(InputError) as raised:
        load_rules(path)
    message = str(raised.value)
    assert message.startswith(f"rules {path}")
    assert "\n" not in message
    assert said in message


def test_a_cause_is_looked_up_in_its_own_table_only() -> None:
    """A cause whose code happens to be a key of another table (`none` is a recovery action,
    `3` a DCGM code) is not read from that table."""
    for code in ("none", "3"):
        check = _check("health", Status.FAIL, ("fail", "x", "cause", code))
        (recommendation,) = plan_actions([check]).recommendations
        assert recommendation.cause == f"cause {code}: no row; the check's action"
        assert recommendation.action is Action.DRAIN


def test_a_sites_xid_row_says_it_is_the_sites(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text('[xid]\n79 = { action = "replace" }\n')
    check = _check("events", Status.FAIL, ("fail", "XID 79", "xid", "79"))
    (recommendation,) = plan_actions([check], load_rules(path)).recommendations
    assert (recommendation.action, recommendation.cause) == (
        Action.REPLACE,
        "XID 79: site rules.toml",
    )
    (builtin,) = plan_actions([check]).recommendations
    assert builtin.cause == "XID 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS: catalogue RESTART_BM"


def test_a_rules_file_too_large_is_refused_by_its_size(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    with path.open("wb") as stream:
        stream.truncate(2 * 1024 * 1024)
    with pytest.raises(InputError, match=r"larger than 1048576 bytes; not a rules file$"):
        load_rules(path)


def test_each_checks_action_is_its_own() -> None:
    checks = [
        _check("inventory", Status.FAIL),
        CheckResult(name="ddp", area="X", status=Status.ERROR, message="timed out"),
        CheckResult(name="stack", area="X", status=Status.PASS, message="ok"),
    ]
    plan = plan_actions(checks)
    assert [plan.for_check(c) for c in ("inventory", "ddp", "stack")] == [
        Action.REBOOT_NODE,
        Action.RERUN,
        Action.NONE,
    ]


def test_the_built_in_limits_are_every_limit_with_its_source() -> None:
    """Issue #31 §1: the ECC limits and counter velocities the checks judge by are rows of the
    tables, each with a source; the built-in values are the sources' own figures."""
    from gpuaccept.actions import LIMITS

    rules = builtin_rules()
    assert set(rules.limit) == set(LIMITS)
    assert {name: rules.limit_of(name) for name in LIMITS} == {
        "dram_ecc": 20_000_000,  # aznhc conf/nd96isr_h100_v5.conf:50
        "sram_corrected": 10_000,
        "remapped_rows_uncorrectable": 512,  # DCGM common/DcgmGPUHardwareLimits.h:39
        "retirement_full_pages": 62,  # aznhc customTests/azure_gpu_ecc.nhc:131
        "nvlink_crc_per_second": 100,  # DCGM common/DcgmGPUHardwareLimits.h:30
    }
    assert all(row.source for row in rules.limit.values())
    assert rules.limit_said("sram_corrected", "aznhc's {value}") == "aznhc's 10000"


def test_a_site_limit_replaces_one_row_and_says_whose_it_is(tmp_path: Path) -> None:
    path = tmp_path / "strict.toml"
    path.write_text('[limit]\nnvlink_crc_per_second = { value = 10, source = "ours" }\n')
    rules = load_rules(path)
    assert rules.limit_of("nvlink_crc_per_second") == 10
    assert rules.limit_of("dram_ecc") == 20_000_000  # the rest stay built-in
    assert rules.limit_said("nvlink_crc_per_second", "DCGM's {value}/s") == (
        "the limit 10 of site strict.toml"
    )
    assert rules.limit_said("dram_ecc", "aznhc's {value}") == "aznhc's 20000000"
    assert rules.label != builtin_rules().label  # a plan says which limits judged it


def _xid_check(count: int, span: float | None, xid: int = 94) -> CheckResult:
    record = {
        "status": "fail",
        "text": f"kernel log since boot: XID {xid} on PCI 0000:cb:00, {count} times",
        "kind": "xid",
        "code": str(xid),
        "gpu": "PCI 0000:cb:00",
    }
    if count > 1:
        record |= {"count": count, "span_hours": span}
    return CheckResult(
        name="events",
        area="HEALTH",
        status=Status.FAIL,
        message=record["text"],
        details={"findings": [record]},
    )


@pytest.mark.parametrize(
    ("count", "span", "action"),
    [
        (3, 0.5, "reset-gpu"),  # at its count, within its hours
        (9, 1.0, "reset-gpu"),  # the hours are a bound, inclusive
        (2, 0.5, "rerun"),  # once too few
        (3, 1.01, "rerun"),  # over too long a time
        (3, None, "rerun"),  # the span not known (no stamps): no escalation on a guess
    ],
)
def test_an_xid_repeat_rule_escalates_within_its_count_and_hours(
    tmp_path: Path, count: int, span: float | None, action: str
) -> None:
    """Issue #31 §1, "XID -> action, counts and windows": XID 94 (a contained ECC error, the
    catalogue's RESTART_APP: rerun) three times within an hour recommends a GPU reset."""
    path = tmp_path / "rules.toml"
    path.write_text(
        '[xid.94]\naction = "rerun"\nrepeat = { count = 3, hours = 1, action = "reset-gpu" }\n'
    )
    plan = plan_actions([_xid_check(count, span)], load_rules(path))
    assert plan.action.value == action
    if action == "reset-gpu":
        assert "times within" in plan.recommendations[0].cause
        assert plan.recommendations[0].cause.endswith("its repeat rule (3 within 1 h: reset-gpu)")
    # the built-in tables have no repeat rules: the catalogue's action stands
    assert plan_actions([_xid_check(count, span)]).action.value == "rerun"


def test_a_repeat_rule_never_lifts_a_warning_past_monitor(tmp_path: Path) -> None:
    path = tmp_path / "rules.toml"
    path.write_text(
        '[xid.13]\naction = "monitor"\nrepeat = { count = 2, hours = 1, action = "drain" }\n'
    )
    check = _xid_check(5, 0.1, xid=13)
    warned = check.model_copy(
        update={
            "status": Status.WARN,
            "details": {"findings": [{**check.details["findings"][0], "status": "warn"}]},
        }
    )
    assert plan_actions([warned], load_rules(path)).action.value == "monitor"


def test_a_repeat_rule_is_an_xids_and_no_other_causes(tmp_path: Path) -> None:
    """DCGM's error 94 is not XID 94: a DCGM finding seen often is not escalated by the XID's
    repeat rule."""
    path = tmp_path / "rules.toml"
    path.write_text(
        '[xid.94]\naction = "rerun"\nrepeat = { count = 2, hours = 1, action = "replace" }\n'
    )
    check = _xid_check(5, 0.1)
    dcgm = check.model_copy(
        update={
            "name": "dcgm",
            "details": {
                "findings": [{**check.details["findings"][0], "kind": "dcgm-error", "code": "94"}]
            },
        }
    )
    assert plan_actions([dcgm], load_rules(path)).action is not Action.REPLACE
    assert plan_actions([check], load_rules(path)).action is Action.REPLACE


def _named(*gpus: str) -> ActionPlan:
    """A plan whose findings take out of service the GPUs named, in order."""
    recommendations = [
        {
            "check": "events",
            "status": "fail",
            "action": "drain",
            "cause": "c",
            "finding": "f",
            "gpu": gpu,
        }
        for gpu in gpus
    ]
    return ActionPlan.model_validate(
        {"action": "drain", "rules": "built-in", "recommendations": recommendations}
    )


def test_a_gpu_is_counted_once_however_the_findings_name_it() -> None:
    """Issue #50 §5: by UUID and by PCI address, in the driver's and NVML's spelling."""
    tray = [
        {"uuid": f"GPU-{n}", "pci_bus_id": f"000000{d}:01:00.0"}
        for n, d in ((0, "08"), (1, "09"), (2, "18"), (3, "19"))
    ]
    plan = _named("GPU-1", "PCI 0009:01:00", "PCI 0018:01:00", "PCI 00000018:01:00.0", "GPU-3")
    # the run's GPUs known: a PCI address one of them has is its UUID
    assert plan.out_of_service_gpus(tray) == ["GPU-1", "GPU-2", "GPU-3"]
    assert plan.out_of_service_uuids(tray) == ["GPU-1", "GPU-2", "GPU-3"]
    # unknown: the two spellings of 0018:01:00 are one GPU, GB200's domains stay apart
    assert plan.out_of_service_gpus() == ["GPU-1", "PCI 0009:01:00", "PCI 0018:01:00", "GPU-3"]
    # an address without a domain is not the GPU of one of several domains with its bus
    assert _named("PCI 01:00").out_of_service_gpus(tray) == ["PCI 01:00"]
    assert _named("PCI 0008:01:00", "PCI 10000:01:00").out_of_service_gpus(tray) == [
        "GPU-0",
        "PCI 10000:01:00",  # VMD's domain 10000 is not domain 0
    ]
