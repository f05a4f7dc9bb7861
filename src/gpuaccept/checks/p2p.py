"""p2p: copy bandwidth between every ordered pair of GPUs, judged against the model's NVLink
floor (PCIe models have none: their pairs are reported, unchecked). One GPU has no pair. The
CPU twin copies one host buffer into another and judges it against the sanity floor."""

from __future__ import annotations

from typing import Any

from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings, Target, measurement_targets
from gpuaccept.measure.transfer import measure_host_pair, measure_peer_matrix
from gpuaccept.results import CheckResult, Status

_COLUMNS = [["pair", "pair"], ["gbps", "GB/s"], ["peer_access", "peer access"]]


def run(context: CheckContext) -> CheckResult:
    settings = context.settings
    findings = Findings("p2p", "TRANSFER")
    if context.cpu_mode:
        figures = [measure_host_pair(settings.transfer_bytes, 2, settings.transfer_repeats)]
        targets = {0: Target(None, "cpu")}
    else:
        targets = {t.index: t for t in measurement_targets(context) if t.index is not None}
        if len(targets) < 2:
            return CheckResult(
                name="p2p",
                area="TRANSFER",
                status=Status.SKIP,
                message=f"{len(targets)} GPU: no pair to copy between",
            )
        figures = measure_peer_matrix(settings.transfer_bytes, 2, settings.transfer_repeats)
    rows: list[dict[str, Any]] = []
    for figure in figures:
        source = targets.get(figure.source, Target(figure.source, "unknown"))
        pair = (
            "cpu buffer -> buffer"
            if context.cpu_mode
            else f"gpu{figure.source} -> gpu{figure.target}"
        )
        findings.judge(context, source, "p2p_gbps", figure.median_gbps, "GB/s", where=pair)
        rows.append({"pair": pair, "gbps": figure.median_gbps, "peer_access": figure.peer_access})
    no_peer = [row["pair"] for row in rows if not row["peer_access"] and not context.cpu_mode]
    if no_peer:
        findings.warnings.append(
            f"no peer access (copies bounce through the host): {', '.join(no_peer)}"
        )
    findings.details = {"columns": _COLUMNS, "rows": rows}
    if context.cpu_mode:  # no GPU pair was copied between: say what was measured instead
        return findings.conclude(
            "a host buffer copied to another within the sanity floor (CPU twin)"
        )
    return findings.conclude(f"{len(rows)} pair(s) within reference")
