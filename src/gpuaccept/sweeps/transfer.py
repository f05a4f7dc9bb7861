"""Host<->device copies (pinned and pageable) and the GPU-to-GPU copy matrix."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from gpuaccept.results import CheckResult, Measurement
from gpuaccept.sweeps.common import (
    Progress,
    bench_result,
    no_progress,
)


def run_transfer(
    device: torch.device,
    sizes: Sequence[int],
    warmup: int,
    repeats: int,
    progress: Progress = no_progress,
) -> CheckResult:
    from gpuaccept.measure.transfer import DIRECTIONS, measure_peer_matrix, measure_transfer_gbps

    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    best: dict[str, float] = {}
    for size in sizes:
        for direction in DIRECTIONS:
            for pinned in (True, False) if device.type == "cuda" else (False,):
                figure = measure_transfer_gbps(device, direction, size, pinned, warmup, repeats)
                progress()
                label = f"{direction}_{'pinned' if figure.pinned else 'pageable'}"
                best[label] = max(best.get(label, 0.0), figure.median_gbps)
                rows.append(
                    {
                        "path": label,
                        "bytes": size,
                        "median_gbps": figure.median_gbps,
                        "peer_access": None,
                    }
                )
    peers = measure_peer_matrix(max(sizes), warmup, repeats) if device.type == "cuda" else []
    for peer in peers:
        rows.append(
            {
                "path": f"gpu{peer.source}->gpu{peer.target}",
                "bytes": peer.nbytes,
                "median_gbps": peer.median_gbps,
                "peer_access": "P2P on" if peer.peer_access else "P2P off",
            }
        )
    measurements = [
        Measurement(name=f"{label}_gbps", value=value, unit="GB/s") for label, value in best.items()
    ]
    message = ", ".join(f"{label} {value:.1f} GB/s" for label, value in best.items())
    if device.type == "cpu":
        message += " (CPU twin: both ends are host memory)"
    columns = [
        ("path", "path"),
        ("bytes", "bytes"),
        ("median_gbps", "median GB/s"),
        ("peer_access", "peer access"),
    ]
    # pinned host memory only means something with a GPU at the other end
    return bench_result(
        "transfer",
        [],
        message,
        started,
        columns,
        rows,
        measurements,
        peer_pairs=len(peers),
    )
