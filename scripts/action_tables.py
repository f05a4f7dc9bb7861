"""Print the [xid], [sxid], [dcgm_error] tables and the NVLink5 decode rows of
src/gpuaccept/data/ from their sources, so that a new catalogue or DCGM release is a re-run and a
diff, not a hand edit.

    python scripts/action_tables.py GPUD_DIR DCGM_DIR

GPUD_DIR: a leptonai/gpud checkout; its components/accelerator/nvidia/xid/catalog_generated.go is
a generated copy of NVIDIA's XID catalogue (docs.nvidia.com/deploy/xid-errors/
analyzing-xid-catalog.html, sheets "Catalog" and "XID 144-150 Decode") and
components/accelerator/nvidia/sxid/sxid.go transcribes the Fabric Manager guide's SXid tables.
DCGM_DIR: a DCGM checkout (dcgmlib/dcgm_errors.h for the codes, dcgmlib/src/dcgm_errors.c for
each code's severity).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from gpuaccept.actions import CATALOGUE_BUCKETS

# The catalogue's immediate-action buckets as gpuaccept's actions; the verdict follows from the
# action (gpuaccept.actions.judge_of): none ignores, monitor and rerun warn, reset-gpu and above
# fail.
BUCKETS = {bucket: action.value for bucket, action in CATALOGUE_BUCKETS.items()}

_ENTRY = re.compile(
    r'\{Code: (\d+), Mnemonic: "((?:[^"\\]|\\.)*)", Description: "((?:[^"\\]|\\.)*)", '
    r'ImmediateResolution: "([^"]*)"'
)
_RULE = re.compile(
    r'\{Xid: (\d+), Unit: "([^"]*)", IntrinfoPatternV1: "([-01]*)", IntrinfoPatternV2: "([-01]*)",'
    r' ErrorStatus: (0x[0-9a-fA-F]+), Resolution: "([^"]*)", Investigatory: "[^"]*", '
    r'Severity: "([^"]*)"'
)


def catalogue(gpud: Path) -> list[tuple[int, int, str, str, str]]:
    """(line, code, mnemonic, description, immediate bucket) of each catalogue row."""
    path = gpud / "components/accelerator/nvidia/xid/catalog_generated.go"
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        found = _ENTRY.search(line)
        if found:
            mnemonic = found[2].replace("\\n", " ")
            rows.append((number, int(found[1]), mnemonic, found[3].replace("\\n", " "), found[4]))
    return rows


def decode_rules(gpud: Path) -> list[str]:
    path = gpud / "components/accelerator/nvidia/xid/catalog_generated.go"
    out = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        found = _RULE.search(line)
        if found:
            out.append(
                f'{{ xid = {found[1]}, unit = "{found[2]}", v1 = "{found[3]}", v2 = "{found[4]}", '
                f'status = {int(found[5], 16)}, bucket = "{found[6]}", severity = "{found[7]}", '
                f"line = {number} }},"
            )
    return out


def xid_rows(gpud: Path) -> list[str]:
    rows = []
    for number, code, mnemonic, _description, bucket in catalogue(gpud):
        if bucket not in BUCKETS:  # 154 (XID_154) and 162-172 (no bucket): written by hand
            rows.append(f"# {code} {mnemonic}: bucket {bucket!r} (line {number}): by hand")
            continue
        rows.append(
            f'{code} = {{ action = "{BUCKETS[bucket]}", catalog = "{bucket}", '
            f'mnemonic = "{mnemonic}", line = {number} }}'
        )
    return rows


def sxid_rows(gpud: Path) -> list[str]:
    """Each SXid of gpud's transcription of the Fabric Manager guide (DU-09883-001), with the
    guide's section (non-fatal, fatal, always fatal, other) and gpud's own event type."""
    path = gpud / "components/accelerator/nvidia/sxid/sxid.go"
    lines = path.read_text().splitlines()
    sections = {
        "Non-Fatal NVSwitch SXid Errors": "non-fatal",
        "Fatal NVSwitch SXid Errors": "fatal",
        "Always Fatal NVSwitch SXid Errors": "always-fatal",
        "Other Notable NVSwitch SXid Error": "other",
        "Others": "other",
    }
    section, rows = "", []
    current: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        heading = re.match(r"^\t// (.+)$", line)
        if heading and heading[1] in sections:
            section = sections[heading[1]]
        start = re.match(r"^\t(\d+): \{", line)
        if start:
            current = {"code": start[1], "line": str(number), "section": section}
        name = re.match(r'^\t\tName:\s+"([^"]*)"', line)
        if name and current:
            current["name"] = name[1]
        event = re.match(r"^\t\tEventType: apiv1\.EventType(\w+)", line)
        if event and current:
            current["gpud"] = event[1].lower()
        if line == "\t}," and current:
            klass = current["section"]
            # the guide's fatal and always-fatal SXids need a restart (of the guest VM on the
            # switch's access port, of the host for always-fatal ones): on bare metal, a reboot;
            # gpud asks a reboot for a few the guide lists as non-fatal too (11004, ...)
            fatal = klass in ("fatal", "always-fatal") or current["gpud"] == "fatal"
            action = "reboot-node" if fatal else "monitor"
            rows.append(
                f'{current["code"]} = {{ action = "{action}", name = "{current["name"]}", '
                f'class = "{klass}", gpud = "{current["gpud"]}", line = {current["line"]} }}'
            )
            current = {}
    return rows


def dcgm_rows(dcgm: Path) -> list[str]:
    header = (dcgm / "dcgmlib/dcgm_errors.h").read_text()
    codes = {
        name: int(code)
        for name, code in re.findall(r"^\s*(DCGM_FR_\w+)\s*=\s*(\d+),", header, re.M)
    }
    rows = []
    table = (dcgm / "dcgmlib/src/dcgm_errors.c").read_text().splitlines()
    for number, line in enumerate(table, start=1):
        found = re.search(r"DCGM_ERROR_TABLE_ENTRY\((DCGM_FR_\w+),\s*DCGM_ERROR_(\w+),", line)
        if found and found[1] in codes:
            name, severity = found[1], found[2]
            rows.append(
                f'{codes[name]} = {{ name = "{name}", severity = "{severity}", line = {number} }}'
            )
    return rows


if __name__ == "__main__":
    gpud_dir = Path(sys.argv[1])
    print("[xid]")
    print("\n".join(xid_rows(gpud_dir)))
    print("\n[sxid]")
    print("\n".join(sxid_rows(gpud_dir)))
    print("\n# nvlink5_decode.toml rules")
    print("\n".join(decode_rules(gpud_dir)))
    if len(sys.argv) > 2:
        print("\n[dcgm_error]")
        print("\n".join(dcgm_rows(Path(sys.argv[2]))))
