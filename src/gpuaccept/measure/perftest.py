"""InfiniBand/RoCE write bandwidth with perftest's `ib_write_bw`, loopback through one port
(issue #24): a server and a client on this node, over the HCA and back, as aznhc's
`check_ib_bw_gdr` runs it (Azure/azurehpc-health-checks customTests/azure_ib_write_bw_gdr.nhc at
0e0a1ac: `-s 8388608 -x 0 -F --report_gbits`, `--use_cuda=<GPU>` for GPUDirect RDMA, the
client given this host).

The result is read from perftest's own table (linux-rdma/perftest src/perftest_parameters.h:
RESULT_FMT_G ` #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]`
and REPORT_FMT, one line per size): the average is the fourth field of the size's line, the
field aznhc reads.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass

MESSAGE_BYTES = 8_388_608
_HEADER = "BW average[Gb/sec]"
SERVER_START_SECONDS = 2.0  # aznhc sleeps 5 s; the client retries its connection meanwhile


class PerftestError(Exception):
    """ib_write_bw failed or printed no result: the message says which and why."""


def ib_write_bw_path() -> str | None:
    return shutil.which("ib_write_bw")


def parse_average_gbps(output: str, size: int = MESSAGE_BYTES) -> float:
    """The average bandwidth of `size`'s line under perftest's Gb/sec header."""
    lines = output.splitlines()
    for number, line in enumerate(lines):
        if _HEADER in line:
            for row in lines[number + 1 :]:
                fields = row.split()
                if len(fields) >= 4 and fields[0] == str(size):
                    try:
                        average = float(fields[3])
                    except ValueError:
                        break
                    if not (math.isfinite(average) and average > 0):  # "inf" parses as a float
                        raise PerftestError(
                            f"ib_write_bw printed an average of {fields[3]!r} for {size} bytes: "
                            "not a measured bandwidth"
                        )
                    return average
            break
    raise PerftestError(f"no {size}-byte result under '{_HEADER}' in ib_write_bw's output")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class LoopbackResult:
    device: str
    port: int
    gbps: float
    gpudirect_gpu: int | None  # the CUDA device the buffers lived on (GPUDirect RDMA)


def _arguments(
    program: str, device: str, port: int, tcp: int, infiniband: bool, cuda_index: int | None
) -> list[str]:
    arguments = [program, "-d", device, "-i", str(port), "-p", str(tcp), "-s", str(MESSAGE_BYTES)]
    arguments += ["-F", "--report_gbits"]
    if infiniband:
        arguments += ["-x", "0"]  # GID index 0, as aznhc gives it on InfiniBand
    if cuda_index is not None:
        arguments.append(f"--use_cuda={cuda_index}")
    return arguments


def _program() -> str:
    program = ib_write_bw_path()
    if program is None:
        raise PerftestError("ib_write_bw (perftest) is not on PATH")
    return program


def start_server(
    device: str, port: int, tcp: int, *, infiniband: bool, cuda_index: int | None = None
) -> subprocess.Popen[str]:
    """An ib_write_bw server on `device` port `port`, waiting for one client on TCP `tcp`."""
    arguments = _arguments(_program(), device, port, tcp, infiniband, cuda_index)
    return subprocess.Popen(arguments, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def stop_server(server: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        server.kill()
    server.wait(timeout=10)


def run_client(
    host: str,
    device: str,
    port: int,
    tcp: int,
    *,
    infiniband: bool,
    cuda_index: int | None = None,
    timeout_seconds: float = 120.0,
) -> float:
    """Write bandwidth (Gb/s) from `device` port `port` to the server at `host`:`tcp`."""
    arguments = [*_arguments(_program(), device, port, tcp, infiniband, cuda_index), host]
    try:
        client = subprocess.run(
            arguments, capture_output=True, text=True, timeout=timeout_seconds, check=False
        )
    except subprocess.TimeoutExpired:
        raise PerftestError(
            f"ib_write_bw on {device}:{port} did not finish in {timeout_seconds:g} s"
        ) from None
    if client.returncode != 0:
        last = (client.stderr or client.stdout).strip().splitlines()
        raise PerftestError(
            f"ib_write_bw on {device}:{port} exited {client.returncode}"
            + (f": {last[-1]}" if last else "")
        )
    return parse_average_gbps(client.stdout)


def loopback(
    device: str,
    port: int,
    *,
    infiniband: bool,
    cuda_index: int | None = None,
    timeout_seconds: float = 120.0,
) -> LoopbackResult:
    """Write bandwidth through `device` port `port`, server and client on this host."""
    tcp = _free_port()
    server = start_server(device, port, tcp, infiniband=infiniband, cuda_index=cuda_index)
    try:
        time.sleep(SERVER_START_SECONDS)
        if server.poll() is not None:
            why = (server.stderr.read() if server.stderr else "").strip().splitlines()
            raise PerftestError(
                f"ib_write_bw server on {device}:{port} exited {server.returncode}"
                + (f": {why[-1]}" if why else "")
            )
        gbps = run_client(
            "localhost",
            device,
            port,
            tcp,
            infiniband=infiniband,
            cuda_index=cuda_index,
            timeout_seconds=timeout_seconds,
        )
        return LoopbackResult(device, port, gbps, cuda_index)
    finally:
        stop_server(server)
