"""`accept --rules FILE` end to end (issue #31 §1); kept apart from tests/test_actions.py, which
the mutation run selects: an in-process `accept` cannot run under mutmut."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from gpuaccept.cli import app


def test_accept_plans_with_the_sites_rules_and_refuses_a_bad_file(tmp_path: Path) -> None:
    good = tmp_path / "rules.toml"
    good.write_text('[check.stack]\nfail = "replace"\n')
    runner = CliRunner()
    base = ["accept", "--device", "cpu", "--no-history", "--only", "stack", "--json"]
    done = runner.invoke(app, [*base, "--rules", str(good)])
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["actions"]["rules"].startswith("site rules.toml (sha256 ")
    assert report["actions"]["action"] == "none"
    bad = tmp_path / "bad.toml"
    bad.write_text('[check.stack]\nfail = "reboot-cluster"\n')
    refused = runner.invoke(app, [*base, "--rules", str(bad)])
    assert refused.exit_code == 2
    assert f"rules {bad}: check.stack.fail" in refused.output
