"""Rounds to find k bad nodes among N with the isolation planner (issue #33 §1), beside the N - 1
rounds of `accept --pairwise`, on simulated fleets: no ranks, the planner's own decisions.

Run:  python benchmarks/isolation_sim.py [--seeds 5] [--round-seconds 45] [--gpus-per-node 8]

A bad node here is one that passes its own screen and fails any job with another node (a NIC,
a cable: the case bisection is for); nodes that fail alone are named by the screen in one round.
The wall time is modelled: every round, bisection's or pairwise's, costs --round-seconds (a job
launch and one all-reduce test), since the groups of a round run at the same time. Nodes of
several GPUs get the second screen, with NVLink off (one round more), as `accept --isolate` runs.
Measured for two nodes on one H200 (docs/results/2026-11-27-nvidia-h200-isolation-children.md),
each round's groups in processes of their own (start, torch, NCCL's communicator, the
collectives): 6.9 s for two rounds (a screen that passed, a whole round NCCL refused at its
start: two ranks on one GPU), 16.8 s for a screen whose node hangs (its work deadline, 11.6 s,
and the start). The 45 s default is for a fleet's rounds, where NCCL's start across the
group and the slowest group's deadline set the pace; these figures say what the two-node floor is.
"""

from __future__ import annotations

import argparse
import random
import statistics

from gpuaccept.suite.isolation import Group, isolate, round_ceiling


def rounds_for(count: int, bad: int, seed: int, nvlink_off: bool) -> tuple[int, bool]:
    nodes = [f"n{i:05d}" for i in range(count)]
    wrong = set(random.Random(seed).sample(nodes, bad))

    def run(groups: tuple[Group, ...]) -> list[bool]:
        return [len(g) < 2 or not (set(g) & wrong) for g in groups]

    found = isolate(nodes, run, nvlink_off=nvlink_off)
    return len(found.rounds), set(found.suspects) == wrong


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--round-seconds", type=float, default=45.0)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    args = parser.parse_args()
    nvlink_off = args.gpus_per_node >= 2
    print(
        "| N | k | rounds (median, max over seeds) | ceiling 2k*log2(N)+k | all found | "
        "modelled wall | pairwise rounds | pairwise wall |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for count in (64, 256, 1024, 4096):
        for bad in (1, 2, 3, 4):
            runs = [rounds_for(count, bad, seed, nvlink_off) for seed in range(args.seeds)]
            rounds = [r for r, _ in runs]
            ceiling = round_ceiling(count, bad)
            wall = max(rounds) * args.round_seconds / 60
            pairwise = count - 1
            print(
                f"| {count} | {bad} | {statistics.median(rounds):g}, {max(rounds)} | {ceiling} | "
                f"{all(ok for _, ok in runs)} | {wall:.1f} min | {pairwise} | "
                f"{pairwise * args.round_seconds / 3600:.1f} h |"
            )


if __name__ == "__main__":
    main()
