"""What `act slurm` and `node-verdict` decided, kept where operators look (issue #31 §2: a refusal
is loud on stderr, in a record, in a metric and in its own exit code).

- `--record FILE`: one JSON document: when, the mode, and each node's verdict, recommended action,
  decision (drain, resume, none, refused), the guard that refused it (breaker, regression,
  not-ours) and
  why, the reason a drain set.
- `--prometheus FILE`: node_exporter textfile metrics (prometheus-client's exposition, written
  atomically): `gpuaccept_act_decision` and `gpuaccept_act_refused` as state sets (one series per
  state, 1 on the current one, so a series keeps its identity when a decision flips) and
  `gpuaccept_act_time_seconds`. An alert on `gpuaccept_act_refused{guard="breaker"} == 1` sees
  every refusal of every node that exports it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from gpuaccept.act.policy import GUARDS, Decision

DECISIONS = ("drain", "resume", "none", "refused")


def guard_of(decision: Decision) -> str | None:
    """The guard that refused: the breaker, the regression rule, or not-ours (someone else holds
    the node)."""
    if decision.action != "refused":
        return None
    return decision.guard or ("regression" if decision.regression else "breaker")


@dataclass(frozen=True)
class Acted:
    """One node's decision, as recorded."""

    node: str
    verdict: str  # pass, fail, not-judged
    level: str
    recommended: str  # the report's recommended action (replace for a repeat offender)
    decision: str  # drain, resume, none, refused
    guard: str | None
    why: str
    reason: str  # the drain's reason ("" unless drained)
    stack: str | None = None  # the stack a regression refusal names


def acted(node: str, verdict: str, level: str, recommended: str, decision: Decision) -> Acted:
    return Acted(
        node,
        verdict,
        level,
        recommended,
        decision.action,
        guard_of(decision),
        decision.why,
        decision.reason,
        decision.regression,
    )


def render_record(decided: list[Acted], tool: str, mode: str, at: datetime) -> str:
    return (
        json.dumps(
            {
                "tool": tool,
                "mode": mode,
                "at": at.astimezone(UTC).isoformat(timespec="seconds"),
                "refused": sum(a.decision == "refused" for a in decided),
                "decisions": [asdict(a) for a in decided],
            },
            indent=2,
        )
        + "\n"
    )


class _ActCollector(Collector):
    def __init__(self, decided: list[Acted], tool: str, mode: str, at: datetime) -> None:
        self.decided, self.tool, self.mode, self.at = decided, tool, mode, at

    def collect(self) -> Iterator[Metric]:
        labels = ["tool", "mode", "node"]
        decision = GaugeMetricFamily(
            "gpuaccept_act_decision",
            "What gpuaccept decided for the node, as a state set: 1 on the decision made",
            labels=[*labels, "decision"],
        )
        refused = GaugeMetricFamily(
            "gpuaccept_act_refused",
            "1 on the guard that refused to change the node (breaker: too many nodes at once; "
            "regression: several nodes on one software stack failed alike; not-ours: someone "
            "else holds the node: down, failed, in maintenance, reserved, rebooting, drained, "
            "cordoned or tainted by another)",
            labels=[*labels, "guard"],
        )
        when = GaugeMetricFamily(
            "gpuaccept_act_time_seconds", "When the decision was made (Unix time)", labels=labels
        )
        for a in self.decided:
            values = [self.tool, self.mode, a.node]
            for state in DECISIONS:
                decision.add_metric([*values, state], float(a.decision == state))
            for guard in GUARDS:
                refused.add_metric([*values, guard], float(a.guard == guard))
            when.add_metric(values, self.at.timestamp())
        yield from (decision, refused, when)


def render_metrics(decided: list[Acted], tool: str, mode: str, at: datetime) -> str:
    registry = CollectorRegistry()
    registry.register(_ActCollector(decided, tool, mode, at))
    return generate_latest(registry).decode("utf-8")


def write_outputs(
    decided: list[Acted],
    tool: str,
    mode: str,
    at: datetime,
    record: Path | None,
    prometheus: Path | None,
) -> None:
    """Both outputs, each written whole or not at all (OutputError otherwise)."""
    from gpuaccept.output_files import write_text_atomically

    if record is not None:
        write_text_atomically(record, render_record(decided, tool, mode, at), "--record")
    if prometheus is not None:
        write_text_atomically(prometheus, render_metrics(decided, tool, mode, at), "--prometheus")
