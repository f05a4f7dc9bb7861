"""`gpuaccept watch`: the host daemon between jobs; commands.watch polls, judges and records."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuaccept.cli.options import (
    ACT_STATE,
    BREAKER_MINUTES,
    BREAKER_PARTITION,
    BREAKER_SHARE,
    HISTORY,
    NO_HISTORY,
    RESUME_LEVEL,
    option,
    request_from,
    rules_option,
)
from gpuaccept.cli.render import CONSOLE


def watch(
    interval: float = option(10.0, "--interval", "SECONDS", "Seconds between polls (0.1-3600)."),
    debounce_polls: int = option(3, "--debounce-polls", "N", "Polls a state holds before raised."),
    metrics_port: int = option(9847, "--metrics-port", "PORT", "Prometheus port (0: any free)."),
    metrics_address: str = option(
        "127.0.0.1", "--metrics-address", "ADDR", "Address to serve metrics on (loopback)."
    ),
    once: bool = typer.Option(
        False,
        "--once",
        help="One poll, judged at once; exit 1 on a fail, 3 if NVML could not be read.",
    ),
    polls: int | None = option(
        None, "--polls", "N", "Stop after N polls (default: run until told)."
    ),
    history: str | None = HISTORY,
    no_history: bool = NO_HISTORY,
    act: str = option("shadow", "--act", "MODE", "report, shadow or enforce (as `act slurm`)."),
    node: str | None = option(None, "--node", "NAME", "The scheduler's name for this node."),
    partition: str | None = BREAKER_PARTITION,
    rules: Path | None = rules_option(),
    resume_level: str = RESUME_LEVEL,
    breaker_share: float = BREAKER_SHARE,
    breaker_minutes: float = BREAKER_MINUTES,
    state: Path | None = ACT_STATE,
    nvml_events: bool = typer.Option(
        True, "--nvml-events/--no-nvml-events", help="Watch NVML's events beside the polls."
    ),
) -> None:
    """Poll NVML and the kernel log between jobs, judge each signal by accept's rules, serve
    Prometheus metrics, record changes in the history and hand failures to the action layer.

    A state (ECC, remapping, a power brake, a link) is raised once it held --debounce-polls
    polls in a row; an event (an XID, counters that grew) when seen. SIGTERM stops it cleanly:
    the history is flushed and the exit is 0. docs/fleet-loops.md says more.
    """
    options = dict(locals())
    from gpuaccept.commands.watch import WatchRequest, run

    result = run(request_from(WatchRequest, options), CONSOLE)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
