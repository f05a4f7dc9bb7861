"""A real Prometheus server (Debian's `prometheus` package) scrapes `gpuaccept watch` on loopback:
both are started and stopped by the test, and the server's own query API must answer with the
watch's figures and findings."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.checks.conftest import h100_sxm
from tests.commands.test_watch import HW_POWER_BRAKE, _start, metrics_url

pytestmark = pytest.mark.service


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _query(port: int, expression: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
    try:
        answer = json.loads(urllib.request.urlopen(url, timeout=5).read())
    except OSError:
        return []  # not listening yet
    assert answer["status"] == "success", answer
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def test_prometheus_scrapes_the_watch_and_answers_with_its_brake_and_finding(
    tmp_path: Path,
) -> None:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("no prometheus binary here (Debian: apt-get install prometheus)")
    watch = _start(tmp_path, {"gpus": [h100_sxm(throttle=HW_POWER_BRAKE)]}, "--no-history")
    server = None
    try:
        target = urllib.parse.urlsplit(metrics_url(watch)).netloc
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: gpuaccept-watch\n"
            f"    static_configs:\n      - targets: ['{target}']\n"
        )
        port = _free_port()
        server = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        brake: list[dict[str, Any]] = []
        failing: list[dict[str, Any]] = []
        while not (brake and failing):
            assert server.poll() is None, server.stderr.read() if server.stderr else ""
            assert time.monotonic() < deadline, "Prometheus never answered with the watch's series"
            time.sleep(0.5)
            brake = _query(port, 'gpuaccept_watch_gpu_hw_power_brake{job="gpuaccept-watch"} == 1')
            failing = _query(port, 'gpuaccept_watch_findings{severity="fail"}')
        assert brake[0]["metric"]["uuid"] == "GPU-00000000-0000-0000-0000-000000000000"
        assert failing[0]["metric"]["check"] == "health"
        [up] = _query(port, 'up{job="gpuaccept-watch"}')
        assert up["value"][1] == "1"
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        watch.send_signal(signal.SIGTERM)
        watch.communicate(timeout=20)
    assert watch.returncode == 0
