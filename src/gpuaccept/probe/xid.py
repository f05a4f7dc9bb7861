"""XID error numbers: what each means, and the NVLink5 decode of XIDs 144-150.

Whether an XID fails, warns or is ignored, and what to do about it, is its row of
data/actions.toml (`[xid]`, NVIDIA's catalogue buckets, with gpuaccept's departures written in
the rows that carry them): `gpuaccept.actions.xid_verdict`. This module keeps the words a finding
says and the decode sheet's rules. The meanings follow the driver's own table,
src/common/sdk/nvidia/inc/nverror.h in NVIDIA's open-gpu-kernel-modules (595.45.04), and the
catalogue's mnemonics for the XIDs past 150 (leptonai/gpud 4a8de33,
components/accelerator/nvidia/xid/catalog_generated.go).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

XID_MEANINGS: dict[int, str] = {
    8: "GPU stopped processing (timeout)",
    13: "graphics engine exception (usually the application)",
    31: "GPU memory page fault (usually the application)",
    32: "invalid or corrupted push buffer stream",
    38: "driver firmware error",
    43: "GPU stopped processing (usually the application)",
    45: "preemptive cleanup after a previous error",
    46: "GPU stopped processing (GPU timeout)",
    48: "double-bit ECC error",
    56: "display engine error",
    57: "error programming video memory interface",
    58: "unstable video memory interface detected",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    65: "video processor exception",
    68: "video processor (NVDEC) exception",
    69: "graphics engine class error",
    73: "video processor (NVENC) error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    80: "corrupted data sent to GPU",
    81: "VGA subsystem error",
    92: "high single-bit ECC error rate",
    94: "contained ECC error (the affected application must restart)",
    95: "uncontained ECC error (every application on the GPU affected; reset the GPU)",
    108: "NVLink remote translation error",
    109: "context switch timeout",
    110: "security fault error",
    119: "GSP RPC timeout",
    120: "GSP error",
    121: "C2C link corrected error",
    136: "NVLink training failed (ALI_TRAINING_FAIL)",
    137: "NVLink privilege error (NVLINK_PRIV_ERR)",
    140: "unrecovered ECC error escaped (UNRECOVERABLE_ECC_ERROR_ESCAPE)",
    143: "GPU initialisation error (GPU_INIT_ERROR)",
    144: "NVLink SAW error",
    145: "NVLink RLW error",
    146: "NVLink TLW error",
    147: "NVLink TREX error",
    148: "NVLink NVLPW control error",
    149: "NVLink NETIR error",
    150: "NVLink MSE error",
    151: "key rotation error",
    154: "GPU recovery action changed (see the NVML recovery action)",
    155: "NVLink software-defined error",
    156: "resource retirement event",
    157: "resource retirement failure",
    158: "GPU fatal timeout",
    159: "CHI non-data error",
    160: "channel retirement event",
    161: "channel retirement failure",
    162: "power smoothing circuitry re-engaged (a notice)",
    163: "power smoothing circuitry disengaged",
    164: "power smoothing circuitry low lifetime",
    165: "power smoothing circuitry lifetime exhausted",
    166: "NVLink traffic before encryption was configured (confidential computing)",
    167: "PCIe fatal timeout",
    168: "reduced GPU memory capacity (errors in the write-protected region)",
    169: "SEC2 micro-controller halt",
    170: "interrupt seen in confidential-computing mode",
    171: "uncorrectable DRAM error (detail of XID 48)",
    172: "uncorrectable SRAM error (detail of XID 48)",
}

XID_SOURCE = (
    "NVIDIA's XID catalogue (resolution buckets) as data/actions.toml [xid] carries it, with "
    "gpuaccept's departures in their rows; XIDs 144-150 decoded by data/nvlink5_decode.toml"
)


def describe_xid(xid: int) -> str:
    return XID_MEANINGS.get(xid, "not in gpuaccept's table (see NVIDIA's XID listing)")


# The XIDs the built-in rows of data/actions.toml fail (`actions.xid_verdict`), as data: a probe
# sits below the judge and does not import it (issue #51 §2); tests/test_layers.py holds this set
# to the judge's tables, so a row that changes there fails that test until it changes here too.
_FAILING_XIDS_TEXT = """
1 2 3 4 5 6 7 9 10 12 15 16 17 18 19 20 21 22 23 24 26 27 28 29 30 33 34 35 36 42 46 47 48 49 50
51 52 53 54 55 56 57 58 59 61 62 63 64 65 68 69 73 74 78 79 80 81 87 90 91 92 94 95 109 110 111
112 113 114 115 116 117 118 119 120 122 123 124 125 136 138 140 142 143 144 145 146 147 148 149
150 151 155 156 158 167 168 169 171 172
"""
BUILTIN_FAILING_XIDS = frozenset(int(xid) for xid in _FAILING_XIDS_TEXT.split())


def is_critical(xid: int) -> bool:
    """Whether the built-in tables fail this XID (an NVML event's verdict: the events check
    judges by the run's rules, a site's included)."""
    return xid in BUILTIN_FAILING_XIDS


# XID 154's NVML form, the recovery action the driver asks for, judged as DCGM's
# DcgmHealthWatch::MonitorGpuRecoveryAction does (DcgmHealthWatch.cpp:2150-2186): reset, reboot and
# drain-and-reset fail, drain P2P warns. NVML added bus reset and system reboot after DCGM 4.6;
# both take the node out of service, so they fail too.
FAILING_RECOVERY_ACTIONS = frozenset(
    {"GPU reset", "node reboot", "drain and reset", "bus reset", "system reboot"}
)


@dataclass(frozen=True)
class DecodeRule:
    """One row of the catalogue's "XID 144-150 Decode" sheet (data/nvlink5_decode.toml)."""

    xid: int
    unit: str
    v1: str
    v2: str
    status: int
    bucket: str  # IGNORE, RESET_GPU, XID_154_EVAL
    severity: str
    line: int


@cache
def nvlink5_rules() -> tuple[DecodeRule, ...]:
    text = files("gpuaccept.data").joinpath("nvlink5_decode.toml").read_text(encoding="utf-8")
    return tuple(DecodeRule(**row) for row in tomllib.loads(text)["rules"])


def _unit_name(text: str) -> str:
    return "".join(c for c in text.strip().upper().replace("-", "_") if c.isalnum() or c == "_")


def _unit_matches(rule_unit: str, logged: str) -> bool:
    """gpud's unitMatches (xid.go): the logged unit is the rule's or one of its aliases (the parts
    between `/`, `,`, parentheses and spaces)."""
    wanted = _unit_name(logged)
    parts = rule_unit.replace(",", "/").replace("(", "/").replace(")", "/").replace(" ", "/")
    return bool(wanted) and wanted in {_unit_name(p) for p in [*parts.split("/"), rule_unit] if p}


def _pattern_matches(pattern: str, value: int) -> bool:
    """A 32-character pattern, most significant bit first: `1` and `0` must match, `-` is any."""
    if len(pattern) != 32:
        return False
    for index, char in enumerate(pattern):
        bit = (value >> (31 - index)) & 1
        if (char == "1" and not bit) or (char == "0" and bit):
            return False
    return True


def decode_nvlink5(xid: int, unit: str, intrinfo: int, status: int) -> DecodeRule | None:
    """The decode sheet's rule for an NVLink5 XID line (gpud's lookupNVLinkRule): same XID, unit
    and error status, and intrinfo matching the rule's v2 pattern or else its v1."""
    for rule in nvlink5_rules():
        if rule.xid != xid or rule.status != status or not _unit_matches(rule.unit, unit):
            continue
        if _pattern_matches(rule.v2, intrinfo) or _pattern_matches(rule.v1, intrinfo):
            return rule
    return None
