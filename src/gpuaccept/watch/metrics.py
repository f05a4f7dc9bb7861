"""What a Prometheus scrape of `gpuaccept watch` reads: the daemon's own health (polls, NVML up or
not, the history's and the action layer's failures), the findings raised, and each GPU's figures
of the last poll. One collector over the loop's state, read under its lock, so a scrape never
sees half a poll; served by prometheus_client's own HTTP server, on loopback unless told."""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from gpuaccept.watch.debounce import Raised
from gpuaccept.watch.poll import PORTS, Poll

# a port as the ports' findings name it first: 'mlx5_0:1 link_downed grew ...', 'mlx5_0:1: ...'
_PORT = re.compile(r"^([A-Za-z0-9_.-]+:\d+)[: ]")

# nvmlClocksEventReason* bits (nvml.h; pynvml's constants): kept apart on purpose, the brake is
# a power-delivery fault and the cap is how the power limit is enforced (NVSentinel PR #1668)
HW_POWER_BRAKE = 0x80
SW_POWER_CAP = 0x04


@dataclass
class WatchState:
    """The loop's counts and last poll; the loop writes, the scrape reads, under `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    polls: int = 0
    poll_errors: int = 0
    nvml_errors: int = 0
    history_writes: int = 0
    history_errors: int = 0
    history_pending: int = 0
    history_dropped: int = 0
    action_calls: int = 0
    action_errors: int = 0
    events: Counter[tuple[str, str]] = field(default_factory=Counter)
    last: Poll | None = None
    raised: tuple[Raised, ...] = ()


def _severity(raised: Raised) -> str:
    return "fail" if raised.finding.fails else "warn"


def _cause(raised: Raised) -> str:
    text = raised.finding.text
    kind, code = getattr(text, "kind", None), getattr(text, "code", None)
    return f"{kind}:{code}" if kind else ""


def _port(raised: Raised) -> str:
    """The InfiniBand/RoCE port ('mlx5_0:1') a ports' finding names first, else ''."""
    if raised.finding.scope != PORTS:
        return ""
    found = _PORT.match(str(raised.finding.text))
    return found[1] if found else ""


class WatchCollector(Collector):
    def __init__(self, state: WatchState, node: str) -> None:
        self.state = state
        self.node = node

    def collect(self) -> Iterator[Any]:
        with self.state.lock:
            state, last, raised = self.state, self.state.last, self.state.raised
            counts = {
                "polls": state.polls,
                "poll_errors": state.poll_errors,
                "nvml_errors": state.nvml_errors,
                "history_writes": state.history_writes,
                "history_errors": state.history_errors,
                "history_dropped": state.history_dropped,
                "action_calls": state.action_calls,
                "action_errors": state.action_errors,
            }
            pending, events = state.history_pending, dict(state.events)
        node = [self.node]

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            family = CounterMetricFamily(f"gpuaccept_watch_{name}", doc, labels=["node"])
            family.add_metric(node, value)
            return family

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(f"gpuaccept_watch_{name}", doc, labels=["node"])
            family.add_metric(node, value)
            return family

        yield counter("polls", "Polls made.", counts["polls"])
        yield counter(
            "poll_errors", "Polls that failed on a fault of the watch's own.", counts["poll_errors"]
        )
        yield counter(
            "nvml_errors", "Polls in which NVML could not be read.", counts["nvml_errors"]
        )
        yield counter("history_writes", "Records written to the history.", counts["history_writes"])
        yield counter(
            "history_write_errors",
            "Writes to the history that failed (a full disk, an unreachable database).",
            counts["history_errors"],
        )
        yield counter(
            "history_dropped",
            "Records given up after the pending queue filled.",
            counts["history_dropped"],
        )
        yield gauge("history_pending", "Records waiting for the history to take them.", pending)
        yield counter(
            "action_calls", "Findings handed to the action layer.", counts["action_calls"]
        )
        yield counter(
            "action_errors",
            "Hand-overs to the action layer that failed (the scheduler did not answer).",
            counts["action_errors"],
        )
        if last is not None:
            yield gauge("last_poll_timestamp_seconds", "When the last poll ran.", last.at)
            yield gauge("poll_duration_seconds", "How long the last poll took.", last.seconds)
            yield gauge("nvml_up", "1 when the last poll read NVML.", float(last.nvml_up))
            yield gauge(
                "kernel_log_readable",
                "1 when the last poll could read the kernel log.",
                float(last.kernel_log_readable),
            )
            yield gauge(
                "ports_readable",
                "1 when the last poll could read the InfiniBand/RoCE ports' counters.",
                float(last.ports_readable),
            )
        failing = [r for r in raised if r.finding.fails]
        yield gauge("node_fit", "1 while no failing finding is raised.", float(not failing))
        by_labels: Counter[tuple[str, str, str, str, str]] = Counter(
            (r.finding.check, _severity(r), r.finding.gpu, _cause(r), _port(r)) for r in raised
        )
        family = GaugeMetricFamily(
            "gpuaccept_watch_findings",
            "Findings raised now, by the accept check whose rules judged them.",
            labels=["node", "check", "severity", "gpu", "cause", "port"],
        )
        for labels, count in sorted(by_labels.items()):
            family.add_metric([self.node, *labels], count)
        yield family
        total = CounterMetricFamily(
            "gpuaccept_watch_events",
            "Events raised (NVML events, counters that grew between polls).",
            labels=["node", "check", "severity"],
        )
        for (check, severity), count in sorted(events.items()):
            total.add_metric([self.node, check, severity], count)
        yield total
        if last is not None:
            yield from _gpu_families(self.node, last)


def _gpu_families(node: str, poll: Poll) -> Iterator[GaugeMetricFamily]:
    figures = (
        ("temperature_celsius", "GPU temperature.", lambda g: g.temperature_c),
        ("power_watts", "Board power draw.", lambda g: g.power_w),
        ("sm_clock_mhz", "SM clock.", lambda g: g.sm_clock_mhz),
        ("clock_event_reasons", "NVML clock-event reasons mask.", lambda g: g.reasons_mask),
        (
            "hw_power_brake",
            "1 while the hardware power brake (0x80) holds the clocks.",
            lambda g: (
                None if g.reasons_mask is None else float(bool(g.reasons_mask & HW_POWER_BRAKE))
            ),
        ),
        (
            "sw_power_cap",
            "1 while the software power cap (0x04) holds the clocks (not a fault).",
            lambda g: (
                None if g.reasons_mask is None else float(bool(g.reasons_mask & SW_POWER_CAP))
            ),
        ),
        ("busy", "1 when NVML does not report the GPU idle.", lambda g: g.busy),
        ("pcie_link_gen", "PCIe link generation now.", lambda g: g.pcie_gen),
        ("pcie_link_gen_max", "PCIe generation the GPU and slot reach.", lambda g: g.pcie_gen_max),
        ("pcie_link_width", "PCIe link width now.", lambda g: g.pcie_width),
        ("pcie_link_width_max", "PCIe width the GPU reaches.", lambda g: g.pcie_width_max),
    )
    for name, doc, read in figures:
        family = GaugeMetricFamily(
            f"gpuaccept_watch_gpu_{name}", doc, labels=["node", "gpu", "uuid"]
        )
        for gpu in poll.gpus:
            value = read(gpu)
            if value is not None:
                family.add_metric([node, str(gpu.index), gpu.uuid or ""], float(value))
        yield family


def serve(state: WatchState, node: str, address: str, port: int) -> tuple[Any, int]:
    """Start serving /metrics; (the server, to shut down, and the port it listens on)."""
    from prometheus_client import start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(WatchCollector(state, node))
    server, _thread = start_http_server(port, addr=address, registry=registry)
    return server, int(server.server_address[1])


def render(state: WatchState, node: str) -> str:
    """The exposition text of one scrape (tests, `--once`)."""
    from prometheus_client import generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(WatchCollector(state, node))
    return generate_latest(registry).decode()
