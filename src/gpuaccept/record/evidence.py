"""Evidence for the vendor (issue #31 §5): on a failing verdict whose action takes the node or a
GPU out of service (reset-gpu, reboot-node, drain, replace), one archive of what an RMA or a
support case asks for, collected at the moment of the failure, before a reset or reboot wipes it:

- `report.json`: the run's report (verdict, findings, actions, environment capture);
- `identity.json`: the node (hostname, scheduler name, machine-id, DMI product serial), each
  GPU's index, UUID, serial, board part number and PCI bus id, and the GPUs the findings named;
- `kernel-xid.log`: the kernel-log lines around every `NVRM: Xid` line (dmesg, or the file
  GPUACCEPT_KERNEL_LOG names);
- `nvidia-smi-q.txt`: `nvidia-smi -q`;
- `nvidia-bug-report.log`: NVIDIA's `nvidia-bug-report.sh --safe-mode`, when present and this
  user may run it (root);
- `dcgm.json`: the DCGM check's results and findings, when it ran;
- `infiniband.json`: every InfiniBand port's state, rate and error counters (sysfs);
- `MANIFEST.json`: each member's sha256 and size, what was not collected and why, how many
  credentials were scrubbed.

Every text member passes `record.scrub.scrub_text` first. Each tool runs bounded in time (a sick
GPU is where tools hang) and size; what is missing is said in the manifest, never a reason to
fail the run or to change its verdict. The archive is named by node and GPU serial
(`gpuaccept-evidence-NODE-SERIAL-STARTED.tar.gz`) and written whole or not at all.

nvidia-bug-report.sh (the driver's script; read in the 390.48 driver's copy kept in
sakjain92/Fractional-GPUs@72c86c1, driver/NVIDIA-Linux-x86_64-390.48/nvidia-bug-report.sh):
`--output-file FILE` appends `.gz` when gzip is present (lines 55-58), `--safe-mode` "disables
some parts of the script that may hang the system" (lines 59-60), and it refuses to run unless
`id -u` is 0.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuaccept.probe.pci_address import match_gpu, parse_pci_address
from gpuaccept.record.scrub import scrub_text
from gpuaccept.results import RunReport
from gpuaccept.verdict import Outcome

SMI_SECONDS = 60.0
BUG_REPORT_SECONDS = 300.0  # the script's own note: "It may take several seconds", or hang
MAX_TOOL_BYTES = 64 * 1024 * 1024
MAX_BUG_REPORT_BYTES = 256 * 1024 * 1024  # decompressed
CONTEXT_LINES = 20  # kernel-log lines kept before and after each XID line
MAX_XID_LINES = 20_000
_NAME_PART = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass
class Collected:
    """The archive's members so far, and what could not be collected (member -> why)."""

    members: dict[str, bytes] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    scrubbed: int = 0

    def text(self, name: str, text: str) -> None:
        clean, count = scrub_text(text)
        self.scrubbed += count
        self.members[name] = clean.encode("utf-8")

    def json(self, name: str, value: Any) -> None:
        self.text(name, json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")


@dataclass(frozen=True)
class Evidence:
    path: Path
    members: tuple[str, ...]
    missing: dict[str, str]
    scrubbed: int


def wanted(report: RunReport) -> bool:
    """Whether a run calls for evidence: it failed and its action takes something out of
    service (a rerun or a monitor is not a vendor case)."""
    return report.verdict.outcome is Outcome.FAIL and report.action_plan.action.takes_out_of_service


def _gpus(report: RunReport) -> list[dict[str, Any]]:
    gpus = report.environment.get("gpus")
    return [g for g in gpus if isinstance(g, dict)] if isinstance(gpus, list) else []


def named_gpus(report: RunReport) -> list[str]:
    """The UUIDs the findings named with an action that takes them out of service, in order."""
    return report.action_plan.out_of_service_gpus()


def gpu_named(report: RunReport, gpu: str) -> dict[str, Any] | None:
    """The captured GPU a finding named, by UUID or (an XID of the kernel log) its PCI address
    in full: domain, bus and device (`probe.pci_address`: a GB200 tray's GPUs differ only by
    domain)."""
    gpus = _gpus(report)
    index = next((i for i, g in enumerate(gpus) if g.get("uuid") == gpu), None)
    address = parse_pci_address(gpu) if index is None and gpu.startswith("PCI ") else None
    if address is not None:
        index = match_gpu(address, [parse_pci_address(str(g.get("pci_bus_id", ""))) for g in gpus])
    return gpus[index] if index is not None else None


def serial_of(report: RunReport, gpu: str) -> str | None:
    """The serial of a GPU a finding named (`gpu_named`)."""
    serial = (gpu_named(report, gpu) or {}).get("serial")
    return str(serial) if serial else None


def archive_name(report: RunReport, node: str) -> str:
    """`gpuaccept-evidence-NODE-SERIAL-STARTED.tar.gz`: the serial of the first GPU the findings
    named (`+N` more), `node` when they named none (a node's fault), the run's start."""
    named = named_gpus(report)
    if named:
        first = serial_of(report, named[0]) or named[0]
        what = f"{first}+{len(named) - 1}" if len(named) > 1 else str(first)
    else:
        what = "node"
    stamp = re.sub(r"[^0-9T]", "", report.started_at[:19])
    parts = [_NAME_PART.sub("_", p)[:64] for p in (node, what)]
    return f"gpuaccept-evidence-{parts[0]}-{parts[1]}-{stamp}.tar.gz"


def identity(report: RunReport, node: str) -> dict[str, Any]:
    system = report.environment.get("system")
    system = system if isinstance(system, dict) else {}
    keys = ("index", "name", "uuid", "serial", "board_part_number", "pci_bus_id")
    return {
        "node": node,
        "hostname": report.hostname,
        "machine_id": system.get("machine_id"),
        "product_serial": system.get("product_serial"),
        "gpus": [{k: g.get(k) for k in keys if k in g} for g in _gpus(report)],
        "named_by_findings": named_gpus(report),
        # each named GPU as the capture knows it: the vendor's case is by serial
        "named_gpus": {
            name: {k: g.get(k) for k in keys if k in g} if g is not None else None
            for name in named_gpus(report)
            for g in [gpu_named(report, name)]
        },
        "action": report.action_plan.action.value,
    }


def xid_context(text: str, context: int = CONTEXT_LINES) -> str:
    """The lines within `context` of each `NVRM: Xid` line, stretches joined, `--` between."""
    lines = text.splitlines()
    keep: set[int] = set()
    for i, line in enumerate(lines):
        if "NVRM: Xid" in line:
            keep.update(range(max(0, i - context), min(len(lines), i + context + 1)))
    out, previous = [], None
    for i in sorted(keep)[:MAX_XID_LINES]:
        if previous is not None and i != previous + 1:
            out.append("--")
        out.append(lines[i])
        previous = i
    return "\n".join(out) + ("\n" if out else "")


def _kernel_log() -> tuple[str | None, str]:
    from gpuaccept.probe.kernel_log import KERNEL_LOG_ENV, read_dmesg, read_kernel_log_file

    path = os.environ.get(KERNEL_LOG_ENV)
    if path:
        return read_kernel_log_file(path), f"{KERNEL_LOG_ENV}={path}"
    return read_dmesg(), "dmesg"


def run_tool(command: list[str], seconds: float, cwd: Path | None = None) -> tuple[bytes, str]:
    """(stdout, "") of a command run bounded in time and output, or (b"", why not); on timeout
    its whole process group is killed (a bug-report script starts many children)."""
    if shutil.which(command[0]) is None:
        return b"", f"{command[0]} not found"
    try:
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            start_new_session=True,
        )
    except OSError as error:
        return b"", f"{command[0]}: {error.strerror or error}"
    try:
        out, _ = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return b"", f"{' '.join(command)} took over {seconds:g} s: stopped"
    out = out[:MAX_TOOL_BYTES]
    if process.returncode != 0:
        last = (out.decode("utf-8", "replace").strip().splitlines() or [""])[-1][:200]
        return b"", f"{command[0]} exited {process.returncode}: {last}".rstrip(": ")
    return out, ""


def _bug_report(seconds: float) -> tuple[str | None, str]:
    with tempfile.TemporaryDirectory(prefix="gpuaccept-bug-report-") as scratch:
        base = Path(scratch) / "nvidia-bug-report.log"
        _, why = run_tool(
            ["nvidia-bug-report.sh", "--safe-mode", "--output-file", str(base)],
            seconds,
            cwd=Path(scratch),
        )
        if why:
            return None, why
        for candidate, opener in ((base.with_suffix(".log.gz"), gzip.open), (base, open)):
            if candidate.is_file():
                try:
                    with opener(candidate, "rb") as stream:
                        data = stream.read(MAX_BUG_REPORT_BYTES + 1)
                except (OSError, EOFError, gzip.BadGzipFile) as error:
                    return None, f"nvidia-bug-report.sh's log unreadable: {error}"
                cut = (
                    "\n[cut by gpuaccept at 256 MiB]\n" if len(data) > MAX_BUG_REPORT_BYTES else ""
                )
                return data[:MAX_BUG_REPORT_BYTES].decode("utf-8", "replace") + cut, ""
        return None, "nvidia-bug-report.sh wrote no log"


def _infiniband() -> dict[str, Any]:
    from gpuaccept.probe.fabric import read_ib_ports, read_port_counters
    from gpuaccept.probe.sysfs import sysfs_root

    root = sysfs_root()
    ports: dict[str, dict[str, Any]] = {
        f"{p.device}:{p.port}": {
            "state": p.state,
            "phys_state": p.phys_state,
            "rate_gbps": p.rate_gbps,
            "link_layer": p.link_layer,
            "firmware": p.firmware,
        }
        for p in read_ib_ports(root)
    }
    for port, counters in read_port_counters(root).items():
        ports.setdefault(port, {})["counters"] = counters
    return ports


def collect(
    report: RunReport,
    node: str,
    *,
    smi_seconds: float = SMI_SECONDS,
    bug_report_seconds: float = BUG_REPORT_SECONDS,
    kernel_log: Callable[[], tuple[str | None, str]] = _kernel_log,
) -> Collected:
    """Everything the archive holds, each source bounded; none of them can fail the collection."""
    got = Collected()
    got.text("report.json", report.model_dump_json(indent=2) + "\n")
    got.json("identity.json", identity(report, node))
    text, source = kernel_log()
    if text is None:
        got.missing["kernel-xid.log"] = f"the kernel log could not be read ({source})"
    elif "NVRM: Xid" not in text:
        got.missing["kernel-xid.log"] = f"no NVRM: Xid line in the kernel log ({source})"
    else:
        got.text("kernel-xid.log", f"# from {source}\n" + xid_context(text))
    out, why = run_tool(["nvidia-smi", "-q"], smi_seconds)
    if why:
        got.missing["nvidia-smi-q.txt"] = why
    else:
        got.text("nvidia-smi-q.txt", out.decode("utf-8", "replace"))
    log, why = _bug_report(bug_report_seconds)
    if log is None:
        got.missing["nvidia-bug-report.log"] = why
    else:
        got.text("nvidia-bug-report.log", log)
    dcgm = next((c for c in report.checks if c.name == "dcgm"), None)
    if dcgm is None:
        got.missing["dcgm.json"] = "the dcgm check was not part of this run"
    else:
        got.json(
            "dcgm.json",
            {"status": dcgm.status.value, "message": dcgm.message, "details": dcgm.details},
        )
    ports = _infiniband()
    if ports:
        got.json("infiniband.json", ports)
    else:
        got.missing["infiniband.json"] = "no InfiniBand device in sysfs"
    return got


def archive(got: Collected, when: float | None = None) -> bytes:
    """The members and their manifest as a gzip'd tar (fixed owner and mode, one mtime)."""
    when = time.time() if when is None else when
    manifest = {
        "members": {
            name: {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
            for name, data in got.members.items()
        },
        "not_collected": got.missing,
        "credentials_scrubbed": got.scrubbed,
        "tool": "gpuaccept",
    }
    files = {**got.members, "MANIFEST.json": (json.dumps(manifest, indent=2) + "\n").encode()}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), int(when), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def write_evidence(report: RunReport, node: str, directory: Path, **bounds: Any) -> Evidence:
    """Collect and write the archive into `directory` (a new file: never replaces one);
    OutputError when it cannot be written."""
    from gpuaccept.output_files import write_new_bytes

    got = collect(report, node, **bounds)
    path = write_new_bytes(directory, archive_name(report, node), archive(got), "--evidence")
    return Evidence(path, tuple(got.members), dict(got.missing), got.scrubbed)
