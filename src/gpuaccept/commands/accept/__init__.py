"""`gpuaccept accept`, the acceptance suite, as a library call: `run(AcceptRequest(...), out)`.

request.py holds what the options give; plan.py refuses bad input before any work; one_node.py
runs the suite on this node's GPUs and writes its outputs; across_nodes.py is the same run under
torchrun or srun; early.py the report of a run signalled before it had one. Nothing here imports
torch at import time: the CLI's --help stays fast.
"""

from gpuaccept.commands.accept.command import AcceptResult, run
from gpuaccept.commands.accept.request import AcceptRequest

__all__ = ["AcceptRequest", "AcceptResult", "run"]
