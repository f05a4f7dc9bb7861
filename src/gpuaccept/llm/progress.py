"""The training log as operators read one: rank 0's per-step figures (llm.train's JSON lines),
with units, and on the CPU twin what they mean there."""

from __future__ import annotations

import json
from typing import Any

GiB = 1024**3


def progress_line(
    raw: str, flops_per_token: int, peak_tflops: float | None, cpu: bool
) -> str | None:
    """One log line from a JSON line of llm.train's step log (None for a line that is not one:
    a line cut short while the rank wrote it)."""
    try:
        step: dict[str, Any] = json.loads(raw)
        number, steps, loss = int(step["step"]), int(step["steps"]), float(step["loss"])
    except (ValueError, KeyError, TypeError):
        return None
    rate = step.get("tokens_per_second")
    who = "per rank" if cpu else "per GPU"
    if isinstance(rate, (int, float)):
        tflops = rate * flops_per_token / 1e12
        speed = f"{rate:,.0f} tokens/s {who}, {tflops:.2f} TFLOPS {who}"
        if cpu:
            speed += " (CPU twin: no GPU peak, no MFU)"
        elif peak_tflops:
            speed += f", MFU {tflops / peak_tflops:.1%}"
        else:
            speed += ", MFU unknown (no peak for this GPU)"
    else:
        speed = "no time measured"
    if "memory_active_bytes" in step:
        memory = (
            f"memory {step['memory_active_bytes'] / GiB:.1f} GiB active, "
            f"{step['memory_reserved_bytes'] / GiB:.1f} GiB reserved"
        )
    else:
        memory = "memory not tracked on the CPU"
    spread = (
        f"step {step['step_seconds_min'] * 1e3:.0f}/{step['step_seconds_median'] * 1e3:.0f}/"
        f"{step['step_seconds_max'] * 1e3:.0f} ms min/median/max since the last line"
    )
    return (
        f"[TRAIN] step {number + 1}/{steps}: loss {loss:.3f} nats, grad norm "
        f"{float(step['grad_norm']):.3f}, {speed}, {memory}, {spread}"
    )
