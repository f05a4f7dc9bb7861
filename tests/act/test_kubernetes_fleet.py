"""`gpuaccept node-verdict` with the guards over a simulated 50-node Kubernetes pool (issue #31
§2, §3, §6): the cluster as `kubectl get nodes -o json` prints it (`--cluster`), and the API
through a stand-in for the kubernetes client (tests/fake_kube) over the same document
(`--apply`). The same rules as `act slurm` (act.policy): a fault on every node at once taints
one and refuses the rest, a regression of the stack taints no more nodes and names the stack,
a soft failure taints only when it repeats, only gpuaccept's own taint is lifted and only after
a standard pass, shadow mode changes nothing."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaccept.act.kubernetes import REASON_KEY, TAINTED_AT_KEY, parse_nodes
from gpuaccept.cli import app
from gpuaccept.errors import InputError
from gpuaccept.report.node_verdict import TAINT_KEY
from gpuaccept.results import RunReport
from tests.run_reports import gpu_report, rejudged, soft_failure

FAKE_CLIENT = Path(__file__).resolve().parents[1] / "fake_kube"
POOL = {"nvidia.com/gpu.present": "true"}


def _node(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(POOL), "annotations": {}},
        "spec": spec,
    }


def _cluster(tmp_path: Path, *changed: dict[str, Any], nodes: int = 50) -> Path:
    """A pool of `nodes` GPU nodes, in service unless `changed` gives one."""
    by_name = {f"gpu{i:02d}": _node(f"gpu{i:02d}") for i in range(nodes)}
    by_name.update({n["metadata"]["name"]: n for n in changed})
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [*by_name.values()]}))
    return path


def _tainted(name: str, reason: str, minutes_ago: float = 5.0, **more: Any) -> dict[str, Any]:
    node = _node(name, taints=[{"key": TAINT_KEY, "value": "x", "effect": "NoSchedule"}], **more)
    when = datetime.now(UTC) - timedelta(minutes=minutes_ago)
    node["metadata"]["annotations"] = {
        REASON_KEY: reason,
        TAINTED_AT_KEY: when.isoformat(timespec="seconds"),
    }
    return node


def _stack(torch: str = "2.13.0") -> str:
    from gpuaccept.record.environment import stack_sha256

    report = gpu_report("any", [790.0], extra_environment={"torch": {"version": torch}})
    return stack_sha256(report.environment)[:8]


def _write(tmp_path: Path, report: RunReport, node: str, tag: str = "") -> Path:
    """The report as the node's accept job stores it (the node named as the manifests do)."""
    named = rejudged(report, environment={**report.environment, "scheduler": {"node_name": node}})
    path = tmp_path / f"{node}-{named.started_at[:13]}{tag}.json"
    path.write_text(named.model_dump_json())
    return path


def _failing(tmp_path: Path, node: str, torch: str = "2.13.0", hours: float = 0.0) -> Path:
    """A hard failure (compute, recommended: drain) of `node` on the stack `torch` picks."""
    stack = {"torch": {"version": torch}}
    return _write(
        tmp_path,
        gpu_report(node, [500.0], passed=False, hours=hours, extra_environment=stack),
        node,
    )


def _passing(tmp_path: Path, node: str, level: str = "standard", hours: float = 1.0) -> Path:
    report = rejudged(gpu_report(node, [790.0], hours=hours), level=level)
    return _write(tmp_path, report, node, f"-{level}")


def _verdict(*args: str | Path) -> Any:
    return CliRunner().invoke(app, ["node-verdict", *map(str, args)])


def _commands(output: str, node: str) -> list[str]:
    return [
        line for line in output.splitlines() if line.startswith("kubectl") and f" {node} " in line
    ]


def test_a_regression_on_every_node_at_once_taints_none_and_alerts_once(tmp_path: Path) -> None:
    """A driver or library update that fails compute on all 50 nodes in one round, every node on
    the same stack: a regression of the stack, not 50 faults: no taint at all, one alert naming
    the stack, exit 4; every node still gets its labels (the verdict is recorded)."""
    cluster = _cluster(tmp_path)
    reports = [_failing(tmp_path, f"gpu{i:02d}") for i in range(50)]
    result = _verdict(*reports, "--cluster", cluster)
    assert result.exit_code == 4, result.output
    assert not [line for line in result.stdout.splitlines() if "taint" in line]
    labels = [line for line in result.stdout.splitlines() if line.startswith("kubectl label")]
    assert len(labels) == 50
    assert all("gpuaccept.io/verdict=fail" in line for line in labels)
    (alert,) = [line for line in result.stderr.splitlines() if line.startswith("node-verdict:")]
    assert alert == (
        f"node-verdict: a regression of the software stack {_stack()}: 50 node(s) failed alike "
        "(gpu00, gpu01, gpu02, gpu03, gpu04, ...), none of them tainted for it; compare the "
        "stack with the last one that passed"
    )
    # the first node's refusal found the regression and held the stack (issue #49 §3); the 49
    # after it are refused as held
    notes = [line for line in result.stderr.splitlines() if "NOT drained: 49 other" in line]
    held = [line for line in result.stderr.splitlines() if "is held as a regression" in line]
    assert (len(notes), len(held)) == (1, 49)


def test_a_fault_on_every_node_on_different_stacks_taints_one_and_stops(tmp_path: Path) -> None:
    """50 nodes failing at once, each on its own stack (no regression to see): the breaker, 2%
    of 50 (at least one): one taint, 49 loud refusals naming the node it counted, exit 4."""
    reports = [_failing(tmp_path, f"gpu{i:02d}", torch=f"2.{i}") for i in range(50)]
    result = _verdict(*reports, "--cluster", _cluster(tmp_path))
    assert result.exit_code == 4, result.output
    taints = [line for line in result.stdout.splitlines() if line.startswith("kubectl taint")]
    assert taints == ["kubectl taint node gpu00 gpuaccept.io/unfit=compute:NoSchedule --overwrite"]
    annotate = _commands(result.stdout, "gpu00")[1]
    assert annotate.startswith(
        f"kubectl annotate node gpu00 '{REASON_KEY}=gpuaccept standard: drain: compute "
        f"[stack {_stack('2.0')}]' {TAINTED_AT_KEY}="
    )
    refusals = [line for line in result.stderr.splitlines() if line.startswith("node-verdict:")]
    assert len(refusals) == 49
    assert "gpuaccept drained 1 of 50 node(s) in the last 60 min (gpu00)" in refusals[0]


def test_the_breaker_counts_the_pool_and_recent_taints_only(tmp_path: Path) -> None:
    """Two gpuaccept taints an hour and a half ago, one ten minutes ago; a wider breaker (10%
    of 50: 5). Three more taints fit (1 recent + 3 = 4 < 5 before each), the fifth is refused;
    nodes outside the pool (no GPU label) are not counted."""
    old = [
        _tainted(f"gpu0{i}", "gpuaccept standard: drain: memory", minutes_ago=90) for i in (1, 2)
    ]
    recent = _tainted("gpu03", "gpuaccept standard: drain: memory", minutes_ago=10)
    cpu = [{"kind": "Node", "metadata": {"name": f"cpu{i}"}, "spec": {}} for i in range(50)]
    cluster = _cluster(tmp_path, *old, recent)
    document = json.loads(cluster.read_text())
    document["items"] += cpu
    cluster.write_text(json.dumps(document))
    reports = [_failing(tmp_path, f"gpu{i:02d}", torch=f"2.{i}") for i in range(10, 15)]
    result = _verdict(
        *reports,
        "--cluster",
        cluster,
        "--pool",
        "nvidia.com/gpu.present=true",
        "--breaker-share",
        "0.1",
    )
    assert result.exit_code == 4, result.output
    tainted = [line.split()[3] for line in result.stdout.splitlines() if "kubectl taint" in line]
    assert tainted == ["gpu10", "gpu11", "gpu12", "gpu13"]
    assert "gpuaccept drained 5 of 50 node(s)" in result.stderr  # gpu03 + 4, not the cpu nodes


def test_a_stack_regression_taints_no_more_and_names_the_stack(tmp_path: Path) -> None:
    """Two nodes tainted for compute on one stack within the hour: a third failing the same on
    that stack is the stack's regression, not tainted, the stack named; a node failing on
    another stack is tainted (the breaker is wide here)."""
    reason = f"gpuaccept standard: drain: compute [stack {_stack()}]"
    cluster = _cluster(tmp_path, _tainted("gpu00", reason), _tainted("gpu01", reason))
    same = _failing(tmp_path, "gpu02")
    other = _failing(tmp_path, "gpu03", torch="2.12.0")
    result = _verdict(same, other, "--cluster", cluster, "--breaker-share", "0.5")
    assert result.exit_code == 4
    assert (
        f"# gpu02: failed compute, NOT drained: 2 other node(s) on the same software "
        f"stack ({_stack()}) failed alike in the last 60 min (gpu00, gpu01)" in result.stderr
    )
    assert f"node-verdict: a regression of the software stack {_stack()}: 1 node(s)" in (
        result.stderr
    )
    assert not [c for c in _commands(result.stdout, "gpu02") if "taint" in c]
    assert [c for c in _commands(result.stdout, "gpu03") if c.startswith("kubectl taint")]


def test_a_soft_failure_taints_only_when_it_repeats(tmp_path: Path) -> None:
    """A figure below its floor (recommended: rerun) once: labelled fail, not tainted; the
    node's next run failing the same: tainted. The node's older report given beside the newer
    is its past (superseded for the labels, counted for the debounce)."""
    cluster = _cluster(tmp_path)
    first = _write(tmp_path, soft_failure("gpu05", 1.0), "gpu05")
    once = _verdict(first, "--cluster", cluster)
    assert once.exit_code == 0, once.output
    (label,) = _commands(once.stdout, "gpu05")
    assert "gpuaccept.io/verdict=fail" in label
    assert "gpuaccept.io/action=rerun" in label
    assert "NOT drained until it fails 2 runs in a row" in once.stderr
    second = _write(tmp_path, soft_failure("gpu05", 2.0), "gpu05")
    twice = _verdict(first, second, "--cluster", cluster)
    assert twice.exit_code == 0, twice.output
    assert "kubectl taint node gpu05 gpuaccept.io/unfit=compute:NoSchedule --overwrite" in (
        twice.stdout
    )
    # a site that drains at once, on a fleet whose records hold no drain yet (the taint above is
    # in this one's records: its breaker would count it)
    fresh = str(tmp_path / "fresh-state.json")
    at_once = _verdict(first, "--cluster", cluster, "--debounce", "1", "--state", fresh)
    assert "kubectl taint node gpu05" in at_once.stdout


def test_a_repeat_offender_is_labelled_replace(tmp_path: Path) -> None:
    """Three incidents within 7 days (fail, pass, fail, pass, fail): the action becomes replace
    in the label and in the taint's reason."""
    runs = [
        _failing(tmp_path, "gpu07", hours=0),
        _passing(tmp_path, "gpu07", hours=10),
        _failing(tmp_path, "gpu07", hours=20),
        _passing(tmp_path, "gpu07", hours=30),
        _failing(tmp_path, "gpu07", hours=40),
    ]
    result = _verdict(*runs, "--cluster", _cluster(tmp_path))
    assert result.exit_code == 0, result.output
    label, annotate, _taint = _commands(result.stdout, "gpu07")
    assert "gpuaccept.io/action=replace" in label
    assert "gpuaccept standard: replace: compute" in annotate
    assert "a repeat offender" in result.stderr


def test_only_gpuaccepts_taint_is_lifted_and_only_after_a_standard_pass(tmp_path: Path) -> None:
    ours = _tainted("gpu01", "gpuaccept quick: drain: compute")
    cordoned = _node("gpu02", unschedulable=True)
    both = _tainted("gpu03", "gpuaccept quick: drain: compute", unschedulable=True)
    cluster = _cluster(tmp_path, ours, cordoned, both)
    quick = _verdict(_passing(tmp_path, "gpu01", "quick"), "--cluster", cluster)
    assert quick.exit_code == 0
    assert not [c for c in _commands(quick.stdout, "gpu01") if "taint" in c or "annotate" in c]
    assert "returns after a passing standard run" in quick.stderr
    standard = _verdict(*(_passing(tmp_path, f"gpu0{i}") for i in (1, 2, 3)), "--cluster", cluster)
    assert standard.exit_code == 0, standard.output
    assert _commands(standard.stdout, "gpu01")[1:] == [
        f"kubectl annotate node gpu01 {REASON_KEY}- {TAINTED_AT_KEY}- --overwrite",
        "kubectl taint node gpu01 gpuaccept.io/unfit:NoSchedule-",
    ]
    # the administrator's cordon is not gpuaccept's to lift
    assert len(_commands(standard.stdout, "gpu02")) == 1  # the labels only
    assert (
        "# gpu02: passed; cordoned (spec.unschedulable): not gpuaccept's to change, "
        "left as it is" in standard.stderr
    )
    # gpuaccept's taint on a node someone cordoned since stays until they release it (issue #49
    # §1: only a node in service or held by gpuaccept alone is touched; Slurm's DOWN over
    # gpuaccept's DRAIN is the same), and nothing of theirs is touched
    assert not [c for c in _commands(standard.stdout, "gpu03") if "taint" in c]
    assert "uncordon" not in standard.stdout
    assert "# gpu03: passed; cordoned (spec.unschedulable)" in standard.stderr


def test_report_mode_is_todays_output_without_guards(tmp_path: Path) -> None:
    """No cluster given: the verdict's commands as before the guards (a person reads them)."""
    result = _verdict(_write(tmp_path, soft_failure("gpu05", 1.0), "gpu05"))
    assert result.exit_code == 0
    assert "kubectl taint node gpu05 gpuaccept.io/unfit=compute:NoSchedule --overwrite" in (
        result.stdout
    )
    assert "annotate" not in result.stdout


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The stand-in kubernetes client over a 50-node pool's state file."""
    home = tmp_path / "api"
    home.mkdir()
    state = _cluster(home)
    monkeypatch.setenv("FAKE_KUBE_STATE", str(state))
    monkeypatch.syspath_prepend(str(FAKE_CLIENT))
    for name in [m for m in sys.modules if m == "kubernetes" or m.startswith("kubernetes.")]:
        monkeypatch.delitem(sys.modules, name)
    yield state
    for name in [m for m in sys.modules if m == "kubernetes" or m.startswith("kubernetes.")]:
        del sys.modules[name]


def _api_nodes(state: Path) -> dict[str, dict[str, Any]]:
    return {n["metadata"]["name"]: n for n in json.loads(state.read_text())["items"]}


def test_apply_taints_through_the_api_and_the_next_round_sees_it(api: Path, tmp_path: Path) -> None:
    """Enforce through the API: gpu00 tainted with its reason and time; a later call for another
    node's failure counts that taint (from the API's state) and refuses."""
    first = _verdict(_failing(tmp_path, "gpu00"), "--apply")
    assert first.exit_code == 0, first.output
    node = _api_nodes(api)["gpu00"]
    assert node["spec"]["taints"] == [
        {"key": TAINT_KEY, "value": "compute", "effect": "NoSchedule"}
    ]
    assert node["metadata"]["annotations"][REASON_KEY].startswith("gpuaccept standard: drain:")
    assert node["metadata"]["labels"]["gpuaccept.io/verdict"] == "fail"
    second = _verdict(_failing(tmp_path, "gpu01", torch="2.12.0"), "--apply")
    assert second.exit_code == 4
    assert "gpuaccept drained 1 of 50 node(s)" in second.stderr
    untouched = _api_nodes(api)["gpu01"]
    assert not untouched["spec"].get("taints")
    assert untouched["metadata"]["labels"]["gpuaccept.io/verdict"] == "fail"
    back = _verdict(_passing(tmp_path, "gpu00", hours=5), "--apply")
    assert back.exit_code == 0, back.output
    node = _api_nodes(api)["gpu00"]
    assert node["spec"]["taints"] == []
    assert REASON_KEY not in node["metadata"]["annotations"]


def test_shadow_mode_changes_nothing_and_says_what_it_would_do(api: Path, tmp_path: Path) -> None:
    before = api.read_text()
    result = _verdict(_failing(tmp_path, "gpu04"), "--apply", "--act", "shadow")
    assert result.exit_code == 0, result.output
    assert "[K8S] shadow: gpu04: would taint: failed: drained (gpuaccept standard: drain:" in (
        result.stdout
    )
    assert "(nothing changed: --act shadow)" in result.stdout
    assert api.read_text() == before


def test_an_api_that_does_not_answer_is_exit_3(
    api: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KUBE_DOWN", "1")
    result = _verdict(_failing(tmp_path, "gpu04"), "--apply")
    assert result.exit_code == 3
    assert "the Kubernetes API refused or did not answer: HTTP 503 Service Unavailable" in (
        result.stderr
    )
    for down, said in [
        ("refused", "did not answer: [Errno 111] Connection refused"),
        ("status-only", "did not answer: HTTP 500\n"),
    ]:
        monkeypatch.setenv("FAKE_KUBE_DOWN", down)
        failed = _verdict(_failing(tmp_path, "gpu04"), "--apply")
        assert failed.exit_code == 3
        assert said in failed.stderr
    monkeypatch.delenv("FAKE_KUBE_DOWN")
    monkeypatch.setenv("FAKE_KUBE_PATCH_DENIED", "1")
    denied = _verdict(_failing(tmp_path, "gpu04"), "--apply")
    assert denied.exit_code == 3
    assert "the Kubernetes API refused or did not answer: HTTP 403 Forbidden" in denied.stderr
    monkeypatch.delenv("FAKE_KUBE_PATCH_DENIED")
    monkeypatch.setenv("FAKE_KUBE_NO_CONFIG", "1")
    unconfigured = _verdict(_failing(tmp_path, "gpu04"), "--apply")
    assert unconfigured.exit_code == 3
    assert "no Kubernetes configuration" in unconfigured.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--act", "shadow"], "--act shadow decides against the cluster's nodes: give --cluster"),
        (["--act", "enforce"], "--act enforce decides against the cluster's nodes"),
        (["--act", "bogus"], "--act 'bogus': give one of report, shadow, enforce"),
        (["--pool", "novalue"], "--pool 'novalue': give labels as KEY=VALUE"),
        (["--breaker-share", "2"], "--breaker-share 2: give a fraction from 0 to 1"),
        (["--act", "report", "--cluster", "CLUSTER"], "--act report reads no cluster"),
        (["--apply", "--cluster", "CLUSTER"], "--apply reads the cluster from the API"),
        (["--node", "gpu09", "OTHER"], "--node gpu09: the reports are of 2 nodes"),
    ],
)
def test_a_wrong_option_is_one_line_and_exit_2(tmp_path: Path, args: list[str], said: str) -> None:
    cluster = _cluster(tmp_path)
    other = _failing(tmp_path, "gpu08")
    given = [{"CLUSTER": str(cluster), "OTHER": str(other)}.get(a, a) for a in args]
    result = _verdict(_failing(tmp_path, "gpu04"), *given)
    assert result.exit_code == 2, result.output
    assert said in result.stderr
    assert "Traceback" not in result.output


def test_a_node_the_cluster_lacks_is_refused_before_anything_is_printed(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path, nodes=3)
    result = _verdict(
        _failing(tmp_path, "gpu01"), _failing(tmp_path, "gpu77"), "--cluster", cluster
    )
    assert result.exit_code == 2
    assert (
        "node gpu77 is not among the cluster's nodes: give --node, or the cluster it is in"
        in result.stderr
    )
    assert "kubectl" not in result.stdout  # decided for every node before a command is printed


@pytest.mark.parametrize(
    ("document", "said"),
    [
        ({"kind": "Pod", "items": []}, "not a node list"),
        ({"kind": "List", "items": {}}, "items is not a list"),
        ({"kind": "List", "items": [{"kind": "Pod"}]}, "items[0]: not a Node"),
        ({"kind": "List", "items": [{"metadata": {}}]}, "a Node without metadata.name"),
        (
            {"kind": "List", "items": [{"metadata": {"name": "a"}, "spec": {"taints": [1]}}]},
            "spec.taints is not a list of taints",
        ),
        (
            {"kind": "List", "items": [{"metadata": {"name": "a"}, "spec": {"unschedulable": 1}}]},
            "spec.unschedulable is not true or false",
        ),
        (
            {"kind": "List", "items": [{"metadata": {"name": "a", "labels": {"k": 1}}}]},
            "metadata.labels: not a map of strings",
        ),
        (
            {"kind": "List", "items": [{"metadata": {"name": "a", "annotations": {"k": 1}}}]},
            "items[0] (a): annotations: not a map of strings",
        ),
        (
            {"kind": "List", "items": [{"metadata": {"name": "a"}, "spec": [1]}]},
            "spec is not a map",
        ),
        (
            {"kind": "List", "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "a"}}]},
            "node a is listed twice",
        ),
    ],
)
def test_a_cluster_file_that_is_not_a_node_list_is_refused(document: object, said: str) -> None:
    with pytest.raises(InputError) as raised:
        parse_nodes(document, "--cluster f")
    assert said in str(raised.value)


def test_a_gpuaccept_taint_with_a_damaged_time_counts_as_recent(tmp_path: Path) -> None:
    """An annotation that is not a time (edited by hand): the breaker errs on the side of
    tainting less, as it does for an undated Slurm reason."""
    damaged = _tainted("gpu01", "gpuaccept standard: drain: memory")
    damaged["metadata"]["annotations"][TAINTED_AT_KEY] = "yesterday"
    result = _verdict(_failing(tmp_path, "gpu02"), "--cluster", _cluster(tmp_path, damaged))
    assert result.exit_code == 4
    assert "gpuaccept drained 1 of 50 node(s)" in result.stderr


def test_a_taint_from_before_the_annotations_is_gpuaccepts_and_counts(tmp_path: Path) -> None:
    """A gpuaccept.io/unfit taint without gpuaccept's annotations (set by node-verdict before the
    guards): still gpuaccept's (its key), counted by the breaker as recent (no time), said as
    drained with no reason, and lifted by a standard pass."""
    legacy = _node("gpu01", taints=[{"key": TAINT_KEY, "value": "x", "effect": "NoSchedule"}])
    cluster = _cluster(tmp_path, legacy)
    failing = _verdict(
        _failing(tmp_path, "gpu01"), _failing(tmp_path, "gpu02"), "--cluster", cluster
    )
    assert failing.exit_code == 4
    assert "# gpu01: failed; drained already (no reason)" in failing.stderr
    assert "gpuaccept drained 1 of 50 node(s) in the last 60 min (gpu01)" in failing.stderr
    back = _verdict(_passing(tmp_path, "gpu01"), "--cluster", cluster)
    assert "kubectl taint node gpu01 gpuaccept.io/unfit:NoSchedule-" in back.stdout


def test_a_taints_time_is_read_as_the_instant_it_names(tmp_path: Path) -> None:
    """tainted-at with an offset is that instant (90 minutes ago in +05:00 is outside the hour);
    one without an offset is UTC (kubectl annotate by hand)."""
    old = datetime.now(UTC) - timedelta(minutes=90)
    east = _tainted("gpu01", "gpuaccept standard: drain: memory")
    east["metadata"]["annotations"][TAINTED_AT_KEY] = old.astimezone(
        timezone(timedelta(hours=5))
    ).isoformat()
    naive = _tainted("gpu03", "gpuaccept standard: drain: memory")
    naive["metadata"]["annotations"][TAINTED_AT_KEY] = old.replace(tzinfo=None).isoformat()
    result = _verdict(_failing(tmp_path, "gpu02"), "--cluster", _cluster(tmp_path, east, naive))
    assert result.exit_code == 0, result.output
    assert "kubectl taint node gpu02" in result.stdout


def test_a_taint_lifted_in_a_round_no_longer_counts_and_its_taints_do(tmp_path: Path) -> None:
    """One call: gpu01 (gpuaccept's taint, 10 minutes old) passes standard and is lifted; gpu02
    then fails and is tainted, the breaker no longer counting gpu01; gpu03 failing on another
    stack is refused: the breaker counts gpu02's taint of this round."""
    # tainted for compute: the passing run ran compute (a pass returns a node only when it ran
    # the checks it was taken out for)
    cluster = _cluster(tmp_path, _tainted("gpu01", "gpuaccept standard: drain: compute", 10))
    result = _verdict(
        _passing(tmp_path, "gpu01"),
        _failing(tmp_path, "gpu02"),
        _failing(tmp_path, "gpu03", torch="2.12.0"),
        "--cluster",
        cluster,
    )
    assert result.exit_code == 4, result.output
    assert "kubectl taint node gpu01 gpuaccept.io/unfit:NoSchedule-" in result.stdout
    assert "kubectl taint node gpu02 gpuaccept.io/unfit=compute:NoSchedule --overwrite" in (
        result.stdout
    )
    assert (
        "node-verdict: gpu03: failed, NOT drained: gpuaccept drained 1 of 50 node(s) in the "
        in (result.stderr)
    )
    assert "(gpu02)" in result.stderr


def test_two_nodes_alike_in_a_round_are_not_yet_a_regression(tmp_path: Path) -> None:
    """The rule wants two *other* nodes failing alike: two nodes failing compute on one stack in
    one call are tainted (a wide breaker); the third makes all three a regression."""
    two = [_failing(tmp_path, f"gpu1{i}") for i in range(2)]
    pair = _verdict(*two, "--cluster", _cluster(tmp_path), "--breaker-share", "0.5")
    assert pair.exit_code == 0, pair.output
    tainted = [line.split()[3] for line in pair.stdout.splitlines() if "kubectl taint" in line]
    assert tainted == ["gpu10", "gpu11"]
    three = [*two, _failing(tmp_path, "gpu12")]
    trio = _verdict(*three, "--cluster", _cluster(tmp_path), "--breaker-share", "0.5")
    assert trio.exit_code == 4
    assert "kubectl taint" not in trio.stdout
    assert "3 node(s) failed alike (gpu10, gpu11, gpu12)" in trio.stderr


def test_one_nodes_soft_failure_is_not_anothers_past(tmp_path: Path) -> None:
    """Two nodes, each failing soft once, in one call: neither is tainted (each node's past is
    its own reports only)."""
    first = _write(tmp_path, soft_failure("gpu05", 1.0), "gpu05")
    second = _write(tmp_path, soft_failure("gpu06", 2.0), "gpu06")
    result = _verdict(first, second, "--cluster", _cluster(tmp_path))
    assert result.exit_code == 0, result.output
    assert "kubectl taint" not in result.stdout


def test_a_refused_node_keeps_every_taint_it_had(api: Path, tmp_path: Path) -> None:
    """Through the API: a failing node the breaker holds keeps its taints (a site's own
    NoSchedule taint included); the patch replaces spec.taints, so it must carry them."""
    state = json.loads(api.read_text())
    site_taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    for item in state["items"]:
        if item["metadata"]["name"] == "gpu02":
            item["spec"]["taints"] = [site_taint]
        if item["metadata"]["name"] == "gpu01":
            item.update(_tainted("gpu01", "gpuaccept standard: drain: memory"))
    api.write_text(json.dumps(state))
    result = _verdict(_failing(tmp_path, "gpu02"), "--apply")
    assert result.exit_code == 4
    assert _api_nodes(api)["gpu02"]["spec"]["taints"] == [site_taint]


def test_a_cluster_file_fault_names_the_file(tmp_path: Path) -> None:
    report = _failing(tmp_path, "gpu01")
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    wrong = tmp_path / "pods.json"
    wrong.write_text('{"kind": "PodList", "items": []}')
    for path, said in [
        (garbage, f"--cluster {garbage}: not JSON"),
        (wrong, f"--cluster {wrong}: not a node list"),
        (tmp_path, f"cluster {tmp_path}: is a directory"),
    ]:
        result = _verdict(report, "--cluster", path)
        assert result.exit_code == 2
        assert said in result.stderr


def test_the_apis_node_list_is_checked_as_a_file_is(api: Path, tmp_path: Path) -> None:
    state = json.loads(api.read_text())
    state["items"][0]["metadata"]["labels"] = {"k": 1}
    api.write_text(json.dumps(state))
    result = _verdict(_failing(tmp_path, "gpu01"), "--apply")
    assert result.exit_code == 2
    assert "the Kubernetes API's node list: items[0] (gpu00): metadata.labels" in result.stderr


def test_without_the_client_apply_says_how_to_get_it(tmp_path: Path) -> None:
    if importlib.util.find_spec("kubernetes") is not None:
        pytest.skip("the kubernetes client is installed here: --apply would reach a cluster")
    result = _verdict(_failing(tmp_path, "gpu01"), "--apply")
    assert result.exit_code == 3
    assert (
        "--apply needs the Kubernetes Python client: pip install kubernetes (or run the printed "
        "kubectl commands)" in result.stderr
    )


def test_each_decision_names_its_node(tmp_path: Path) -> None:
    """decide_round, the library under the CLI: one decision per chosen verdict, in order, each
    for its own node (a cordoned node's too)."""
    from gpuaccept.act.kubernetes import decide_round, read_cluster_file
    from gpuaccept.act.policy import Guard
    from gpuaccept.report.node_verdict import node_verdict
    from gpuaccept.report.reading import load_report

    cluster = _cluster(tmp_path, _node("gpu02", unschedulable=True))
    runs = [
        (node_verdict(report), report)
        for report in (
            load_report(_passing(tmp_path, "gpu02")),
            load_report(_failing(tmp_path, "gpu03")),
        )
    ]
    decided, _ = decide_round(
        runs, [v for v, _ in runs], read_cluster_file(cluster), datetime.now(UTC), Guard()
    )
    assert [(d.decision.node, d.decision.action) for d in decided] == [
        ("gpu02", "none"),  # cordoned by someone else: a pass changes nothing of theirs
        ("gpu03", "drain"),
    ]
