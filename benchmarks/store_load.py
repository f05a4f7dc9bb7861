"""The job's TCPStore under an isolation round's load (issue #33 §1): every rank of every node
starts a child each round, and each child meets its group through the store the job already has
(MASTER_ADDR:MASTER_PORT), as `distributed/group_children.py` does. At 1,000 nodes of 8 GPUs
that is 8,000 clients connecting at once to one server.

Each client here does what a child's `init_process_group` asks of the store for NCCL with
`device_id` (eager init): connect, then the group's rank 0 sets the group's id and every other
rank waits for it and reads it (NCCL's unique id through c10d's store), then all of them `add`
to a counter (c10d's per-group sequence), under the same `PrefixStore` key as a round
(`gpuaccept/isolation/{round}/{group}/`). No GPU, no NCCL: the store's side of the round alone.

Run:  python benchmarks/store_load.py [--clients 64,512,2048] [--group 8] [--processes 8]
        [--stores 1,32]

`--stores`: the counts of stores to compare, each client count measured with each: with one,
every client meets at the job's store (gpuaccept before 2026-11-27's thirteenth session); with
K, group g meets at store g mod K, as the rounds now meet at their group's first node's store
(each node serves the groups it leads). The K servers here share this host's cores and resolver;
in a fleet they are K hosts, so the figure for K is an upper bound too.

Prints, for each client count, the wall time from the first connect to the last read, and the
connect and read latencies' median and 99th percentile; the reference is the smallest count in
the same run. The clients are threads in --processes processes (TCPStore's calls release the
GIL), the server a process of its own; a 2-core machine measures the store's cost with the
clients' own cost on the same cores, so the figures are an upper bound for the server.

What it found (docs/results/2026-11-27-session12.md): the store's server resolves the address
of every client it accepts, on its one event-loop thread, before it answers anyone else (torch's
`UvTcpSocket::startRead` calls `formatSockAddr`, which calls `getnameinfo` without
NI_NUMERICHOST: a reverse DNS lookup; torch/csrc/distributed/c10d/TCPStoreLibUvBackend.cpp and
socket.cpp). A resolver that drops one query under a burst stops every client for its timeout
(5 s by default). So it also prints this host's reverse lookup of a client's address, as the
server sees it (an IPv4-mapped IPv6 address on a dual-stack socket), timed alone.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing
import socket
import statistics
import threading
import time
from typing import Any


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _serve(port: int, ready: Any, stop: Any) -> None:
    import torch.distributed as dist

    store = dist.TCPStore(  # type: ignore[attr-defined]
        "127.0.0.1",
        port,
        is_master=True,
        wait_for_workers=False,
        timeout=datetime.timedelta(seconds=600),
    )
    ready.set()
    stop.wait()
    del store


def _clients(ports: list[int], ranks: list[int], group: int, start: Any, out: Any) -> None:
    import torch.distributed as dist

    timings: list[tuple[float, float, float, float]] = []
    lock = threading.Lock()

    def one(rank: int) -> None:
        start.wait()
        began = time.monotonic()
        port = ports[(rank // group) % len(ports)]  # the group's store
        shared = dist.TCPStore(  # type: ignore[attr-defined]
            "127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=600)
        )
        connected = time.monotonic()
        store = dist.PrefixStore(f"gpuaccept/isolation/1/{rank // group}/", shared)  # type: ignore[attr-defined]
        if rank % group == 0:
            store.set("nccl_unique_id", "x" * 128)
        store.get("nccl_unique_id")
        store.add("seq", 1)
        done = time.monotonic()
        with lock:
            timings.append((began, connected - began, done - connected, done))

    threads = [threading.Thread(target=one, args=(rank,)) for rank in ranks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    out.put(timings)


def measure(clients: int, group: int, processes: int, stores: int = 1) -> dict[str, float]:
    context = multiprocessing.get_context("spawn")
    ports = [_free_port() for _ in range(stores)]
    stop, start = context.Event(), context.Event()
    readies = [context.Event() for _ in ports]
    out = context.Queue()
    servers = [
        context.Process(target=_serve, args=(port, ready, stop))
        for port, ready in zip(ports, readies, strict=True)
    ]
    for server in servers:
        server.start()
    for ready in readies:
        ready.wait(60)
    shares = [list(range(clients))[p::processes] for p in range(processes)]
    workers = [
        context.Process(target=_clients, args=(ports, share, group, start, out))
        for share in shares
        if share
    ]
    for worker in workers:
        worker.start()
    time.sleep(2.0)  # every worker imported torch and is waiting
    start.set()
    timings = [t for _ in workers for t in out.get(timeout=600)]
    for worker in workers:
        worker.join()
    stop.set()
    for server in servers:
        server.join(10)
    first = min(t[0] for t in timings)
    last = max(t[3] for t in timings)
    connects = sorted(t[1] for t in timings)
    reads = sorted(t[2] for t in timings)

    def p99(values: list[float]) -> float:
        return values[min(len(values) - 1, int(0.99 * len(values)))]

    return {
        "wall": last - first,
        "connect_median": statistics.median(connects),
        "connect_p99": p99(connects),
        "read_median": statistics.median(reads),
        "read_p99": p99(reads),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="64,512,2048")
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--stores", default="1")
    args = parser.parse_args()
    counts = [int(c) for c in args.clients.split(",")]
    store_counts = [int(c) for c in args.stores.split(",")]
    lookups = []
    for _ in range(20):
        began = time.monotonic()
        socket.getnameinfo(("::ffff:127.0.0.1", 4000, 0, 0), socket.NI_NUMERICSERV)
        lookups.append(time.monotonic() - began)
    print(
        "reverse lookup of a client's address, alone: median "
        f"{statistics.median(lookups) * 1e3:.2f} ms, max {max(lookups) * 1e3:.2f} ms (20 lookups)"
    )
    print(
        "| clients | stores | wall s | connect median, p99 ms | set/get/add median, p99 ms "
        "| wall / reference |"
    )
    print("|---|---|---|---|---|---|")
    reference = None
    for count in counts:
        for stores in store_counts:
            figures = measure(count, args.group, args.processes, stores)
            reference = reference or figures["wall"]
            _row(count, stores, figures, reference)


def _row(count: int, stores: int, figures: dict[str, float], reference: float) -> None:
    print(
        f"| {count} | {stores} | {figures['wall']:.2f} | "
        f"{figures['connect_median'] * 1e3:.1f}, {figures['connect_p99'] * 1e3:.1f} | "
        f"{figures['read_median'] * 1e3:.1f}, {figures['read_p99'] * 1e3:.1f} | "
        f"{figures['wall'] / reference:.1f}x |",
        flush=True,
    )


if __name__ == "__main__":
    main()
