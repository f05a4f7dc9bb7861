"""Evidence for the vendor (issue #31 §5): `accept --evidence DIR` on a failure that takes the node
or a GPU out of service writes one archive, named by node and GPU serial, of the report, the
kernel log around the XIDs, nvidia-smi -q, nvidia-bug-report.sh, DCGM's results, InfiniBand
counters and serials, every text scrubbed of credentials; each tool bounded in time; nothing of
it changes the verdict or the exit."""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.evidence.bundle import (
    archive_name,
    collect,
    identity,
    run_tool,
    serial_of,
    wanted,
    write_evidence,
    xid_context,
)
from gpuaccept.output_files import OutputError
from gpuaccept.results import RunReport, Status
from tests.kernel_stamps import recent
from tests.run_reports import gpu_report, rejudged, soft_failure

XID_LINE = "[  100.000000] NVRM: Xid (PCI:0000:cb:00): 79, pid=1, GPU has fallen off the bus."


def test_the_kernel_log_is_cut_to_the_lines_around_each_xid() -> None:
    lines = [f"line {i}" for i in range(100)]
    lines[10] = XID_LINE
    lines[80] = XID_LINE.replace("79", "48")
    kept = xid_context("\n".join(lines), context=2).splitlines()
    assert kept == [
        "line 8",
        "line 9",
        XID_LINE,
        "line 11",
        "line 12",
        "--",
        "line 78",
        "line 79",
        XID_LINE.replace("79", "48"),
        "line 81",
        "line 82",
    ]
    assert xid_context("no xid here\n") == ""


def _xid_failure(serial: str | None = "1652823051234", bus: str = "00000000:CB:00.0") -> RunReport:
    """A failing run whose finding names a GPU by the kernel log's PCI address (XID 79:
    reboot-node), the GPU's serial in the capture."""
    report = gpu_report("gpu07", [790.0])
    gpu = {**report.environment["gpus"][0], "pci_bus_id": bus, "serial": serial}
    findings = [
        {
            "status": "fail",
            "text": "XID 79 on PCI 0000:cb:00",
            "kind": "xid",
            "code": "79",
            "gpu": "PCI 0000:cb:00",
        }
    ]
    checks = [
        *report.checks,
        report.checks[0].model_copy(
            update={
                "name": "events",
                "area": "HEALTH",
                "status": Status.FAIL,
                "measurements": [],
                "details": {"findings": findings},
            }
        ),
    ]
    return rejudged(report, checks=checks, environment={**report.environment, "gpus": [gpu]})


GB200_TRAY = {  # NVML's busId (8-digit domain) -> serial: one tray, four domains, one bus:device
    "00000008:01:00.0": "1650124000008",
    "00000009:01:00.0": "1650124000009",
    "00000018:01:00.0": "1650124000018",
    "00000019:01:00.0": "1650124000019",
}


def _gb200_failure(xids: list[str]) -> RunReport:
    """A failing run on a GB200 tray: an XID 79 finding for each of `xids` (the driver's
    4-digit form, `0018:01:00`), the four GPUs captured with NVML's 8-digit form."""
    report = _xid_failure()
    template = report.environment["gpus"][0]
    gpus = [
        {
            **template,
            "index": i,
            "uuid": f"GPU-{i:08d}-0000-0000-0000-000000000000",
            "serial": s,
            "pci_bus_id": bus,
        }
        for i, (bus, s) in enumerate(GB200_TRAY.items())
    ]
    findings = [
        {
            "status": "fail",
            "text": f"XID 79 on PCI {x}",
            "kind": "xid",
            "code": "79",
            "gpu": f"PCI {x}",
        }
        for x in xids
    ]
    events = report.checks[-1].model_copy(update={"details": {"findings": findings}})
    return rejudged(
        report,
        checks=[*report.checks[:-1], events],
        environment={**report.environment, "gpus": gpus},
    )


def test_each_xid_of_a_gb200_tray_gets_its_own_gpus_serial() -> None:
    """Issue #50 §5: matched by bus and device alone, the tray's four GPUs were one and three of
    four XIDs got the first GPU's serial; with the domain each gets its own, and the archive's
    identity names each GPU the findings named by its serial."""
    xids = ["0008:01:00", "0009:01:00", "0018:01:00", "0019:01:00"]
    report = _gb200_failure(xids)
    assert [serial_of(report, f"PCI {x}") for x in xids] == list(GB200_TRAY.values())
    assert serial_of(report, "PCI 0010:01:00") is None  # no GPU of the node: no serial guessed
    assert serial_of(report, "PCI 01:00") is None  # no domain and four candidates: none guessed
    last = _gb200_failure(["0019:01:00"])
    assert archive_name(last, "tray3").startswith("gpuaccept-evidence-tray3-1650124000019-")
    named = identity(report, "tray3")["named_gpus"]
    assert [g["serial"] for g in named.values()] == list(GB200_TRAY.values())
    assert named["PCI 0018:01:00"]["pci_bus_id"] == "00000018:01:00.0"


def test_which_runs_call_for_evidence() -> None:
    assert wanted(_xid_failure())  # reboot-node
    assert wanted(gpu_report("n", [500.0], passed=False))  # compute failed: drain
    assert not wanted(soft_failure("n", 1.0))  # a rerun is no vendor case
    assert not wanted(gpu_report("n", [790.0]))


def test_the_archive_is_named_by_node_and_gpu_serial() -> None:
    report = _xid_failure()
    stamp = "20261101T080000"
    assert archive_name(report, "gpu07") == f"gpuaccept-evidence-gpu07-1652823051234-{stamp}.tar.gz"
    # no serial in the capture: the finding's own name for the GPU; no GPU named: the node
    unknown = archive_name(_xid_failure(serial=None), "gpu07")
    assert unknown == f"gpuaccept-evidence-gpu07-PCI_0000_cb_00-{stamp}.tar.gz"
    node = archive_name(gpu_report("n", [500.0], passed=False), "../../etc/x y")
    assert node == f"gpuaccept-evidence-.._.._etc_x_y-node-{stamp}.tar.gz"
    assert "/" not in node


def _tools(directory: Path, bug_report: str) -> Path:
    """Stand-ins for nvidia-smi and nvidia-bug-report.sh; `bug_report` is the script's body."""
    directory.mkdir(exist_ok=True)
    smi = directory / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\necho '==============NVSMI LOG=============='\n"
        "echo '    Serial Number : 1652823051234'\necho 'MY_TOKEN=abc123'\n"
    )
    script = directory / "nvidia-bug-report.sh"
    script.write_text("#!/bin/sh\n" + bug_report)
    for tool in (smi, script):
        tool.chmod(0o755)
    return directory


WRITES_A_BUG_REPORT = """
while [ "$1" != "" ]; do
    case $1 in --output-file ) out="$2"; shift ;; esac
    shift
done
printf 'nvidia-bug-report.sh Version: 1\\nkey AKIAIOSFODNN7EXAMPLE\\n' | gzip -c > "$out.gz"
"""


def _members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {
            m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
        }


def test_accept_writes_the_archive_of_an_xid_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end on the CPU: XID 79 in the kernel log fails `events` (reboot-node); the archive
    holds the report, the scrubbed kernel-log lines, nvidia-smi -q and the bug report, each
    member's digest in the manifest, and the run still exits 1 with its report."""
    log = tmp_path / "kernel.log"
    log.write_text("boot\nexport PASSWORD=hunter2\n" + recent(XID_LINE) + "\nafter\n")
    monkeypatch.setenv("GPUACCEPT_KERNEL_LOG", str(log))
    tools = _tools(tmp_path / "bin", WRITES_A_BUG_REPORT)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    evidence = tmp_path / "evidence"
    result = CliRunner().invoke(
        app,
        [
            "accept",
            "--device",
            "cpu",
            "--no-history",
            "--only",
            "events",
            "--json",
            "--evidence",
            str(evidence),
        ],
    )
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["actions"]["action"] == "reboot-node"
    (archive,) = evidence.iterdir()
    assert archive.name.startswith("gpuaccept-evidence-")
    members = _members(archive)
    assert set(members) == {
        "report.json",
        "identity.json",
        "kernel-xid.log",
        "nvidia-smi-q.txt",
        "nvidia-bug-report.log",
        "MANIFEST.json",
    }
    assert json.loads(members["report.json"])["verdict"] == report["verdict"]
    kernel = members["kernel-xid.log"].decode()
    assert XID_LINE.partition("]")[2] in kernel  # the line, under today's stamp
    assert "hunter2" not in kernel
    assert b"MY_TOKEN=[REDACTED]" in members["nvidia-smi-q.txt"]
    assert b"1652823051234" in members["nvidia-smi-q.txt"]
    assert b"AKIAIOSFODNN7EXAMPLE" not in members["nvidia-bug-report.log"]
    assert b"nvidia-bug-report.sh Version: 1" in members["nvidia-bug-report.log"]
    manifest = json.loads(members["MANIFEST.json"])
    assert manifest["credentials_scrubbed"] == 3
    for name, entry in manifest["members"].items():
        assert entry["sha256"] == hashlib.sha256(members[name]).hexdigest()
    assert manifest["not_collected"]["dcgm.json"] == "the dcgm check was not part of this run"
    assert "[EVIDENCE] not collected: dcgm.json" in result.stderr  # --json: the console is stderr


def test_a_pass_or_a_rerun_writes_no_archive(tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    result = CliRunner().invoke(
        app,
        [
            "accept",
            "--device",
            "cpu",
            "--no-history",
            "--only",
            "stack",
            "--evidence",
            str(evidence),
        ],
    )
    assert result.exit_code == 0, result.output
    assert list(evidence.iterdir()) == []  # created (checked before the run), left empty
    assert "[EVIDENCE]" not in result.output


def test_a_tool_that_hangs_is_stopped_with_its_children(tmp_path: Path) -> None:
    """A bug-report script wedged on a sick GPU (it starts children): stopped at its bound, the
    whole process group killed, said in the manifest; the rest is collected."""
    marker = tmp_path / "child.pid"
    tools = _tools(tmp_path / "bin", f"sleep 300 &\necho $! > {marker}\nwait\n")
    old_path = os.environ["PATH"]
    os.environ["PATH"] = f"{tools}{os.pathsep}{old_path}"
    try:
        started = time.monotonic()
        got = collect(
            _xid_failure(), "gpu07", bug_report_seconds=1.0, kernel_log=lambda: (None, "dmesg")
        )
        took = time.monotonic() - started
    finally:
        os.environ["PATH"] = old_path
    assert took < 30
    assert got.missing["nvidia-bug-report.log"].endswith("took over 1 s: stopped")
    assert "nvidia-smi-q.txt" in got.members
    child = int(marker.read_text())
    for _ in range(50):  # the killed child is reaped by init shortly
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the bug report's child {child} outlived the timeout")
    assert got.missing["kernel-xid.log"] == "the kernel log could not be read (dmesg)"


def test_a_tool_that_refuses_is_said_not_raised(tmp_path: Path) -> None:
    tools = _tools(
        tmp_path / "bin", 'echo "ERROR: Please run nvidia-bug-report.sh as root."\nexit 1\n'
    )
    ran = run_tool([str(tools / "nvidia-bug-report.sh")], 10)
    assert ran.data == b""
    assert ran.why.endswith("exited 1: ERROR: Please run nvidia-bug-report.sh as root.")
    assert run_tool(["no-such-tool-here"], 10).why == "no-such-tool-here not found"


def test_the_archive_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(OutputError, match="--evidence"):
        write_evidence(_xid_failure(), "gpu07", blocker / "under", kernel_log=lambda: (None, "-"))
    directory = tmp_path / "evidence"
    directory.mkdir()
    first = write_evidence(_xid_failure(), "gpu07", directory, kernel_log=lambda: (None, "-"))
    second = write_evidence(_xid_failure(), "gpu07", directory, kernel_log=lambda: (None, "-"))
    assert first.path != second.path  # a second failure of the same run never replaces the first
    assert sorted(p.name for p in directory.iterdir()) == sorted(
        [first.path.name, second.path.name]
    )
    with tarfile.open(first.path) as tar:  # a complete gzip'd tar
        assert "MANIFEST.json" in tar.getnames()
    identity = json.loads(_members(first.path)["identity.json"])
    assert identity["gpus"][0]["serial"] == "1652823051234"
    assert identity["named_by_findings"] == ["PCI 0000:cb:00"]
    assert identity["action"] == "reboot-node"


def test_a_bug_report_without_gzip_and_a_broken_one(tmp_path: Path) -> None:
    plain = (
        'while [ "$1" != "" ]; do case $1 in --output-file ) out="$2"; shift ;; esac; shift; done\n'
    )
    tools = _tools(tmp_path / "bin", plain + 'echo "plain log" > "$out"\n')
    old_path = os.environ["PATH"]
    os.environ["PATH"] = f"{tools}{os.pathsep}{old_path}"
    try:
        got = collect(_xid_failure(), "gpu07", kernel_log=lambda: (None, "-"))
        assert got.members["nvidia-bug-report.log"] == b"plain log\n"
        (tools / "nvidia-bug-report.sh").write_text(
            "#!/bin/sh\n" + plain + 'echo "not gzip" > "$out.gz"\n'
        )
        broken = collect(_xid_failure(), "gpu07", kernel_log=lambda: (None, "-"))
    finally:
        os.environ["PATH"] = old_path
    assert broken.missing["nvidia-bug-report.log"].startswith(
        "nvidia-bug-report.sh's log unreadable"
    )


def test_under_a_launcher_the_evidence_option_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Across nodes each node's report is its own; the archive is collected per node by a
    one-node run (not yet by the multi-node one): refused before any work, not ignored."""
    for key, value in {
        "WORLD_SIZE": "2",
        "RANK": "0",
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500",
    }.items():
        monkeypatch.setenv(key, value)
    result = CliRunner().invoke(
        app, ["accept", "--device", "cpu", "--evidence", str(tmp_path / "e")]
    )
    assert result.exit_code == 2, result.output
    assert "--evidence is for one node: under torchrun" in result.stderr
    assert not (tmp_path / "e").exists()
