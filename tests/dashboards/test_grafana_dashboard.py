"""The Grafana dashboard over gpuaccept's textfile metrics (grafana/gpuaccept-fleet.json, issue #53
§4): valid against Grafana's own dashboard schema offline (tests/dashboards/grafana_schema/,
SOURCE.md says what and whence); every metric, label and label value its queries name is one
gpuaccept's writers really write (their output parsed with prometheus_client's parser); every
query parsed by Prometheus's own parser (promtool); and, as a service test, a real node_exporter
reading the sample fleet's textfiles, scraped by a real Prometheus, answering each panel's query
with what the fleet holds."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator
from jsonschema.exceptions import ValidationError

from tests.dashboards.prometheus_server import NODE_EXPORTER, PROMETHEUS, query, serving
from tests.dashboards.promql_names import Written, metrics_in, problems
from tests.dashboards.sample_fleet import SampleFleet, write_sample_fleet

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "grafana" / "gpuaccept-fleet.json"
SCHEMAS = Path(__file__).parent / "grafana_schema"
PANEL_TYPES = ("stat", "table", "bargauge", "timeseries")
# "When Prometheus scrapes a target, it attaches some labels automatically ...: job, instance"
# (https://prometheus.io/docs/concepts/jobs_instances, "Automatically generated labels"): the
# tables hide them, the node label names the node.
TARGET_LABELS = {"job", "instance"}

# What each template variable stands for when a query is checked: every value (Grafana sends a
# multi-value "All" as the allValue, ".*"), or a default of the variable's own options.
VARIABLES = {"node": ".*", "level": ".*", "metric": ".*", "stale_days": "7", "bottom": "20"}


def _load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SCHEMAS / f"{name}.jsonschema.json").read_text())
    return loaded


def _corrected(name: str) -> dict[str, Any]:
    """The vendored schema with the three corrections SOURCE.md names, each where the generated
    JSON Schema is stricter than Grafana's own CUE and TypeScript types."""
    schema = copy.deepcopy(_load(name))
    definitions = schema["definitions"]
    if name == "dashboard":
        # grafana/grafana kinds/dashboard/dashboard_kind.cue (2c08c51b): "options?: _" in
        # #MatcherConfig; @grafana/schema 13.2.3 dist/types/raw/dashboard/x/types.gen.d.ts:934
        # "options?: unknown" (a byName matcher's options is the field's name, a string) and
        # :901 an override property's "value?: unknown" (a unit is a string).
        definitions["MatcherConfig"]["properties"]["options"] = {}
        definitions["DynamicConfigValue"]["properties"]["value"] = {}
    if name == "table":
        # grafana/grafana packages/grafana-schema/src/common/table.cue (b90bb10d) line 39:
        # "type: TableCellDisplayMode & \"auto\"", one constant per variant of TableCellOptions
        # (line 103); the generated schema kept only the enum, so every value matched many.
        for variant in definitions["TableCellOptions"]["oneOf"]:
            target = definitions[variant["$ref"].rsplit("/", 1)[1]]
            target["properties"]["type"] = {"const": target["properties"]["type"]["default"]}
    return schema


def _validator(name: str, definition: str) -> Draft7Validator:
    return Draft7Validator({**_corrected(name), "$ref": f"#/definitions/{definition}"})


def schema_errors(dashboard: dict[str, Any]) -> list[str]:
    """Every place where `dashboard` breaks Grafana's schema: the dashboard as a whole, then each
    panel's options and custom field config by its type, and each target as Prometheus's query."""
    found = [
        _said("dashboard", e) for e in _validator("dashboard", "Dashboard").iter_errors(dashboard)
    ]
    query = _validator("prometheus", "Dataquery")
    for panel in dashboard.get("panels", []):
        if panel.get("type") == "row":
            continue
        kind = panel.get("type")
        where = f"panel {panel.get('title')!r} ({kind})"
        if kind not in PANEL_TYPES:
            found.append(f"{where}: no vendored schema for this panel type")
            continue
        for e in _validator(kind, "Options").iter_errors(panel.get("options", {})):
            found.append(_said(f"{where} options", e))
        custom = panel.get("fieldConfig", {}).get("defaults", {}).get("custom")
        if custom is not None and "FieldConfig" in _load(kind)["definitions"]:
            for e in _validator(kind, "FieldConfig").iter_errors(custom):
                found.append(_said(f"{where} custom", e))
        for target in panel.get("targets", []):
            for e in query.iter_errors(target):
                found.append(_said(f"{where} target", e))
    return found


def _said(where: str, error: ValidationError) -> str:
    """The error, and for a panel matching neither a panel nor a row, why not as a panel (the
    deepest of the branches' errors: a row's refusal of a panel's keys says nothing)."""
    line = f"{where} {list(error.absolute_path)}: {error.message[:160]}"
    if error.context:
        cause = max(error.context, key=lambda e: len(e.absolute_path))
        line += f" <- {list(cause.absolute_path)}: {cause.message[:160]}"
    return line


def _dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def _substituted(text: str) -> str:
    for name, value in VARIABLES.items():
        text = text.replace(f"${name}", value)
    return text


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            yield panel


def queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str, str | None]]:
    """(where, PromQL with the variables' values, legend) of every panel target."""
    for panel in panels(dashboard):
        for target in panel["targets"]:
            where = f"{panel['title']} [{target['refId']}]"
            yield where, _substituted(target["expr"]), target.get("legendFormat")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> SampleFleet:
    return write_sample_fleet(tmp_path_factory.mktemp("textfiles") / "dir", datetime.now(UTC))


@pytest.fixture(scope="module")
def written(fleet: SampleFleet) -> Written:
    return Written.from_textfiles(sorted(fleet.directory.glob("*.prom")))


def test_the_dashboard_is_valid_against_grafanas_dashboard_schema() -> None:
    dashboard = _dashboard()
    assert schema_errors(dashboard) == []
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique within a dashboard"
    assert {p["type"] for p in panels(dashboard)} <= set(PANEL_TYPES)


@pytest.mark.parametrize(
    ("breakage", "said"),
    [
        (lambda d: d.update(__inputs=[]), "Additional properties are not allowed"),
        (lambda d: d.pop("schemaVersion"), "'schemaVersion' is a required property"),
        (lambda d: d["panels"][1]["gridPos"].update(w=25), "greater than the maximum of 24"),
        (lambda d: d["panels"][1]["options"].pop("reduceOptions"), "'reduceOptions' is a required"),
        (lambda d: d["panels"][1]["targets"][0].update(exp="up"), "('exp' was unexpected)"),
        (lambda d: d["templating"]["list"][2].update(type="list"), "is not one of"),
        (lambda d: _first_table(d)["options"].update(cellHeight="xl"), "is not one of"),
        (
            lambda d: _first_table(d)["fieldConfig"]["defaults"]["custom"]["cellOptions"].update(
                type="rainbow"
            ),
            "is not valid under any of the given schemas",
        ),
    ],
)
def test_the_schema_check_refuses_what_grafanas_schema_refuses(breakage: Any, said: str) -> None:
    """So the check above cannot pass by reading nothing: each breakage is one Grafana's schema
    names, the corrections included (a table cell of a type no variant has)."""
    dashboard = _dashboard()
    breakage(dashboard)
    errors = schema_errors(dashboard)
    assert errors, "the broken dashboard passed"
    assert any(said in error for error in errors), errors


def _first_table(dashboard: dict[str, Any]) -> dict[str, Any]:
    return next(p for p in panels(dashboard) if p["type"] == "table")


def test_every_metric_label_and_value_queried_is_one_gpuaccept_writes(written: Written) -> None:
    dashboard = _dashboard()
    found = []
    for where, expr, legend in queries(dashboard):
        assert "$" not in expr, f"{where}: a variable the check does not know: {expr}"
        found += [f"{where}: {problem}" for problem in problems(expr, written, legend)]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]
        match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query)
        assert match, f"variable {variable['name']}: {query}"
        selector, label = match.groups()
        found += [f"variable {variable['name']}: {p}" for p in problems(selector, written)]
        if label not in written.labels_of(metrics_in(selector)):
            found.append(f"variable {variable['name']}: {selector} has no label {label}")
    assert found == []
    # every metric gpuaccept writes for a node's state and actions is on the dashboard
    named = set().union(*(metrics_in(expr) for _, expr, _ in queries(dashboard)))
    for metric in (
        "gpuaccept_run_verdict",
        "gpuaccept_run_action",
        "gpuaccept_run_node_acceptance",
        "gpuaccept_run_start_time_seconds",
        "gpuaccept_check_action",
        "gpuaccept_check_status",
        "gpuaccept_measurement_value",
        "gpuaccept_measurement_within_reference",
        "gpuaccept_measurement_reference_floor",
        "gpuaccept_act_decision",
        "gpuaccept_act_refused",
        "gpuaccept_fleet_mtbi_hours",
        "gpuaccept_fleet_node_mtbi_hours",
        "gpuaccept_fleet_node_incidents",
        "gpuaccept_fleet_gpu_incidents",
    ):
        assert metric in named, metric


def test_every_table_column_is_a_label_or_a_value_of_its_queries(written: Written) -> None:
    """A column an `organize` step orders, hides or renames is one the queries return: a label
    renamed in the writer would leave the table without it, silently."""
    for panel in panels(_dashboard()):
        names = set().union(*(metrics_in(_substituted(t["expr"])) for t in panel["targets"]))
        columns = written.labels_of(names) | TARGET_LABELS | {"Time", "Value", "__name__"}
        columns |= {f"Value #{t['refId']}" for t in panel["targets"]}
        for step in panel.get("transformations", []):
            if step["id"] != "organize":
                continue
            for key in ("excludeByName", "renameByName", "indexByName"):
                unknown = set(step["options"].get(key, {})) - columns
                assert not unknown, f"{panel['title']}: {key} {sorted(unknown)}"
        # a table sorts by a column it shows: a label, or a value under the name it is given
        shown = columns | {
            name for step in panel.get("transformations", []) for name in
            step["options"].get("renameByName", {}).values()
        } | {
            p["value"] for o in panel["fieldConfig"]["overrides"] for p in o["properties"]
            if p["id"] == "displayName"
        }  # fmt: skip
        for order in panel["options"].get("sortBy", []):
            assert order["displayName"] in shown, f"{panel['title']}: sorts by {order}"


@pytest.mark.parametrize(
    ("expr", "legend", "said"),
    [
        ("gpuaccept_run_verdct == 1", None, "metric gpuaccept_run_verdct is not written"),
        ('gpuaccept_run_verdict{verdict="failed"}', None, "'failed' is never written"),
        ('gpuaccept_run_action{action=~"drain|evict"}', None, "'evict' is never written"),
        ('gpuaccept_run_action{gpu="0"}', None, "gpuaccept_run_action has no label gpu"),
        ("max by (nodes) (gpuaccept_run_passed)", None, "by (nodes)"),
        ("gpuaccept_run_passed", "{{gpu_model}}", "legend {{gpu_model}}"),
        ("gpu_temperature{node=~'.*'}", None, "selector of gpu_temperature"),
    ],
)
def test_the_name_check_finds_a_wrong_name(
    written: Written, expr: str, legend: str | None, said: str
) -> None:
    assert any(said in problem for problem in problems(expr, written, legend)), problems(
        expr, written, legend
    )


PROMTOOL = shutil.which("promtool")


@pytest.mark.skipif(
    PROMTOOL is None, reason="no promtool here (Debian: apt-get install prometheus)"
)
def test_prometheus_parses_every_query(tmp_path: Path) -> None:
    """Prometheus's own parser, through `promtool check rules`: one recording rule per query."""
    assert PROMTOOL is not None
    exprs = [expr for _, expr, _ in queries(_dashboard())]
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [{"record": f"q{i}", "expr": expr} for i, expr in enumerate(exprs)],
            }
        ]
    }
    path = tmp_path / "rules.json"  # JSON is YAML
    path.write_text(json.dumps(rules))
    done = subprocess.run(
        [PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in done.stdout
    path.write_text(
        json.dumps({"groups": [{"name": "g", "rules": [{"record": "q", "expr": "x{"}]}]})
    )
    refused = subprocess.run(
        [PROMTOOL, "check", "rules", str(path)], capture_output=True, timeout=60
    )
    assert refused.returncode != 0, "promtool accepted a broken query: the check above is empty"


@pytest.fixture(scope="module")
def prometheus(fleet: SampleFleet, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """node_exporter's textfile collector over the sample fleet's directory, as
    docs/dashboards.md wires it, scraped every second by a Prometheus: loopback only, both
    started here and stopped after the module."""
    if PROMETHEUS is None or NODE_EXPORTER is None:
        pytest.skip("no prometheus or node_exporter (Debian: prometheus prometheus-node-exporter)")
    ready = ("gpuaccept_act_time_seconds", "gpuaccept_run_passed", "gpuaccept_fleet_mtbi_hours")
    with serving(fleet.directory, tmp_path_factory.mktemp("prometheus"), ready) as port:
        yield port


def _panel_query(title: str, ref: str = "A") -> str:
    panel = next(p for p in panels(_dashboard()) if p["title"] == title)
    return _substituted(next(t["expr"] for t in panel["targets"] if t["refId"] == ref))


@pytest.mark.service
def test_a_real_prometheus_answers_each_panel_with_what_the_fleet_holds(
    prometheus: int, fleet: SampleFleet
) -> None:
    port = prometheus
    for where, expr, _ in queries(_dashboard()):
        assert query(port, expr), f"{where}: no answer from the sample fleet: {expr}"

    def by(title: str, label: str, ref: str = "A") -> dict[str, float]:
        return {
            r["metric"].get(label, ""): float(r["value"][1])
            for r in query(port, _panel_query(title, ref))
        }

    # the CPU twins' pass (gpu06) and the bench run are no GPU acceptance: not counted
    assert by("Nodes by verdict", "verdict") == {
        "pass": len(fleet.passing),
        "fail": len(fleet.failing),
    }
    actions: dict[str, float] = {}
    for action in fleet.failing.values():
        actions[action] = actions.get(action, 0) + 1
    assert by("Nodes to act on, by action", "action") == actions
    assert by("Not tested within $stale_days days", "") == {"": len(fleet.stale)}
    assert by("Changes refused by a guard", "") == {"": len(fleet.refused)}
    assert by("Unreadable textfiles", "") == {"": 0}
    # the most severe first: drain (5) before rerun (2)
    severe = query(port, _panel_query("Nodes to act on, most severe first"))
    assert [(r["metric"]["node"], r["metric"]["action"]) for r in severe] == sorted(
        fleet.failing.items(), key=lambda item: item[1] != "drain"
    )
    assert [float(r["value"][1]) for r in severe] == [5.0, 2.0]
    checks = query(port, _panel_query("Checks that did not pass, with their action"))
    assert {(r["metric"]["node"], r["metric"]["check"], r["metric"]["action"]) for r in checks} == {
        ("gpu03", "compute", "rerun"),
        ("gpu04", "compute", "drain"),
        ("gpu04", "ddp", "rerun"),
    }
    decided = query(port, _panel_query("What act slurm and node-verdict decided"))
    assert {(r["metric"]["node"], r["metric"]["decision"]) for r in decided} == {
        *((node, "drain") for node in fleet.drained),
        *((node, "refused") for node in fleet.refused),
    }
    refused = query(port, _panel_query("Refused by a guard"))
    assert {r["metric"]["node"]: r["metric"]["guard"] for r in refused} == fleet.refused
    lagging = query(port, _panel_query("Lagging figures: below their reference's floor", "C"))
    assert {
        (r["metric"]["node"], r["metric"]["gpu"], r["metric"]["metric"]) for r in lagging
    } == set(fleet.lagging)
    assert all(float(r["value"][1]) < 1 for r in lagging)
    closest = query(
        port, _panel_query("Closest to the floor: the $bottom lowest figures over their floor")
    )
    passing_first = [
        (r["metric"]["node"], r["metric"]["gpu"])
        for r in sorted(closest, key=lambda r: float(r["value"][1]))
        if float(r["value"][1]) >= 1
    ]
    assert passing_first[0] == fleet.nearest
    ages = by("Newest run of each node and kind: how long ago", "node")
    assert ages["gpu05"] > 9 * 86400 > max(v for node, v in ages.items() if node != "gpu05")
    assert by("Nodes by MTBI, the shortest first", "node") == fleet.mtbi_hours
    gpus = query(port, _panel_query("GPUs with incidents"))
    assert {r["metric"]["uuid"]: float(r["value"][1]) for r in gpus} == fleet.gpu_incidents
