"""`gpuaccept watch`: the host daemon between jobs; commands.watch polls, judges and records."""

from __future__ import annotations

import typer

from gpuaccept.cli.declared import command_of
from gpuaccept.cli.render import CONSOLE
from gpuaccept.commands.watch import WatchRequest


@command_of(WatchRequest)
def watch(request: WatchRequest) -> None:
    """Poll NVML and the kernel log between jobs, judge each signal by accept's rules, serve
    Prometheus metrics, record changes in the history and hand failures to the action layer.

    A state (ECC, remapping, a power brake, a link) is raised once it held --debounce-polls
    polls in a row; an event (an XID, counters that grew) when seen. SIGTERM stops it cleanly:
    the history is flushed and the exit is 0. docs/fleet-loops.md says more.
    """
    from gpuaccept.commands.watch import run

    result = run(request, CONSOLE)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
