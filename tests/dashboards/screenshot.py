"""No Grafana can be had offline here (not on PyPI, npm or Debian), so this is the honest
stand-in for a screenshot of the dashboard: the sample fleet's textfiles read by a real
node_exporter, scraped by a real Prometheus, and several of the dashboard's panel queries as
Prometheus's own web page shows their answers, rendered by headless Chromium.

    .venv/bin/python -m tests.dashboards.screenshot OUT.png

Needs Debian's prometheus, prometheus-node-exporter and chromium."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import urllib.parse
from datetime import UTC, datetime
from pathlib import Path

from tests.dashboards.prometheus_server import serving
from tests.dashboards.sample_fleet import write_sample_fleet
from tests.dashboards.test_grafana_dashboard import _panel_query

PANELS = (
    ("Nodes by verdict", "A"),
    ("Nodes to act on, most severe first", "A"),
    ("Checks that did not pass, with their action", "A"),
    ("Lagging figures: below their reference's floor", "C"),
    ("Refused by a guard", "A"),
    ("Nodes by MTBI, the shortest first", "A"),
)


def main(out: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        sys.exit("no chromium on PATH (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        fleet = write_sample_fleet(work / "textfiles", datetime.now(UTC))
        ready = ("gpuaccept_run_passed", "gpuaccept_act_time_seconds", "gpuaccept_fleet_mtbi_hours")
        with serving(fleet.directory, work / "prometheus", ready) as port:
            params: dict[str, str] = {}
            for i, (title, ref) in enumerate(PANELS):
                params |= {f"g{i}.expr": _panel_query(title, ref), f"g{i}.tab": "1"}
            page = f"http://127.0.0.1:{port}/graph?" + urllib.parse.urlencode(params)
            subprocess.run(
                [
                    browser,
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--hide-scrollbars",
                    f"--user-data-dir={work / 'profile'}",
                    "--window-size=1400,2350",
                    "--virtual-time-budget=10000",
                    f"--screenshot={out.resolve()}",
                    page,
                ],
                check=True,
                capture_output=True,
                timeout=120,
            )
    print(out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.dashboards.screenshot OUT.png")
    main(Path(sys.argv[1]))
