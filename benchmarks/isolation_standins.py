#!/usr/bin/env python3
"""`accept --isolate` on N torchrun stand-in nodes on this machine (gloo, one rank each), some of
them slowed on purpose (tests/multinode_faults/slow: each all-reduce of data sleeps 0.25 s), as
issue #33 §1 asks to measure (8 to 16 nodes, one and two slow). Prints the verdict, the suspects,
the rounds and each round's groups with what they measured.

Usage: benchmarks/isolation_standins.py MIN_BUSBW [SLOW,SLOW...] [--nodes 16]
Calibrate MIN_BUSBW first with no slow node and a tiny floor: the whole job's busbw on this
machine (16 gloo ranks on 2 cores: about 0.025 GB/s), then a floor about half of it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.test_multinode import check_of_every_node, run_nodes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("min_busbw")
    parser.add_argument("slow", nargs="?", default="")
    parser.add_argument("--nodes", type=int, default=16)
    args = parser.parse_args()
    names = [f"node-{i:02d}" for i in range(args.nodes)]
    slow = [name for name in args.slow.split(",") if name]
    with tempfile.TemporaryDirectory() as scratch:
        began = time.monotonic()
        results = run_nodes(
            Path(scratch),
            names,
            1,
            ["--only", "collectives", "--isolate", "--min-busbw", args.min_busbw],
            faults=dict.fromkeys(slow, "slow"),
            extra_env={key: {"SLOW_ALL_REDUCE_SECONDS": "0.25"} for key in slow},
        )
        seconds = time.monotonic() - began
    checks = check_of_every_node(results, "isolation")
    first = checks[0]
    print(
        json.dumps(
            {
                "nodes": args.nodes,
                "slow": slow,
                "min_busbw": float(args.min_busbw),
                "seconds": round(seconds, 1),
                "same_on_every_node": all(c.details == first.details for c in checks),
                "status": first.status.value,
                "suspects": first.details.get("suspects"),
                "rounds": first.details.get("rounds"),
                "rounds_in": first.details.get("rounds_in"),
                "message": first.message,
                "evidence": [
                    [e["round"], e["stage"], e["nodes"], e["passed"], e["said"], e.get("met_at")]
                    for e in first.details["evidence"]
                    if e["stage"] != "screen"
                ],
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
