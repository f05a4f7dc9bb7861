"""Slurm's side of `act` (issue #31): the nodes as `sinfo` shows them, and `scontrol` to drain or
resume one. Every call is bounded: a controller that does not answer must not hold a health check
for ever (slurmd runs the next one at the next HealthCheckInterval)."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

from gpuaccept.act.policy import Decision, Guard, SchedNode, is_own_reason
from gpuaccept.act.rounds import NodeRun
from gpuaccept.errors import EnvironmentProblem

TIMEOUT_SECONDS = 60.0
# `sinfo -O` fields (long format). StateComplete is the base state and every flag, as
# `scontrol show node` prints it (SchedMD/slurm at 284c3b95, src/sinfo/print.c:1097
# _print_state_complete -> src/common/slurm_protocol_defs.c:3648 node_state_string_complete);
# `%T` (node_state_string, :3685) folds flags away: a DOWN node with DRAIN reads "drained" and
# a drained node in maintenance "drained$". Reason last: it may hold any character but a newline.
# Each field is padded to its width and ended by "|".
_FORMAT = "NodeList:256|,StateComplete:256|,Timestamp:64|,Reason:1024"
# The base states (slurm_protocol_defs.c:121-129 node_states[]) in which a node serves jobs
IN_SERVICE_BASES = frozenset({"idle", "mixed", "allocated"})
# Flags (slurm_protocol_defs.c:131-153 node_state_flags[]) that leave a node in service: a job
# completing, a cloud or dynamic node's nature, a planned backfill. Every other flag (FAIL,
# MAINTENANCE, RESERVED, REBOOT_REQUESTED/ISSUED, NOT_RESPONDING, the POWER_* ones, INVALID_REG,
# BLOCKED, ...), known today or added later, means someone else holds the node.
TOLERATED_FLAGS = frozenset({"completing", "cloud", "dynamic_norm", "planned"})


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


def held_by(state: str, drained: bool, reason: str) -> str:
    """Why a node in `state` (StateComplete: `base+flag+...`, lower case; a trailing `*` is
    NOT_RESPONDING) is not gpuaccept's to change; "" when it is in service or gpuaccept's drain."""
    words = state.strip().lower().split("+")
    base, flags = words[0], set(words[1:])
    if base.endswith("*"):
        base, flags = base[:-1], flags | {"not_responding"}
    others = sorted(flags - TOLERATED_FLAGS - {"drain"})
    if base not in IN_SERVICE_BASES or others:
        return f"Slurm shows it {state.strip().upper()}"
    if drained and not is_own_reason(reason):
        return f"drained by someone else ({reason or 'no reason'})"
    return ""


def parse_sinfo(text: str) -> list[SchedNode]:
    """Nodes from `sinfo -h -N -O` with _FORMAT (a node in several partitions once)."""
    nodes: dict[str, SchedNode] = {}
    for line in text.splitlines():
        parts = [part.strip() for part in line.split("|", 3)]
        if len(parts) != 4 or not parts[0]:
            continue
        name, state, stamp, reason = parts
        try:
            when: datetime | None = datetime.fromisoformat(stamp)
        except ValueError:  # "Unknown", "n/a": no reason set
            when = None
        reason = "" if reason == "none" else reason
        drained = "drain" in state.lower().split("+")
        held = held_by(state, drained, reason)
        nodes.setdefault(name, SchedNode(name, drained, reason, when, held=held))
    return list(nodes.values())


def read_nodes(partition: str | None = None, node: str | None = None) -> list[SchedNode]:
    command = ["sinfo", "-h", "-N", "-O", _FORMAT]
    if partition:
        command += ["-p", partition]
    if node:
        command += ["-n", node]
    return parse_sinfo(_run(command))


def still_as_decided(decision: Decision) -> str:
    """ "" when the node is still as the decision found it, read again just before acting (an
    administrator may have taken it down since); else what changed."""
    found = [n for n in read_nodes(node=decision.node) if n.name == decision.node]
    if not found:
        return "Slurm no longer lists it"
    now = found[0]
    if decision.action == "drain" and (now.drained or now.held):
        return now.held or f"drained meanwhile ({now.reason or 'no reason'})"
    if decision.action == "resume" and not now.drained_by_gpuaccept:
        return now.held or "no longer drained by gpuaccept"
    return ""


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


def requeue(job: str) -> None:
    """Put a job back in the queue, not held (`scontrol requeue`, not `requeuehold`): the
    preflight's way to keep a job off a node it failed, where a Prolog's own non-zero exit
    requeues it held (SchedMD/slurm at 284c3b95, doc/man/man5/slurm.conf.5:3717-3720). slurmd
    launches no batch job whose credential was revoked while its prolog ran
    (src/slurmd/slurmd/req.c:2223-2231, "already killed, do not launch batch job")."""
    try:
        _run(["scontrol", "requeue", job])
    except EnvironmentProblem:
        # another node of the job's gang requeued it first: slurmctld refuses a second requeue,
        # and the job is off this node all the same unless it still runs (job_state_string,
        # src/common/slurm_protocol_defs.c:2894-2926 at 284c3b95: COMPLETING, REQUEUED,
        # PENDING as a requeue goes; CONFIGURING while nodes boot)
        shown = _run(["scontrol", "show", "job", "-o", job])
        fields = dict(f.split("=", 1) for f in shown.split() if "=" in f)
        if fields.get("JobState", "RUNNING") in ("RUNNING", "CONFIGURING"):
            raise


def act_on_node(
    run: NodeRun,
    guard: Guard,
    state: Path,
    mode: str,
    partition: str | None = None,
) -> tuple[Decision, str]:
    """One node's round against Slurm and gpuaccept's records (act.rounds): `shadow` decides and
    changes nothing; `enforce` decides, carries the decision out and keeps the records, under
    the records' lock. Returns the decision and, where the node changed between the decision and
    the act (re-read just before: an administrator took it down), what changed: then nothing is
    done."""
    from gpuaccept.act.ledger import load_ledger, lock_ledger, save_ledger
    from gpuaccept.act.rounds import decide_round

    if mode != "enforce":
        nodes = read_nodes(partition)
        _known(run.node, nodes, partition)
        done = decide_round([run], nodes, load_ledger(state), datetime.now(), guard)
        return done.decisions[0], ""
    with lock_ledger(state):
        ledger = load_ledger(state)
        nodes = read_nodes(partition)
        _known(run.node, nodes, partition)
        done = decide_round([run], nodes, ledger, datetime.now(), guard)
        decision = done.decisions[0]
        changed = still_as_decided(decision) if decision.action in ("drain", "resume") else ""
        if not changed:
            carry_out(decision)
        # a drain not made is not recorded as made (the breaker would count it)
        if not changed and done.ledger != ledger:
            save_ledger(state, done.ledger)
    return decision, changed


def _known(name: str, nodes: list[SchedNode], partition: str | None) -> None:
    from gpuaccept.errors import InputError

    if not any(n.name == name for n in nodes):
        where = f" in partition {partition}" if partition else ""
        raise InputError(f"node {name} is not among Slurm's nodes{where}: give --node")
