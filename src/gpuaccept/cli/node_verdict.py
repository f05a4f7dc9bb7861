"""`gpuaccept node-verdict`: a run's verdict as Kubernetes node labels and a taint, with the
guards `act slurm` has (issue #31 §2) when the cluster's state is given.

The options and the exit; what is checked, decided, done and said is commands.node_verdict's.
"""

from __future__ import annotations

import typer

from gpuaccept.cli.declared import command_of
from gpuaccept.cli.render import CONSOLE
from gpuaccept.commands.node_verdict import NodeVerdictRequest


@command_of(NodeVerdictRequest)
def node_verdict(request: NodeVerdictRequest) -> None:
    """Record each node's verdict on it as labels and a taint (kubectl commands, or --apply).

    Reads `gpuaccept accept` reports. pass on the GPUs: gpuaccept.io/verdict=pass and the
    gpuaccept.io/unfit taint removed; fail: verdict=fail, gpuaccept.io/failed=CHECKS,
    gpuaccept.io/action=ACTION and the NoSchedule taint gpuaccept.io/unfit; not judged,
    interrupted or CPU mode: the taint is left as it is. A pass below --resume-level (default
    standard) lifts no taint. Of several reports of one node, the newest run is applied and the
    older ones are its past.

    With the cluster's state (--cluster FILE or --apply) the guards of `act slurm` decide the
    taint: a soft failure (recommended: rerun) taints only after --debounce runs in a row; no
    taint when two other nodes on the same software stack were tainted for the same checks in
    the last --breaker-minutes (a regression of the stack) or when gpuaccept tainted
    --breaker-share of the pool in that time (the breaker); only gpuaccept's own taint is
    lifted; a cordon is never lifted, and a node cordoned or tainted NoSchedule/NoExecute by
    anyone else is never tainted (refused, guard not-ours). A refusal by the breaker trips it
    until a person resets it (`gpuaccept act breaker reset`, --state); a regression found is
    held until `gpuaccept act regression clear`. The taint's reason and time are kept in the
    annotations gpuaccept.io/reason and gpuaccept.io/tainted-at. Exit: 0; 2 a wrong input,
    nothing changed; 3 the Kubernetes API missing or not answering; 4 a guard refused a taint.
    """
    from gpuaccept.commands.node_verdict import run_node_verdict

    result = run_node_verdict(request, CONSOLE)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
