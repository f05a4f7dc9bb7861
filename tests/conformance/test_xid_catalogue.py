"""NVIDIA's XID catalogue, as data/actions.toml and data/nvlink5_decode.toml carry it (issue #50
§2): each row recomputed from lines transcribed from the copy the table header cites,
leptonai/gpud@4a8de33a3f02e207f39e9023d67125592d599731
components/accelerator/nvidia/xid/catalog_generated.go (generated 2025-10-29 from
docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html; sheets "Catalog" and "XID 144-150
Decode"), as tests/test_reference_sources.py does for references.toml. Each fixture line is the
file's line (its number first), cut after the fields a row is made of."""

from __future__ import annotations

import re

import pytest

from gpuaccept.actions import CATALOGUE_BUCKETS, builtin_rules, judge_of
from gpuaccept.probe.xid import nvlink5_rules

CATALOGUE = """\
8:{Code: 1, Mnemonic: "ROBUST_CHANNEL_FIFO_ERROR_FIFO_METHOD", Description: "Unused", ImmediateResolution: "CONTACT_SUPPORT"
15:{Code: 8, Mnemonic: "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", Description: "GPU stopped processing", ImmediateResolution: "RESTART_APP"
21:{Code: 14, Mnemonic: "ROBUST_CHANNEL_FAKE_ERROR", Description: "Unused", ImmediateResolution: "IGNORE"
53:{Code: 46, Mnemonic: "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", Description: "GPU stopped processing", ImmediateResolution: "RESET_GPU"
55:{Code: 48, Mnemonic: "ROBUST_CHANNEL_GPU_ECC_DBE", Description: "Double Bit ECC Error", ImmediateResolution: "WORKFLOW_XID_48"
70:{Code: 63, Mnemonic: "INFOROM_DRAM_RETIREMENT_EVENT", Description: "GPU memory remapping event", ImmediateResolution: "IGNORE"
86:{Code: 79, Mnemonic: "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", Description: "GPU has fallen off the bus", ImmediateResolution: "RESTART_BM"
101:{Code: 94, Mnemonic: "ROBUST_CHANNEL_CONTAINED_ERROR", Description: "Contained memory error", ImmediateResolution: "RESTART_APP"
115:{Code: 108, Mnemonic: "NVLINK_REMOTE_TRANSLATION_ERROR", Description: "Unused", ImmediateResolution: "IGNORE"
116:{Code: 109, Mnemonic: "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", Description: "Context Switch Timeout Error", ImmediateResolution: "RESET_GPU"
152:{Code: 145, Mnemonic: "NVLINK_RLW_ERROR", Description: "NVLINK: RLW Error", ImmediateResolution: "WORKFLOW_NVLINK5_ERR"
156:{Code: 149, Mnemonic: "NVLINK_NETIR_ERROR", Description: "NVLINK: NETIR Error", ImmediateResolution: "WORKFLOW_NVLINK5_ERR"
161:{Code: 154, Mnemonic: "GPU_RECOVERY_ACTION_CHANGED", Description: "GPU Recovery Action Changed", ImmediateResolution: "XID_154"
167:{Code: 160, Mnemonic: "CHANNEL_RETIREMENT_EVENT", Description: "Channel Retirement Event", ImmediateResolution: "IGNORE"
169:{Code: 162, Mnemonic: "PSHC_REENGAGED", Description: "Power Smoothing HW Circuitry capability reengaged", ImmediateResolution: ""
174:{Code: 167, Mnemonic: "PCIE_FATAL_TIMEOUT", Description: "PCIE_FATAL_TIMEOUT", ImmediateResolution: ""
"""  # noqa: E501

DECODE = """\
185:{Xid: 144, Unit: "SAW_MVB", IntrinfoPatternV1: "------000000----------0000100001", IntrinfoPatternV2: "------000000-------------0000001", ErrorStatus: 0x00000002, Resolution: "RESET_GPU", Investigatory: "CONTACT_SUPPORT", Severity: "Fatal"
191:{Xid: 145, Unit: "RLW_REMAP", IntrinfoPatternV1: "------000000----------0010000010", IntrinfoPatternV2: "------000000-------------0000100", ErrorStatus: 0x00000001, Resolution: "XID_154_EVAL", Investigatory: "CONTACT_SUPPORT", Severity: "Non-fatal"
248:{Xid: 149, Unit: "NETIR_BER_EVENT", IntrinfoPatternV1: "------000000----------1000100110", IntrinfoPatternV2: "------000000-------------0010011", ErrorStatus: 0x00000001, Resolution: "IGNORE", Investigatory: "INVESTIGATE_LINK_SI_AND_CABLES", Severity: "Non-fatal"
263:{Xid: 149, Unit: "NETIR_LINK_EVT/NETIR_LINK_DOWN", IntrinfoPatternV1: "------100001----------0111000110", IntrinfoPatternV2: "------100001-------------0010001", ErrorStatus: 0x00000000, Resolution: "RESET_GPU", Investigatory: "INVESTIGATE_PEER_DEVICE", Severity: "Link Fatal"
"""  # noqa: E501

_ENTRY = re.compile(
    r'^(?P<line>\d+):\{Code: (?P<code>\d+), Mnemonic: "(?P<mnemonic>[^"]*)", Description: '
    r'"[^"]*", ImmediateResolution: "(?P<bucket>[^"]*)"$'
)
_RULE = re.compile(
    r'^(?P<line>\d+):\{Xid: (?P<xid>\d+), Unit: "(?P<unit>[^"]*)", IntrinfoPatternV1: '
    r'"(?P<v1>[-01]*)", IntrinfoPatternV2: "(?P<v2>[-01]*)", '
    r"ErrorStatus: (?P<status>0x[0-9a-f]+), Resolution: "
    r'"(?P<bucket>[^"]*)", Investigatory: "[^"]*", Severity: "(?P<severity>[^"]*)"$'
)
ENTRIES = [_ENTRY.match(line) for line in CATALOGUE.splitlines()]
RULES = [_RULE.match(line) for line in DECODE.splitlines()]
# the rows whose bucket the copy does not give, or whose verdict gpuaccept departs from: each
# says why in its row (tests/test_actions.py holds that), and the catalogue's action stands
DEPARTURES = {63, 94}
NO_BUCKET = {154, 162, 167}


def test_every_fixture_line_was_read() -> None:
    assert all(ENTRIES)
    assert all(RULES)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda m: f"xid{m['code']}")
def test_each_row_is_the_catalogues(entry: re.Match[str]) -> None:
    row = builtin_rules().xid[entry["code"]]
    assert (row.mnemonic, row.line) == (entry["mnemonic"], int(entry["line"]))
    code = int(entry["code"])
    if code in NO_BUCKET:
        assert entry["bucket"] in ("", "XID_154")
        assert row.catalog in ("-", "XID_154")
        assert row.why
        return
    assert row.catalog == entry["bucket"]
    assert row.action is CATALOGUE_BUCKETS[entry["bucket"]]
    if code in DEPARTURES:
        assert row.verdict == "fail"
        assert row.judge == "fail"
        assert row.why
    else:
        assert row.judge is None
        assert row.verdict == judge_of(row.action)


def test_the_catalogue_as_published_today() -> None:
    """Issue #50 §2: 108 and 160 IGNORE, the unused XIDs CONTACT_SUPPORT, rows up to 172."""
    rules = builtin_rules()
    assert rules.xid["108"].verdict == rules.xid["160"].verdict == "ignore"
    assert rules.xid["1"].catalog == "CONTACT_SUPPORT"
    assert rules.xid["162"].verdict == "ignore"  # a power-smoothing notice
    assert max(int(code) for code in rules.xid) == 172
    assert set(rules.xid) == {str(code) for code in range(1, 173)}


@pytest.mark.parametrize("entry", RULES, ids=lambda m: f"xid{m['xid']}-line{m['line']}")
def test_each_decode_rule_is_the_sheets(entry: re.Match[str]) -> None:
    (rule,) = [rule for rule in nvlink5_rules() if rule.line == int(entry["line"])]
    assert (rule.xid, rule.unit, rule.v1, rule.v2) == (
        int(entry["xid"]),
        entry["unit"],
        entry["v1"],
        entry["v2"],
    )
    assert (rule.status, rule.bucket, rule.severity) == (
        int(entry["status"], 16),
        entry["bucket"],
        entry["severity"],
    )


def test_the_decode_sheet_covers_144_to_150() -> None:
    assert {rule.xid for rule in nvlink5_rules()} == set(range(144, 151))
    assert len(nvlink5_rules()) == 94  # the copy's nvlinkRules
