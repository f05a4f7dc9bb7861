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
- `MANIFEST.json`: each member's sha256 and size, what was not collected and why, what was cut
  and why, how many credentials were scrubbed and of which kinds, the detector and its plugins.

Every member passes `evidence.scrub` (detect-secrets and the forms it lacks; issue #49 §7) first,
a JSON member string by string and then line by line, the manifest's reasons too. Each tool runs
bounded in time (a sick GPU is where tools hang) and size; each member is bounded, and so is the
archive (`Collected.text`), every cut said in the manifest. What is missing is said there too,
never a reason to fail the run or to change its verdict. A GPU a finding names by its PCI address
is found by domain, bus and device (issue #50 §5). The archive is named by node and GPU serial
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
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuaccept.evidence.scrub import REDACTED, detector, plugin_types, scrub
from gpuaccept.probe.pci_address import match_gpu, parse_pci_address
from gpuaccept.results import RunReport
from gpuaccept.verdict import Outcome

SMI_SECONDS = 60.0
BUG_REPORT_SECONDS = 300.0  # the script's own note: "It may take several seconds", or hang
MIB = 1024 * 1024
MAX_MEMBER_BYTES = 64 * MIB  # any member: `nvidia-smi -q` of a full node is well under 1 MiB
MAX_BUG_REPORT_BYTES = 256 * MIB  # decompressed: the one member that is large by nature
MAX_ARCHIVE_BYTES = 384 * MIB  # the members together, before compression
# Scrubbing reads every line with ~35 detectors (about 60-150 us a line on one core): a 256 MiB
# bug report would take minutes, so the archive has a budget, and a member not scrubbed within
# it is cut at its last scrubbed line (evidence.scrub.scrub) and said so.
SCRUB_SECONDS = 300.0
CONTEXT_LINES = 20  # kernel-log lines kept before and after each XID line
MAX_XID_LINES = 20_000
_NAME_PART = re.compile(r"[^A-Za-z0-9_.-]+")
_CUT_MARK = "[gpuaccept: the rest was cut; MANIFEST.json says why]\n"


def _mib(size: int) -> str:
    return f"{size / MIB:g} MiB"


def _whole_lines(data: bytes, bound: int) -> bytes:
    """`data` within `bound` bytes, cut after its last whole line: a line cut in two could leave
    half a credential that no detector recognises."""
    if len(data) <= bound:
        return data
    return data[: data.rfind(b"\n", 0, bound) + 1]


@dataclass
class Collected:
    """The archive's members so far (each scrubbed, each within its bound and the archive's),
    what could not be collected (member -> why) and what was cut (member -> where and why)."""

    members: dict[str, bytes] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    cut: dict[str, str] = field(default_factory=dict)
    scrubbed: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    archive_bytes: int = MAX_ARCHIVE_BYTES
    scrub_seconds: float = SCRUB_SECONDS

    def skip(self, name: str, why: str) -> None:
        """A member not collected, and why (scrubbed too: a tool's last line is quoted)."""
        self.missing[name] = scrub(why).text

    def text(
        self, name: str, text: str, limit: int | None = None, cut_from: int | None = None
    ) -> None:
        """`text`, scrubbed, as member `name`, within `limit` and the room the archive has left;
        `cut_from` is the size of what `text` was read from, when its reader cut it at `limit`
        (-1: larger, by how much unknown)."""
        limit = MAX_MEMBER_BYTES if limit is None else limit
        raw = text.encode("utf-8")
        room = self.archive_bytes - sum(len(m) for m in self.members.values())
        bound = min(limit, room) - len(_CUT_MARK)
        whys = []
        if cut_from is not None or len(raw) > limit:
            whys.append(f"over the member's bound of {_mib(limit)}")
        elif len(raw) > room:
            whys.append(f"the archive's bound of {_mib(self.archive_bytes)} was reached")
        kept = _whole_lines(raw, max(bound, 0)) if whys else raw
        started = time.monotonic()
        done = scrub(kept.decode("utf-8", "replace"), deadline=started + self.scrub_seconds)
        self.scrub_seconds = max(0.0, self.scrub_seconds - (time.monotonic() - started))
        if done.stopped_at is not None:
            whys.append(f"scrubbing ran past the archive's {SCRUB_SECONDS:g} s for it")
        data = done.text.encode("utf-8")
        if not whys and len(data) > room:  # [REDACTED] is longer than what it replaced
            whys.append(f"the archive's bound of {_mib(self.archive_bytes)} was reached")
        if whys:
            data = _whole_lines(data, max(bound, 0))
        self.scrubbed += done.count
        self.kinds.update(done.kinds)
        if whys and not data:
            self.skip(name, "not kept: " + "; ".join(whys))
            return
        if whys:
            size = f"more than {len(raw)}" if cut_from == -1 else str(cut_from or len(raw))
            self.cut[name] = f"cut at {len(data)} bytes of {size}: {'; '.join(whys)}"
            data += _CUT_MARK.encode()
        self.members[name] = data

    def json(self, name: str, value: Any, sort_keys: bool = True) -> None:
        """`value` as indented JSON, each string in it scrubbed first: a string's lines are one
        line once JSON escapes them, where a detector sees `\\nAKIA...` and no line start; then
        the text, one key and value to a line, for the credentials a key names."""
        found = _ScrubbedStrings()
        clean = found.walk(json.loads(json.dumps(value, default=str)))
        self.scrubbed += found.count
        self.kinds.update(found.kinds)
        self.text(name, json.dumps(clean, indent=2, sort_keys=sort_keys, ensure_ascii=False) + "\n")


@dataclass
class _ScrubbedStrings:
    """A JSON value with every string in it (keys too) scrubbed, and what was found."""

    count: int = 0
    kinds: Counter[str] = field(default_factory=Counter)

    def string(self, text: str, key: str = "") -> str:
        """A string scrubbed with its key before it, as its line in the dump reads (`"version":
        "0.11.0.1"` is a version; alone, a dotted quad)."""
        prefix = f"{json.dumps(key)}: " if key else ""
        done = scrub(prefix + text)
        self.count += done.count
        self.kinds.update(done.kinds)
        return done.text[len(prefix) :] if done.text.startswith(prefix) else REDACTED

    def walk(self, value: Any, key: str = "") -> Any:
        if isinstance(value, str):
            return self.string(value, key)
        if isinstance(value, list):
            return [self.walk(v, key) for v in value]
        if isinstance(value, dict):
            return {self.string(str(k)): self.walk(v, str(k)) for k, v in value.items()}
        return value


@dataclass(frozen=True)
class Evidence:
    path: Path
    members: tuple[str, ...]
    missing: dict[str, str]
    scrubbed: int
    cut: dict[str, str] = field(default_factory=dict)


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


@dataclass(frozen=True)
class ToolOutput:
    """What a tool printed (at most `limit` bytes of it), how much it printed in all, or why
    nothing (`why`)."""

    data: bytes
    why: str = ""
    total_bytes: int = 0


def run_tool(
    command: list[str], seconds: float, cwd: Path | None = None, limit: int | None = None
) -> ToolOutput:
    """A command run bounded in time and output: its stdout and stderr go to a scratch file, of
    which `limit` bytes are read back (a tool printing gigabytes never fills memory); on timeout
    its whole process group is killed (a bug-report script starts many children)."""
    if shutil.which(command[0]) is None:
        return ToolOutput(b"", f"{command[0]} not found")
    with tempfile.TemporaryFile(prefix="gpuaccept-tool-") as sink:
        try:
            process = subprocess.Popen(
                command,
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as error:
            return ToolOutput(b"", f"{command[0]}: {error.strerror or error}")
        try:
            process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return ToolOutput(b"", f"{' '.join(command)} took over {seconds:g} s: stopped")
        total = os.fstat(sink.fileno()).st_size
        sink.seek(0)
        out = sink.read(MAX_MEMBER_BYTES if limit is None else limit)
    if process.returncode != 0:
        last = (out[-4096:].decode("utf-8", "replace").strip().splitlines() or [""])[-1][:200]
        return ToolOutput(b"", f"{command[0]} exited {process.returncode}: {last}".rstrip(": "))
    return ToolOutput(out, "", total)


def _bug_report(seconds: float) -> tuple[str | None, str, bool]:
    """(the log, "", whether it was cut at MAX_BUG_REPORT_BYTES) or (None, why not, False)."""
    with tempfile.TemporaryDirectory(prefix="gpuaccept-bug-report-") as scratch:
        base = Path(scratch) / "nvidia-bug-report.log"
        ran = run_tool(
            ["nvidia-bug-report.sh", "--safe-mode", "--output-file", str(base)],
            seconds,
            cwd=Path(scratch),
        )
        if ran.why:
            return None, ran.why, False
        for candidate, opener in ((base.with_suffix(".log.gz"), gzip.open), (base, open)):
            if candidate.is_file():
                try:
                    with opener(candidate, "rb") as stream:
                        data = stream.read(MAX_BUG_REPORT_BYTES + 1)  # decompressed, bounded
                except (OSError, EOFError, gzip.BadGzipFile) as error:
                    return None, f"nvidia-bug-report.sh's log unreadable: {error}", False
                cut = len(data) > MAX_BUG_REPORT_BYTES
                return data[:MAX_BUG_REPORT_BYTES].decode("utf-8", "replace"), "", cut
        return None, "nvidia-bug-report.sh wrote no log", False


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
    """Everything the archive holds, each source bounded; none of them can fail the collection.
    The small members come first, so the archive's bound cuts the large ones."""
    got = Collected()
    got.json("report.json", report.model_dump(mode="json"), sort_keys=False)
    got.json("identity.json", identity(report, node))
    text, source = kernel_log()
    if text is None:
        got.skip("kernel-xid.log", f"the kernel log could not be read ({source})")
    elif "NVRM: Xid" not in text:
        got.skip("kernel-xid.log", f"no NVRM: Xid line in the kernel log ({source})")
    else:
        got.text("kernel-xid.log", f"# from {source}\n" + xid_context(text))
    dcgm = next((c for c in report.checks if c.name == "dcgm"), None)
    if dcgm is None:
        got.skip("dcgm.json", "the dcgm check was not part of this run")
    else:
        got.json(
            "dcgm.json",
            {"status": dcgm.status.value, "message": dcgm.message, "details": dcgm.details},
        )
    ports = _infiniband()
    if ports:
        got.json("infiniband.json", ports)
    else:
        got.skip("infiniband.json", "no InfiniBand device in sysfs")
    smi = run_tool(["nvidia-smi", "-q"], smi_seconds)
    if smi.why:
        got.skip("nvidia-smi-q.txt", smi.why)
    else:
        got.text(
            "nvidia-smi-q.txt",
            smi.data.decode("utf-8", "replace"),
            cut_from=smi.total_bytes if smi.total_bytes > len(smi.data) else None,
        )
    log, why, cut = _bug_report(bug_report_seconds)
    if log is None:
        got.skip("nvidia-bug-report.log", why)
    else:
        got.text("nvidia-bug-report.log", log, MAX_BUG_REPORT_BYTES, cut_from=-1 if cut else None)
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
        "cut": got.cut,
        "credentials_scrubbed": got.scrubbed,
        "credentials_by_kind": dict(sorted(got.kinds.items())),
        "scrubber": {
            "detector": detector(),
            "plugins": plugin_types(),
        },
        "bounds": {
            "member_bytes": MAX_MEMBER_BYTES,
            "nvidia_bug_report_bytes": MAX_BUG_REPORT_BYTES,
            "archive_bytes": got.archive_bytes,
            "scrub_seconds": SCRUB_SECONDS,
        },
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
    return Evidence(path, tuple(got.members), dict(got.missing), got.scrubbed, dict(got.cut))
