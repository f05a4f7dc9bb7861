"""Slurm's side of `act` (issue #31): the nodes as `sinfo` shows them, and `scontrol` to drain or
resume one. Every call is bounded: a controller that does not answer must not hold a health check
for ever (slurmd runs the next one at the next HealthCheckInterval)."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import datetime

from gpuaccept.act.policy import Decision, SchedNode
from gpuaccept.errors import EnvironmentProblem

TIMEOUT_SECONDS = 60.0
# %E last: a reason may hold any character but a newline; %H: when the reason was set
_FORMAT = "%N|%T|%H|%E"


def _run(command: list[str]) -> str:
    if shutil.which(command[0]) is None:
        raise EnvironmentProblem(
            f"{command[0]} not found: acting on Slurm needs its client commands"
        )
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
            # ISO 8601 times whatever the site's default
            env={**os.environ, "SLURM_TIME_FORMAT": "standard"},
            check=False,
        )
    except subprocess.TimeoutExpired:
        said = f"{' '.join(command[:2])} took over {TIMEOUT_SECONDS:g} s"
        raise EnvironmentProblem(f"{said}: the controller did not answer") from None
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise EnvironmentProblem(f"{' '.join(command[:2])} failed: {said}")
    return done.stdout


def parse_sinfo(text: str) -> list[SchedNode]:
    """Nodes from `sinfo -h -N -o '%N|%T|%H|%E'` (a node in several partitions once)."""
    nodes: dict[str, SchedNode] = {}
    for line in text.splitlines():
        parts = line.split("|", 3)
        if len(parts) != 4 or not parts[0]:
            continue
        name, state, stamp, reason = parts
        try:
            when: datetime | None = datetime.fromisoformat(stamp)
        except ValueError:  # "Unknown", "n/a": no reason set
            when = None
        reason = "" if reason.strip() == "none" else reason.strip()
        # "drained", "draining", "drain", "drained*"; DRAIN on a down node shows as "down*+drain"
        drained = "drain" in state.lower()
        nodes.setdefault(name, SchedNode(name, drained, reason, when))
    return list(nodes.values())


def read_nodes(partition: str | None = None) -> list[SchedNode]:
    command = ["sinfo", "-h", "-N", "-o", _FORMAT]
    if partition:
        command += ["-p", partition]
    return parse_sinfo(_run(command))


def carry_out(decision: Decision) -> None:
    """Drain or resume the node as decided (nothing for the other actions)."""
    if decision.action == "drain":
        _run(
            [
                "scontrol",
                "update",
                f"NodeName={decision.node}",
                "State=DRAIN",
                f"Reason={decision.reason}",
            ]
        )
    elif decision.action == "resume":
        _run(["scontrol", "update", f"NodeName={decision.node}", "State=RESUME"])
