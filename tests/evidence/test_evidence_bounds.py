"""The evidence archive's guarantees (issue #49 §7): no planted credential survives in any member,
the manifest included, while the diagnostics the vendor needs come through; every member is
bounded, and so is the whole archive, and every cut and every member left out is said in the
manifest."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.evidence import bundle as evidence
from gpuaccept.evidence.bundle import Collected, archive, collect
from gpuaccept.evidence.scrub import REDACTED
from tests.evidence.planted_secrets import DETECTOR_SAMPLES, DIAGNOSTICS, MORE_FORMS, TWELVE_FORMS
from tests.evidence.test_evidence import _xid_failure
from tests.kernel_stamps import recent
from tests.run_reports import rejudged

PLANTED = [*DETECTOR_SAMPLES.values(), *((line, s) for _, line, s in TWELVE_FORMS + MORE_FORMS)]
SECRETS = [secret for _, secret in PLANTED]
PLANTED_TEXT = "\n".join(line for line, _ in PLANTED) + "\n"
XID = "[  100.000000] NVRM: Xid (PCI:0008:01:00): 79, pid=1, GPU has fallen off the bus."


def _tool(directory: Path, name: str, body: str) -> None:
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def _stand_ins(directory: Path, smi: str, bug_report: str) -> Path:
    """nvidia-smi printing the file `smi`, nvidia-bug-report.sh gzipping the file `bug_report`
    to its --output-file, as the driver's script does."""
    _tool(directory, "nvidia-smi", f"cat {smi}\n")
    _tool(
        directory,
        "nvidia-bug-report.sh",
        'while [ "$1" != "" ]; do case $1 in --output-file ) out="$2"; shift ;; esac; shift; '
        f'done\ngzip -c {bug_report} > "$out.gz"\n',
    )
    return directory


def _members(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]


def test_no_planted_secret_survives_in_any_member(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every kind detect-secrets knows and every form of issue #49, planted in each source the
    archive reads (the report's environment, the kernel log around an XID, nvidia-smi -q,
    NVIDIA's bug report, DCGM's details, a refusing tool's last line): none is in any member,
    and each diagnostic line comes through whole in the members that held it."""
    diagnostics = "\n".join(DIAGNOSTICS) + "\n"
    smi = tmp_path / "smi.txt"
    smi.write_text(diagnostics + PLANTED_TEXT)
    bug = tmp_path / "bug.log"
    bug.write_text("nvidia-bug-report.sh Version: 1\n" + PLANTED_TEXT + diagnostics)
    tools = _stand_ins(tmp_path / "bin", str(smi), str(bug))
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    report = _xid_failure()
    dcgm = report.checks[0].model_copy(
        update={"name": "dcgm", "details": {"planted": [line for line, _ in PLANTED]}}
    )
    report = rejudged(
        report,
        checks=[*report.checks, dcgm],
        environment={**report.environment, "planted": PLANTED_TEXT, "argv": TWELVE_FORMS[5][1]},
    )
    kernel = "\n".join(f"[  99.{i:06d}] {line}" for i, line in enumerate(PLANTED_TEXT.splitlines()))
    members = _members(
        archive(collect(report, "gpu07", kernel_log=lambda: (f"{kernel}\n{XID}\n", "test")))
    )
    assert {"report.json", "kernel-xid.log", "nvidia-smi-q.txt", "nvidia-bug-report.log"} <= set(
        members
    )
    assert "dcgm.json" in members
    through = [
        (name, secret)
        for name, data in members.items()
        for secret in SECRETS
        if secret.encode() in data
    ]
    assert through == []
    for name in ("nvidia-smi-q.txt", "nvidia-bug-report.log"):
        lines = members[name].decode().splitlines()
        assert [d for d in DIAGNOSTICS if d not in lines] == [], name
    assert XID in members["kernel-xid.log"].decode()
    manifest = json.loads(members["MANIFEST.json"])
    assert manifest["credentials_scrubbed"] >= 3 * len(PLANTED)
    assert set(DETECTOR_SAMPLES) <= set(manifest["credentials_by_kind"])
    assert manifest["scrubber"]["detector"].startswith("detect-secrets ")
    assert set(DETECTOR_SAMPLES) <= set(manifest["scrubber"]["plugins"])


def test_a_refusing_tools_last_line_is_scrubbed_in_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tmp_path / "bin"
    _tool(tools, "nvidia-smi", "echo 'failed: token=Zx8Yw7Vu6Ts5Rq4Po3'\nexit 9\n")
    _tool(tools, "nvidia-bug-report.sh", "exit 1\n")
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    got = collect(_xid_failure(), "gpu07", kernel_log=lambda: (None, "-"))
    assert got.missing["nvidia-smi-q.txt"] == f"nvidia-smi exited 9: failed: token={REDACTED}"
    assert b"Zx8Yw7Vu6Ts5Rq4Po3" not in archive(got)


def test_nvidia_smi_past_its_bound_is_cut_at_a_whole_line_and_said_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #49: an `nvidia-smi -q` cut at its bound was not said to be cut."""
    monkeypatch.setattr(evidence, "MAX_MEMBER_BYTES", 4096)
    smi = tmp_path / "smi.txt"
    smi.write_text("".join(f"    Serial Number : {i:013d}\n" for i in range(1000)))
    bug = tmp_path / "bug.log"
    bug.write_text("short\n")
    monkeypatch.setenv(
        "PATH", f"{_stand_ins(tmp_path / 'bin', str(smi), str(bug))}:{os.environ['PATH']}"
    )
    got = collect(_xid_failure(), "gpu07", kernel_log=lambda: (None, "-"))
    data = got.members["nvidia-smi-q.txt"]
    assert len(data) <= 4096
    body, mark = data.decode().rsplit("\n[gpuaccept", 1)
    assert all(
        line.startswith("    Serial Number : ") and len(line) == 33 for line in body.splitlines()
    )
    assert mark.startswith(": the rest was cut")
    size = smi.stat().st_size
    assert got.cut["nvidia-smi-q.txt"] == (
        f"cut at {len(body) + 1} bytes of {size}: over the member's bound of 0.00390625 MiB"
    )
    assert "nvidia-bug-report.log" not in got.cut
    manifest = json.loads(_members(archive(got))["MANIFEST.json"])
    assert manifest["cut"] == got.cut


def test_a_bug_report_past_its_bound_is_cut_and_said_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(evidence, "MAX_BUG_REPORT_BYTES", 2048)
    smi = tmp_path / "smi.txt"
    smi.write_text("ok\n")
    bug = tmp_path / "bug.log"
    bug.write_text("".join(f"line {i:04d} of the bug report\n" for i in range(500)))
    monkeypatch.setenv(
        "PATH", f"{_stand_ins(tmp_path / 'bin', str(smi), str(bug))}:{os.environ['PATH']}"
    )
    got = collect(_xid_failure(), "gpu07", kernel_log=lambda: (None, "-"))
    assert len(got.members["nvidia-bug-report.log"]) <= 2048
    assert got.cut["nvidia-bug-report.log"].startswith("cut at ")
    assert (
        " bytes of more than 2048: over the member's bound of " in got.cut["nvidia-bug-report.log"]
    )


def test_the_archive_bound_cuts_then_leaves_out_and_says_both() -> None:
    got = Collected(archive_bytes=3000)
    got.text("a.txt", "x" * 99 + "\n")  # 100 bytes
    got.text("b.txt", "".join(f"{i:09d}\n" for i in range(400)))  # 4000 bytes: cut to the room
    got.text("c.txt", "more than the room left\n" * 10)  # no room left: left out
    assert sum(len(m) for m in got.members.values()) <= 3000
    assert got.members["a.txt"] == b"x" * 99 + b"\n"
    assert got.cut["b.txt"].endswith("the archive's bound of 0.00286102 MiB was reached")
    assert got.cut["b.txt"].startswith("cut at ")
    assert got.missing["c.txt"].startswith("not kept: ")
    assert "c.txt" not in got.members
    assert got.members["b.txt"].endswith(b"[gpuaccept: the rest was cut; MANIFEST.json says why]\n")


def test_a_member_not_scrubbed_in_time_is_cut_never_passed_on() -> None:
    got = Collected(scrub_seconds=0.0)
    got.text("slow.txt", "".join(f"password={i}\n" for i in range(2000)))
    assert "slow.txt" not in got.members or b"password=1999" not in got.members["slow.txt"]
    said = got.cut.get("slow.txt") or got.missing["slow.txt"]
    assert "scrubbing ran past the archive's" in said


def test_accept_says_what_it_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: the console says the cut as the manifest does."""
    monkeypatch.setattr(evidence, "MAX_MEMBER_BYTES", 4096)
    smi = tmp_path / "smi.txt"
    smi.write_text("".join(f"    Serial Number : {i:013d}\n" for i in range(1000)))
    bug = tmp_path / "bug.log"
    bug.write_text("short\n")
    tools = _stand_ins(tmp_path / "bin", str(smi), str(bug))
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    log = tmp_path / "kernel.log"
    log.write_text(recent(XID) + "\n")
    monkeypatch.setenv("GPUACCEPT_KERNEL_LOG", str(log))
    argv = ["accept", "--device", "cpu", "--no-history", "--only", "events"]
    result = CliRunner().invoke(app, [*argv, "--evidence", str(tmp_path / "e")])
    assert result.exit_code == 1, result.output
    said = next(line for line in result.output.splitlines() if line.startswith("[EVIDENCE] cut: "))
    assert "nvidia-smi-q.txt: cut at " in said  # report.json too, at this bound
