"""Put on PYTHONPATH of one stand-in node: it cannot start the isolation rounds' children (as a
node whose GPUs' compute mode refuses a second process), so every rank runs the rounds in the
job's own ranks. (Python imports sitecustomize at start-up, in every process of the node.)"""

from gpuaccept.suite import multinode

multinode.MultiNodeRun._round_refusal = lambda self: "this node's stand-in refusal"  # type: ignore[method-assign]
