"""A 50-node Slurm for `act slurm`: tests/fake_slurm's sinfo and scontrol over a state file."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import pytest

FAKES = Path(__file__).resolve().parents[1] / "fake_slurm"


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "slurm.json"
    state.write_text(json.dumps({"nodes": {f"gpu{i:02d}": {"state": "idle"} for i in range(50)}}))
    monkeypatch.setenv("FAKE_SLURM_STATE", str(state))
    monkeypatch.setenv("FAKE_SLURM_NOW", datetime.now().isoformat(timespec="seconds"))
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    return state
