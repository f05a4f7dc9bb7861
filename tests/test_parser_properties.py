"""Property-based attacks on the parsers of what gpuaccept reads (issue #30 §9): for any input,
a checkpoint, a node profile, a report, a sysfs attribute or a log line is either read or
refused with one InputError line, never a traceback, never a hang."""

from __future__ import annotations

import json
import math
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaccept.burnin.checkpoint import resume
from gpuaccept.burnin.plan import BurnInPlan
from gpuaccept.errors import InputError
from gpuaccept.probe.fabric import data_rate_gbps, parse_rate_gbps
from gpuaccept.probe.kernel_log import line_time, parse_link_flaps
from gpuaccept.report.reading import load_report
from tests.burnin.records import binding

PLAN = BurnInPlan.build(600, 300, gpu_count=3, schedule=["gemm-bf16"])
BOUND = binding(PLAN, ["cpu0", "cpu1", "cpu2"])
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=30,
)
QUICK = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _one_line(error: InputError) -> None:
    assert "\n" not in str(error)
    assert "Traceback" not in str(error)


def _checkpoint_like(windows: object) -> dict[str, object]:
    return {
        "schema_version": 2,
        "plan": PLAN.fingerprint(),
        "seed": 0,
        "node": BOUND.node.model_dump(),
        "devices": BOUND.devices,
        "windows": windows,
    }


@QUICK
@given(st.one_of(JSON, JSON.map(_checkpoint_like)))
def test_any_json_as_a_checkpoint_is_read_or_refused_in_one_line(
    tmp_path_factory: object, data: object
) -> None:
    path = Path(tmp_path_factory.mktemp("ckpt")) / "c.json"  # type: ignore[attr-defined]
    path.write_text(json.dumps(data))
    try:
        progress = resume(path, BOUND)
    except InputError as error:
        _one_line(error)
        return
    assert progress.next_window <= PLAN.window_count  # what was read, the plan allows


@QUICK
@given(st.binary(max_size=300))
def test_any_bytes_as_a_checkpoint_are_refused_in_one_line(
    tmp_path_factory: object, data: bytes
) -> None:
    path = Path(tmp_path_factory.mktemp("ckpt")) / "c.json"  # type: ignore[attr-defined]
    path.write_bytes(data)
    try:
        resume(path, BOUND)
    except InputError as error:
        _one_line(error)


@QUICK
@given(JSON)
def test_any_json_as_a_report_is_read_or_refused_in_one_line(
    tmp_path_factory: object, data: object
) -> None:
    path = Path(tmp_path_factory.mktemp("report")) / "r.json"  # type: ignore[attr-defined]
    path.write_text(json.dumps({"tool": "gpuaccept", "schema_version": 1, "x": data}))
    try:
        load_report(path)
    except InputError as error:
        _one_line(error)


@QUICK
@given(
    st.dictionaries(
        st.sampled_from(["nics", "nic_rate_gbps", "rails", "scratch_dir", "cpus"]), JSON, max_size=4
    )
)
def test_any_node_profile_is_read_strictly_or_refused_in_one_line(
    tmp_path_factory: object, data: dict[str, object]
) -> None:
    from gpuaccept.node_profile import load_node_profile

    path = Path(tmp_path_factory.mktemp("profile")) / "p.toml"  # type: ignore[attr-defined]
    lines = []
    for key, value in data.items():
        try:
            lines.append(f"{key} = {json.dumps(value, allow_nan=False)}")
        except ValueError:
            lines.append(f"{key} = nan")
    path.write_text("\n".join(lines) + "\n")
    try:
        profile = load_node_profile(path)
    except InputError as error:
        _one_line(error)
        return
    if profile.nics is not None:
        assert type(profile.nics) is int  # never a bool or a string coerced
    if profile.nic_rate_gbps is not None:
        assert math.isfinite(profile.nic_rate_gbps)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_any_rate_attribute_reads_as_a_positive_rate_or_none(text: str) -> None:
    for rate in (parse_rate_gbps(text), data_rate_gbps(text)):
        assert rate is None or (math.isfinite(rate) and rate >= 0)
    if data_rate_gbps(text) is not None:
        assert data_rate_gbps(text) <= parse_rate_gbps(text)  # type: ignore[operator]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_any_log_line_is_dated_or_not_and_never_raises(text: str) -> None:
    moment = line_time(text, now=1.8e9)
    assert moment is None or math.isfinite(moment)
    for flap in parse_link_flaps(text + " lost carrier", now=1.8e9):
        assert flap.interface.startswith("ib")
