"""Print the [xid] and [dcgm_error] tables of src/gpuaccept/data/actions.toml from their sources,
so that a new catalogue or DCGM release is a re-run and a diff, not a hand edit.

    python scripts/action_tables.py XID_CSV DCGM_DIR

XID_CSV: NVSentinel's transcription of NVIDIA's XID catalogue, "XID,mnemonic,immediate action
bucket,fatality" per line (NVIDIA/NVSentinel distros/kubernetes/nvsentinel/charts/
gpu-health-monitor/xiderrorsmapping.csv). DCGM_DIR: a DCGM checkout (dcgmlib/dcgm_errors.h for
the codes, dcgmlib/src/dcgm_errors.c for each code's severity).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# The catalogue's immediate-action buckets as gpuaccept's actions (docs/actions.md says why).
BUCKETS = {
    "IGNORE": "none",
    "RESTART_APP": "rerun",
    "CHECK_UVM": "rerun",
    "WORKFLOW_XID_45": "none",
    "RESET_GPU": "reset-gpu",
    "WORKFLOW_XID_48": "reset-gpu",
    "WORKFLOW_NVLINK_ERR": "reset-gpu",
    "WORKFLOW_NVLINK5_ERR": "reset-gpu",
    "RESTART_BM": "reboot-node",
    "RESTART_VM": "reboot-node",
    "UPDATE_SWFW": "drain",
    "CHECK_MECHANICALS": "drain",
    "UNEXPECTED_ERR_REPORT_ISSUE": "drain",
    "CONTACT_SUPPORT": "replace",
}


def xid_rows(csv: Path) -> list[str]:
    rows = []
    for number, line in enumerate(csv.read_text().splitlines(), start=1):
        xid, mnemonic, bucket, _fatal = (part.strip() for part in line.split(","))
        if bucket not in BUCKETS:  # 154: "follow guidance as it applies to another Xid"
            rows.append(
                f"# {xid} {mnemonic}: {bucket!r} (line {number}): judged by its recovery action"
            )
            continue
        rows.append(
            f'{xid} = {{ action = "{BUCKETS[bucket]}", catalog = "{bucket}", '
            f'mnemonic = "{mnemonic or "-"}" }}'
        )
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
    print("[xid]")
    print("\n".join(xid_rows(Path(sys.argv[1]))))
    print("\n[dcgm_error]")
    print("\n".join(dcgm_rows(Path(sys.argv[2]))))
