"""What a PromQL expression names (metrics, label matchers, grouping labels), checked against the
series a set of textfiles really holds. A reading of PromQL's surface good enough for the
dashboard's own queries, not a parser: Prometheus's parser (promtool) checks their syntax in
tests/dashboards/test_grafana_dashboard.py."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

# node_exporter's own metric for a textfile it could not read (collector/textfile.go, the
# "node_textfile_scrape_error" gauge, prometheus/node_exporter a7dcc3a0 line 277): no labels.
NODE_EXPORTER = {"node_textfile_scrape_error": {}}

_SELECTOR = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_METRIC = re.compile(r"\b((?:gpuaccept|node)_[a-zA-Z0-9_]+)\b")
_LEGEND = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")


@dataclass
class Written:
    """Each metric name with its labels and the values seen for each."""

    series: dict[str, dict[str, set[str]]] = field(default_factory=dict)

    @classmethod
    def from_textfiles(cls, paths: Iterable[Path]) -> Written:
        written = cls({name: dict(labels) for name, labels in NODE_EXPORTER.items()})
        for path in paths:
            for family in text_string_to_metric_families(path.read_text()):
                for sample in family.samples:
                    labels = written.series.setdefault(sample.name, {})
                    for label, value in sample.labels.items():
                        labels.setdefault(label, set()).add(value)
        return written

    def labels_of(self, names: Iterable[str]) -> set[str]:
        return {label for name in names for label in self.series.get(name, {})}


def metrics_in(expr: str) -> set[str]:
    return set(_METRIC.findall(expr))


def problems(expr: str, written: Written, legend: str | None = None) -> list[str]:
    """Everything `expr` (and its legend) names that the written series do not hold."""
    found: list[str] = []
    names = metrics_in(expr)
    found += [f"metric {name} is not written" for name in sorted(names - set(written.series))]
    for name, body in _SELECTOR.findall(expr):
        labels = written.series.get(name)
        if labels is None:
            found.append(f"selector of {name}, which is not written")
            continue
        rest = _MATCHER.sub("", body).strip()
        if rest:
            found.append(f"{name}{{{body}}}: cannot read {rest!r}")
        for label, op, value in _MATCHER.findall(body):
            if label not in labels:
                found.append(f"{name} has no label {label}")
                continue
            wanted = [value] if op in ("=", "!=") else value.split("|")
            if op in ("=~", "!~") and not all(re.fullmatch(r"[\w-]+", w) for w in wanted):
                continue  # a real pattern (.*, a variable's): any value may match
            for one in wanted:
                if one not in labels[label]:
                    found.append(f'{name}{{{label}{op}"{one}"}}: {one!r} is never written')
    known = written.labels_of(names)
    for clause, inside in _GROUPING.findall(expr):
        for label in filter(None, (part.strip() for part in inside.split(","))):
            if label not in known:
                found.append(f"{clause} ({label}): no metric of the expression has it")
    for label in _LEGEND.findall(legend or ""):
        if label not in known:
            found.append(f"legend {{{{{label}}}}}: no metric of the expression has it")
    return found
