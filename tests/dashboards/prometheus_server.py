"""A real node_exporter reading a textfile directory, scraped every second by a real Prometheus
(Debian's prometheus and prometheus-node-exporter), on loopback ports of their own: the wiring
docs/dashboards.md describes, for the dashboard's service test and its screenshot."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PROMETHEUS = shutil.which("prometheus")
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def query(port: int, expr: str) -> list[dict[str, Any]]:
    """An instant query's result vector (Prometheus's HTTP API, /api/v1/query)."""
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as answer:
        body = json.loads(answer.read())
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


@contextmanager
def serving(textfiles: Path, work: Path, ready: tuple[str, ...]) -> Iterator[int]:
    """Prometheus's port once every query of `ready` has an answer; both stopped after."""
    assert PROMETHEUS is not None
    assert NODE_EXPORTER is not None
    work.mkdir(parents=True, exist_ok=True)
    exporter_port, port = free_port(), free_port()
    target = f"127.0.0.1:{exporter_port}"
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "node", "static_configs": [{"targets": [target]}]}],
    }
    (work / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
    with (work / "log").open("w") as log:
        started = [
            subprocess.Popen(
                [
                    NODE_EXPORTER,
                    f"--web.listen-address={target}",
                    "--collector.disable-defaults",
                    "--collector.textfile",
                    f"--collector.textfile.directory={textfiles}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            ),
            subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={work / 'prometheus.yml'}",
                    f"--storage.tsdb.path={work / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            ),
        ]
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if all(query(port, expr) for expr in ready):
                        break
                except OSError:
                    pass
                assert time.monotonic() < deadline, (work / "log").read_text()[-3000:]
                time.sleep(0.5)
            yield port
        finally:
            for process in started:
                process.terminate()
            for process in started:
                process.wait(timeout=30)
