"""`accept --rules FILE` end to end and scripts/action_tables.py (issue #31 §1); kept apart from
tests/test_actions.py, which the mutation run selects: an in-process `accept` cannot run under
mutmut, and its copy of the tree has no scripts/."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaccept.actions import Action, load_rules
from gpuaccept.cli import app
from tests.kernel_stamps import recent

REPO = Path(__file__).resolve().parents[1]


def test_accept_plans_with_the_sites_rules_and_refuses_a_bad_file(tmp_path: Path) -> None:
    good = tmp_path / "rules.toml"
    good.write_text('[check.stack]\nfail = "replace"\n')
    runner = CliRunner()
    base = ["accept", "--device", "cpu", "--no-history", "--only", "stack", "--json"]
    done = runner.invoke(app, [*base, "--rules", str(good)])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["actions"]["rules"].startswith("site rules.toml (sha256 ")
    assert report["actions"]["action"] == "none"
    bad = tmp_path / "bad.toml"
    bad.write_text('[check.stack]\nfail = "reboot-cluster"\n')
    refused = runner.invoke(app, [*base, "--rules", str(bad)])
    assert refused.exit_code == 2
    assert f"rules {bad}: check.stack.fail" in refused.output


def test_the_generator_writes_rows_the_tables_accept(tmp_path: Path) -> None:
    """scripts/action_tables.py turns the sources (gpud's generated catalogue copy and SXid
    transcription, DCGM's error table) into rows that validate: a catalogue or DCGM release is a
    re-run, not a hand edit. The lines are in the form of leptonai/gpud 4a8de33's files."""
    gpud = tmp_path / "gpud"
    xid_dir = gpud / "components/accelerator/nvidia/xid"
    sxid_dir = gpud / "components/accelerator/nvidia/sxid"
    xid_dir.mkdir(parents=True)
    sxid_dir.mkdir(parents=True)
    (xid_dir / "catalog_generated.go").write_text(
        "package xid\n"
        '\t{Code: 79, Mnemonic: "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", Description: "GPU has '
        'fallen off the bus", ImmediateResolution: "RESTART_BM", InvestigatoryResolution: '
        '"CONTACT_SUPPORT"},\n'
        '\t{Code: 154, Mnemonic: "GPU_RECOVERY_ACTION_CHANGED", Description: "GPU Recovery Action'
        ' Changed", ImmediateResolution: "XID_154", InvestigatoryResolution: "N/A"},\n'
        '\t{Xid: 150, Unit: "MSE_WATCHDOG", IntrinfoPatternV1: "------000000----------0000000000",'
        ' IntrinfoPatternV2: "------000000-------------0000000", ErrorStatus: 0x00000000, '
        'Resolution: "RESET_GPU", Investigatory: "CONTACT_SUPPORT", Severity: "Fatal", HwSw: "FW"},'
        "\n"
    )
    (sxid_dir / "sxid.go").write_text(
        "var details = map[int]Detail{\n"
        "\t// Fatal NVSwitch SXid Errors\n"
        "\t24007: {\n"
        '\t\tName:        "sourcetrack timeout error",\n'
        "\t\tEventType: apiv1.EventTypeFatal,\n"
        "\t},\n"
    )
    dcgm = tmp_path / "dcgm"
    (dcgm / "dcgmlib" / "src").mkdir(parents=True)
    (dcgm / "dcgmlib" / "dcgm_errors.h").write_text("    DCGM_FR_PCI_REPLAY_RATE = 3, //!<\n")
    (dcgm / "dcgmlib" / "src" / "dcgm_errors.c").write_text(
        "x\n    DCGM_ERROR_TABLE_ENTRY(DCGM_FR_PCI_REPLAY_RATE, DCGM_ERROR_ISOLATE, EC),\n"
    )
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "action_tables.py"), str(gpud), str(dcgm)],
        capture_output=True,
        text=True,
        check=True,
    )
    decode = done.stdout.split("# nvlink5_decode.toml rules\n", 1)[1].split("\n[dcgm_error]")[0]
    assert decode.strip().startswith('{ xid = 150, unit = "MSE_WATCHDOG"')
    rules_file = tmp_path / "generated.toml"
    rules_file.write_text(done.stdout.replace(decode, "\n"))
    rules = load_rules(rules_file)
    assert (rules.xid["79"].action, rules.xid["79"].line) == (Action.REBOOT_NODE, 2)
    assert "\n154 = " not in done.stdout  # by hand: its action is the recovery action's
    assert (rules.sxid["24007"].action, rules.sxid["24007"].class_) == (
        Action.REBOOT_NODE,
        "fatal",
    )
    assert (rules.dcgm_error["3"].severity, rules.dcgm_error["3"].line) == ("ISOLATE", 2)


def test_a_rules_key_that_cannot_match_is_refused_in_one_line(tmp_path: Path) -> None:
    """Issue #49 §5: `accept --rules` with an XID outside the catalogue exits 2 naming it."""
    bad = tmp_path / "rules.toml"
    bad.write_text('[xid]\n"079" = { action = "drain" }\n')
    base = ["accept", "--device", "cpu", "--no-history", "--only", "stack", "--json"]
    refused = CliRunner().invoke(app, [*base, "--rules", str(bad)])
    assert refused.exit_code == 2
    assert "xid.'079': a key is a code" in refused.output
    assert len(refused.output.strip().splitlines()) == 1


def test_burnin_plans_with_the_sites_rules(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[check.burnin-throughput]\nfail = "replace"\n')
    reports = tmp_path / "reports"
    reports.mkdir()
    done = CliRunner().invoke(
        app,
        [
            "burnin",
            "--duration",
            "1s",
            "--device",
            "cpu",
            "--no-history",
            "--report-dir",
            str(reports),
            "--rules",
            str(rules),
        ],
    )
    assert done.exit_code == 0, done.output
    (path,) = reports.iterdir()
    report = json.loads(path.read_text())
    assert report["actions"]["rules"].startswith("site rules.toml (sha256 ")
    assert "[ACTION] none: nothing to do" in done.stdout


def test_a_sites_xid_repeat_rule_from_a_real_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """accept on the CPU with XID 94 three times in half an hour in the kernel log: the
    catalogue says rerun; a site's repeat rule (3 within 1 h: reset-gpu) escalates it."""
    line = "[{:>12.6f}] NVRM: Xid (PCI:0000:cb:00): 94, pid=1, Contained ECC error."
    log = tmp_path / "kernel.log"
    # half an hour apart, the last a minute ago in this boot's seconds (a saved log's stamps are
    # dated from this boot: fixed early stamps fall out of the 2-hour window on a machine up
    # longer than that, tests/kernel_stamps.py)
    # (one reading of the clock: three would each move by /proc/uptime's hundredths, and the span
    # the rule reports with them; CI once read 0.5000028 h)
    first = float(recent("[0.0]", 1860.0).strip("[]"))
    stamps = [first, first + 900.0, first + 1800.0]
    if stamps[0] <= 1.0:  # a machine up less than half an hour: its first minutes are recent
        stamps = [100.0, 1000.0, 1900.0]
    log.write_text("\n".join(line.format(t) for t in stamps) + "\n")
    monkeypatch.setenv("GPUACCEPT_KERNEL_LOG", str(log))
    rules = tmp_path / "rules.toml"
    rules.write_text(
        '[xid.94]\naction = "rerun"\nrepeat = { count = 3, hours = 1, action = "reset-gpu", '
        'source = "our RMA playbook" }\n'
    )
    base = ["accept", "--device", "cpu", "--no-history", "--only", "events", "--json"]
    plain = CliRunner().invoke(app, base)
    assert json.loads(plain.stdout)["actions"]["action"] == "rerun"
    escalated = CliRunner().invoke(app, [*base, "--rules", str(rules)])
    report = json.loads(escalated.stdout)
    assert report["actions"]["action"] == "reset-gpu"
    (finding,) = report["checks"][0]["details"]["findings"]
    assert (finding["count"], finding["span_hours"]) == (3, 0.5)
