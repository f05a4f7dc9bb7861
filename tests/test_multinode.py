"""accept across nodes under torchrun, on CPU with gloo: stand-in nodes are torchrun agents on
this machine (static rendezvous), each with its own GPUACCEPT_NODE_NAME. One node is slowed or
made to corrupt data through a sitecustomize on its PYTHONPATH (tests/multinode_faults)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gpuaccept.measure.collectives import AllReduceFigure
from gpuaccept.results import CheckResult, RunReport, Status
from gpuaccept.suite.multinode import Launch, detect_launch, judge_pairs, pair_rounds
from tests.cpu_turns import cpu_turn

# a long end-to-end run (processes across stand-in nodes, real services): CI runs it in a step
# of its own (pytest -m service); the everyday command leaves it out
pytestmark = pytest.mark.service

REPO = Path(__file__).resolve().parent.parent
FAULTS = REPO / "tests" / "multinode_faults"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


NODE_SECONDS = 240  # the longest a stand-in node's run may take


def run_nodes(
    tmp_path: Path,
    names: list[str],
    ranks: int,
    args: list[str],
    faults: dict[str, str] | None = None,
    level: str = "quick",
    stop_after: str | None = None,
    extra_env: dict[str, dict[str, str]] | None = None,
) -> dict[str, tuple[int, str, RunReport]]:
    """Start one torchrun agent per stand-in node; (exit code, output, report) per node.

    `stop_after`: once the first node prints a line containing it, every agent gets SIGTERM,
    as a scheduler's eviction sends it."""
    port = _free_port()
    torchrun = str(Path(sys.executable).parent / "torchrun")
    processes = {}
    for rank, name in enumerate(names):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "WORLD_SIZE"))}
        env["GPUACCEPT_NODE_NAME"] = name
        env |= (extra_env or {}).get(name, {})
        if faults and name in faults:
            env["PYTHONPATH"] = os.pathsep.join(
                [str(FAULTS / faults[name]), env.get("PYTHONPATH", "")]
            )
        command = [
            torchrun,
            f"--nnodes={len(names)}",
            f"--node-rank={rank}",
            f"--nproc-per-node={ranks}",
            "--master-addr=127.0.0.1",
            f"--master-port={port}",
            "--no-python",
            str(Path(sys.executable).parent / "gpuaccept"),
            "accept",
            "--device",
            "cpu",
            "--level",
            level,
            "--no-history",
            "--report-dir",
            str(tmp_path / name),
            *args,
        ]
        processes[name] = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
    seen = ""
    if stop_after is not None:
        first = processes[names[0]]
        assert first.stdout is not None
        for line in first.stdout:
            seen += line
            if stop_after in line:
                break
        for process in processes.values():
            process.send_signal(signal.SIGTERM)
    outcomes = {}
    try:
        for name, process in processes.items():
            output, _ = process.communicate(timeout=NODE_SECONDS)
            output = (seen if name == names[0] else "") + output
            reports = sorted((tmp_path / name).glob("*.json"))
            assert len(reports) == 1, f"{name}: {reports}\n{output}"
            outcomes[name] = (
                process.returncode,
                output,
                RunReport.model_validate_json(reports[0].read_text()),
            )
    finally:
        # a job that hung must not outlive its test: torchrun passes SIGTERM on to its ranks
        for process in processes.values():
            if process.poll() is None:
                process.terminate()
        for process in processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    return outcomes


def check_of_every_node(
    results: dict[str, tuple[int, str, RunReport]], name: str
) -> list[CheckResult]:
    """The check called `name` from each node's report, in node order; its output when a node
    has none."""
    checks = []
    for node, (_code, output, report) in results.items():
        check = next((c for c in report.checks if c.name == name), None)
        assert check is not None, f"{node}: {output[-800:]}"
        checks.append(check)
    return checks


def test_every_node_reports_and_the_all_reduce_is_recorded_once(tmp_path: Path) -> None:
    nodes = run_nodes(
        tmp_path, ["node-a", "node-b"], 2, ["--only", "compute", "--only", "collectives"]
    )
    for name, (code, output, report) in nodes.items():
        assert code == 0, output
        assert f"[{name}] [RESULT] SUCCESS" in output
        assert report.environment["launch"]["node"] == name
        assert report.environment["launch"]["nodes"] == ["node-a", "node-b"]
        compute, collectives = report.checks
        assert compute.status is Status.PASS
        assert set(compute.details["per_device"]) == {"rank0", "rank1"}  # this node's ranks
        assert collectives.status is Status.PASS
        assert "on 4 gloo rank(s)" in collectives.message
    first = nodes["node-a"][2].checks[1]
    assert {m.name for m in first.measurements} >= {"allreduce_busbw_gbps"}
    assert first.details["nodes"] == ["node-a", "node-b"]
    second = nodes["node-b"][2].checks[1]
    assert second.measurements == []
    assert second.details == {"recorded_in": "node-a", "nodes": ["node-a", "node-b"]}


def test_a_node_that_corrupts_data_fails_every_report_and_is_named(tmp_path: Path) -> None:
    nodes = run_nodes(
        tmp_path, ["node-a", "node-b"], 2, ["--only", "collectives"], faults={"node-b": "corrupt"}
    )
    for code, output, report in nodes.values():
        assert code == 1, output
        (collectives,) = report.checks
        assert collectives.status is Status.FAIL
        assert collectives.message.startswith("wrong all-reduce results on node-b;")


def test_pairwise_names_the_slow_node(tmp_path: Path) -> None:
    names = ["node-a", "node-b", "node-c", "node-d"]
    nodes = run_nodes(
        tmp_path, names, 1, ["--only", "collectives", "--pairwise"], faults={"node-c": "slow"}
    )
    for code, output, report in nodes.values():
        assert code == 1, output
        pairwise = next(c for c in report.checks if c.name == "pairwise")
        assert pairwise.status is Status.FAIL
        assert pairwise.message.startswith("node-c is slow: median pair busbw")
        assert len(pairwise.details["rows"]) == 6  # every pair of 4 nodes once


def test_an_eviction_mid_check_still_writes_every_node_report(tmp_path: Path) -> None:
    """SIGTERM to every agent while the checks run: each node's report keeps what finished, the
    check under way is ERROR with the reason and the rest are listed as not run."""
    nodes = run_nodes(
        tmp_path,
        ["node-a", "node-b"],
        1,
        ["--only", "compute", "--only", "ddp", "--only", "events"],
        level="standard",
        stop_after="[COMPUTE]",
    )
    for _, output, report in nodes.values():
        assert [c.name for c in report.checks] == ["compute", "ddp", "events"], output
        # the signal reaches each node wherever it is: one check under way, none after it run
        # (or, when its peer stopped first and broke the group under it, says that)
        (stopped,) = [i for i, c in enumerate(report.checks) if c.status is Status.ERROR]
        why = report.checks[stopped].message
        assert why == "interrupted by SIGTERM" or why.startswith("a peer rank stopped:"), output
        for later in report.checks[stopped + 1 :]:
            assert (later.status, later.message) == (Status.SKIP, f"not run: {why}")
    # the first node had printed compute's verdict when the signal was sent
    assert nodes["node-a"][2].checks[0].status is not Status.ERROR


def test_pairwise_outside_a_launch_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpuaccept", "accept", "--pairwise", "--device", "cpu"],
        capture_output=True,
        text=True,
        check=False,
        env={k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "SLURM_NTASKS")},
    )
    assert done.returncode == 2
    assert "--pairwise compares nodes" in done.stderr
    assert done.stdout == ""


def _figure(busbw: float, wrong: int = 0) -> AllReduceFigure:
    # 2 ranks: busbw = algbw = bytes / seconds / 1e9
    return AllReduceFigure(2, 10**9, wrong, 1.0 / busbw)


def test_judge_pairs_names_the_slow_node_and_needs_three() -> None:
    names = ["a", "b", "c", "d"]
    pairs = {
        (0, 1): _figure(100),
        (0, 2): _figure(40),
        (0, 3): _figure(100),
        (1, 2): _figure(40),
        (1, 3): _figure(100),
        (2, 3): _figure(40),
    }
    result = judge_pairs(pairs, names)
    assert result.status is Status.FAIL
    assert result.message.startswith("c is slow: median pair busbw 40 GB/s")
    healthy = judge_pairs({pair: _figure(100) for pair in pairs}, names)
    assert healthy.status is Status.PASS
    two = judge_pairs({(0, 1): _figure(100)}, ["a", "b"])
    assert two.status is Status.WARN
    assert "pairwise needs 3+" in two.message
    broken = judge_pairs(
        {(0, 1): _figure(100), (0, 2): "RuntimeError: timeout", (1, 2): "RuntimeError: timeout"},
        ["a", "b", "c"],
    )
    assert broken.message == "every pair with c failed"  # its pairs not listed one by one
    # b and c each work with a and d, not with each other: the pair fails the check (it PASSED)
    link = judge_pairs(
        {**{pair: _figure(100) for pair in pairs}, (1, 2): "did not finish within 60 s"}, names
    )
    assert link.status is Status.FAIL
    assert link.message == "b + c failed: did not finish within 60 s"
    assert link.details["rows"][3] == {
        "pair": "b + c",
        "busbw_gbps": None,
        "wrong": None,
        "error": "did not finish within 60 s",
    }


def test_rounds_cover_every_pair_once_with_disjoint_pairs() -> None:
    for nodes in range(2, 9):
        rounds = pair_rounds(nodes)
        seen = [pair for r in rounds for pair in r]
        assert sorted(seen) == [(a, b) for a in range(nodes) for b in range(a + 1, nodes)]
        for r in rounds:
            members = [n for pair in r for n in pair]
            assert len(members) == len(set(members))


def test_launches_are_read_from_torchrun_and_srun() -> None:
    torchrun = {
        "WORLD_SIZE": "16",
        "RANK": "9",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "8",
        "GROUP_RANK": "1",
        "GPUACCEPT_NODE_NAME": "gpu017",
        "MASTER_ADDR": "gpu016",  # torchrun sets both
        "MASTER_PORT": "29500",
    }
    assert detect_launch(torchrun) == Launch(9, 16, 1, 8, 1, 2, "gpu017", "torchrun")
    srun = {
        "SLURM_NTASKS": "8",
        "SLURM_PROCID": "5",
        "SLURM_LOCALID": "1",
        "SLURM_NODEID": "1",
        "SLURM_NNODES": "2",
        "SLURMD_NODENAME": "gpu018",
        "MASTER_ADDR": "gpu017",
        "MASTER_PORT": "29500",
    }
    assert detect_launch(srun) == Launch(5, 8, 1, 4, 1, 2, "gpu018", "srun")
    assert detect_launch({}) is None
    assert detect_launch({"SLURM_NTASKS": "1", "SLURM_PROCID": "0"}) is None


@pytest.mark.parametrize(
    ("env", "text"),
    [
        ({"WORLD_SIZE": "8", "RANK": "3"}, "LOCAL_RANK=None: a multi-rank launch needs it"),
        (
            {"WORLD_SIZE": "6", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4"},
            "whole number of nodes",
        ),
        ({"SLURM_NTASKS": "4", "SLURM_PROCID": "0", "SLURM_NNODES": "2"}, "needs MASTER_ADDR"),
    ],
)
def test_an_incomplete_launch_is_a_one_line_input_error(env: dict[str, str], text: str) -> None:
    from gpuaccept.errors import InputError

    with pytest.raises(InputError, match=text):
        detect_launch(env)


def test_nodes_started_with_different_checks_are_refused_at_once(tmp_path: Path) -> None:
    """Each would wait on collectives the other never runs, for minutes, and write nothing:
    they agree on the plan at rendezvous and both stop with one line, exit 2."""
    import time

    port = _free_port()
    torchrun = str(Path(sys.executable).parent / "torchrun")
    processes = {}
    started = time.monotonic()
    for rank, (name, only) in enumerate((("node-a", "collectives"), ("node-b", "compute"))):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "WORLD_SIZE"))}
        env["GPUACCEPT_NODE_NAME"] = name
        command = [
            torchrun, "--nnodes=2", f"--node-rank={rank}", "--nproc-per-node=1",
            "--master-addr=127.0.0.1", f"--master-port={port}", "--no-python",
            str(Path(sys.executable).parent / "gpuaccept"), "accept", "--device", "cpu",
            "--level", "quick", "--no-history", "--only", only,
        ]  # fmt: skip
        processes[name] = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
    for process in processes.values():
        output, _ = process.communicate(timeout=180)
        assert process.returncode != 0, output
        assert "the ranks were started with different plans" in output, output
        assert "node-a runs --level=quick --device=cpu collectives" in output
    assert time.monotonic() - started < 150


def test_two_nodes_of_one_name_are_refused_at_once(tmp_path: Path) -> None:
    """Rounds, pairs and reports are kept by node name: two nodes both called node-a (a copied
    GPUACCEPT_NODE_NAME) would be judged as one. Both stop at rendezvous, one line, exit 2."""
    port = _free_port()
    torchrun = str(Path(sys.executable).parent / "torchrun")
    processes = []
    for rank in range(2):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "WORLD_SIZE"))}
        env["GPUACCEPT_NODE_NAME"] = "node-a"
        command = [
            torchrun, "--nnodes=2", f"--node-rank={rank}", "--nproc-per-node=1",
            "--master-addr=127.0.0.1", f"--master-port={port}", "--no-python",
            str(Path(sys.executable).parent / "gpuaccept"), "accept", "--device", "cpu",
            "--level", "quick", "--no-history", "--only", "stack",
            "--report-dir", str(tmp_path / str(rank)),
        ]  # fmt: skip
        processes.append(
            subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
            )
        )
    for process in processes:
        output, _ = process.communicate(timeout=180)
        assert process.returncode != 0, output
        assert (
            "two nodes of this job are both called 'node-a' (node ranks 0 and 1): give each node "
            "its own GPUACCEPT_NODE_NAME" in output
        ), output
    assert not list(tmp_path.rglob("*.json"))  # nothing judged, nothing written


def test_a_node_name_that_is_not_a_host_name_is_refused_before_any_work() -> None:
    from gpuaccept.errors import InputError
    from gpuaccept.suite.multinode import check_node_settings

    for bad in ("node a", "node-a\nFAIL", "x" * 254, "nœud", "tab\there"):
        with pytest.raises(InputError, match="is not a node's name"):
            check_node_settings({"GPUACCEPT_NODE_NAME": bad})
    for good in ("", "gpu042", "ip-10-0-1-7.ec2.internal", "x" * 253, "node_a:1"):
        check_node_settings({"GPUACCEPT_NODE_NAME": good})
    for bad in ("10.0.0.7 ", "a\nb", "x" * 254):
        with pytest.raises(InputError, match="is not a host or address"):
            check_node_settings({"GPUACCEPT_LOCAL_ADDR": bad})
    for good in ("10.0.0.7", "fe80::1%ib0", "gpu042-ib0.cluster"):
        check_node_settings({"GPUACCEPT_LOCAL_ADDR": good})
    from typer.testing import CliRunner

    from gpuaccept.cli import app

    result = CliRunner().invoke(
        app,
        ["accept", "--device", "cpu", "--no-history", "--only", "stack"],
        env={"GPUACCEPT_NODE_NAME": "two\nlines"},
    )
    assert result.exit_code == 2, result.output
    assert "GPUACCEPT_NODE_NAME='two\\nlines' is not a node's name" in result.output
    assert "[RUN]" not in result.output


def test_pairwise_ib_write_bw_names_the_node_slow_on_a_rail(tmp_path: Path) -> None:
    # every stand-in node reads the same HGX sysfs tree and runs perftest's stand-in, which
    # reports the rate the client node's FAKE_IB_BW gives (node-c: rail mlx5_3 at 190 Gb/s)
    from tests.fabric_tree import hgx_tree

    root = hgx_tree(tmp_path / "sysfs")
    fakes = Path(__file__).resolve().parent / "fake_tools"
    common = {
        "GPUACCEPT_SYSFS_ROOT": str(root),
        "PATH": f"{fakes}{os.pathsep}{os.environ['PATH']}",
        "GPUACCEPT_LOCAL_ADDR": "127.0.0.1",
    }
    names = ["node-a", "node-b", "node-c"]
    env = {name: dict(common) for name in names}
    env["node-c"]["FAKE_IB_BW"] = "mlx5_3=190,*=392"
    outcomes = run_nodes(tmp_path, names, 1, ["--only", "collectives", "--pairwise"], extra_env=env)
    for code, output, report in outcomes.values():
        assert code == 1, output
        pairs = next(c for c in report.checks if c.name == "pairwise-ib")
        assert pairs.status is Status.FAIL
        assert pairs.message == (
            "node-a mlx5_3:1 <- node-c: 190 Gb/s, below 0.9 x 400 Gb/s; node-b mlx5_3:1 <- "
            "node-c: 190 Gb/s, below 0.9 x 400 Gb/s; node-c is slow on rail mlx5_3 with all 2 "
            "peers"
        )
        assert len(pairs.details["rows"]) == 3 * 8  # every pair of nodes, every rail


def test_every_node_judges_its_own_fabric_against_the_expectation(tmp_path: Path) -> None:
    # each node fails (torchrun's agents wait at their exit barrier for agents whose workers
    # ended otherwise): node-a on mlx5_1, node-b on mlx5_2, each naming its own port
    from tests.fabric_tree import hgx_tree, port_dir

    quiet = tmp_path / "kernel.log"
    quiet.write_text("")
    env = {}
    for name, down in (("node-a", 1), ("node-b", 2)):
        root = hgx_tree(tmp_path / f"sysfs-{name}")
        (port_dir(root, down) / "state").write_text("1: DOWN\n")
        env[name] = {"GPUACCEPT_SYSFS_ROOT": str(root), "GPUACCEPT_KERNEL_LOG": str(quiet)}
    outcomes = run_nodes(
        tmp_path, ["node-a", "node-b"], 1, ["--only", "fabric", "--expect-nics", "8"], extra_env=env
    )
    for name, down in (("node-a", 1), ("node-b", 2)):
        code, output, report = outcomes[name]
        assert code == 1, output
        fabric = next(c for c in report.checks if c.name == "fabric")
        assert fabric.message == (
            f"mlx5_{down}:1 is DOWN (LinkUp), expected ACTIVE (LinkUp); 7 ACTIVE InfiniBand/RoCE "
            "rail port(s), 8 expected (--expect-nics or the node profile's nics)"
        )


@pytest.mark.slow
def test_the_llm_workload_trains_across_two_nodes(tmp_path: Path) -> None:
    """Issue #32: the workload's ranks span every node of the launch (FSDP2 over gloo here, over
    NCCL on GPUs); global rank 0 judges it once and every node's report carries it."""
    with cpu_turn():
        nodes = run_nodes(
            tmp_path, ["node-a", "node-b"], 1, ["--only", "workload"], level="standard"
        )
    for name, (code, output, report) in nodes.items():
        assert code == 0, f"{name}: {output}"
        (check,) = report.checks
        assert check.name == "workload"
        # stand-in nodes share this machine's 2 cores: their scaling may warn, never fail
        assert check.status in (Status.PASS, Status.WARN), output
        if check.status is Status.WARN:
            assert check.message.startswith("across 2 nodes each GPU trained"), output
    lead = nodes["node-a"][2].checks[0]
    assert lead.details["ranks"] == 2
    assert lead.details["node_count"] == 2
    figures = {m.name: m.value for m in lead.measurements}
    assert {"llm_rank0_straggler_score", "llm_rank1_straggler_score"} <= set(figures)
    # each node trained alone first (FSDP2 over its own ranks): the yardstick of the job's speed
    assert 0 < figures["llm_scaling_efficiency"] < 5


def test_the_nvlink_off_screen_is_not_run_where_this_rank_cannot_open_every_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The CUDA path's refusals, before any rank starts (no GPU here: the probes are stood in
    for): a rank bound to one GPU of eight, and GPUs in exclusive-process compute mode, leave the
    node unscreened, said so; nothing is started for it."""
    from dataclasses import replace

    from gpuaccept.probe import hardware
    from gpuaccept.probe.hardware import GpuInfo
    from gpuaccept.suite.isolation import NVLINK_OFF_ENV, NotScreened
    from gpuaccept.suite.multinode import MultiNodeRun
    from tests.checks.conftest import cpu_context

    def gpus(count: int) -> list[GpuInfo]:
        return [GpuInfo(i, "H100", (9, 0), 80 << 30, 132, f"GPU-{i}") for i in range(count)]

    started: list[tuple[object, ...]] = []

    def run_ranks(*args: object, **kwargs: object) -> list[str]:
        started.append((*args[1:], kwargs))
        return ["rank 0's figure", "rank 1's"]

    monkeypatch.setattr("gpuaccept.distributed.local_ranks.run_ranks", run_ranks)
    launch = Launch(0, 16, 0, 8, 0, 2, "node-a", "torchrun")
    run = MultiNodeRun(replace(cpu_context(), device_mode="cuda"), launch)
    monkeypatch.setattr(hardware, "list_cuda_gpus", lambda: gpus(1))
    assert run._node_collectives(NVLINK_OFF_ENV) == NotScreened(
        "this rank sees 1 of the node's 8 GPUs"
    )
    monkeypatch.setattr(hardware, "list_cuda_gpus", lambda: gpus(8))
    monkeypatch.setattr(
        hardware, "unshared_gpus", lambda uuids: [f"{u} (exclusive-process)" for u in uuids[:2]]
    )
    assert run._node_collectives(NVLINK_OFF_ENV) == NotScreened(
        "compute mode of GPU-0 (exclusive-process), GPU-1 (exclusive-process)"
    )
    assert started == []
    # every GPU reachable and shareable: ranks of its own on the eight, NCCL, NVLink off
    monkeypatch.setattr(hardware, "unshared_gpus", lambda uuids: [])
    assert run._node_collectives(NVLINK_OFF_ENV) == "rank 0's figure"
    ((world, _, _, backend, options),) = started
    assert (world, backend, options) == (8, "nccl", {"environ": NVLINK_OFF_ENV})


def test_a_rank_that_cannot_start_the_rounds_children_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The isolation rounds' children need the job's store and a GPU that takes a second
    process: without either, the rank says why (every rank then runs the rounds itself)."""
    from dataclasses import replace

    from gpuaccept.probe import hardware
    from gpuaccept.probe.hardware import GpuInfo
    from gpuaccept.suite.multinode import MultiNodeRun
    from tests.checks.conftest import cpu_context

    launch = Launch(1, 16, 1, 8, 0, 2, "node-a", "torchrun")
    cpu = MultiNodeRun(cpu_context(), launch)
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.setenv("MASTER_PORT", "29500")
    assert cpu._round_refusal() == "no MASTER_ADDR and MASTER_PORT for their children to meet at"
    monkeypatch.setenv("MASTER_ADDR", "10.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "not-a-port")
    assert cpu._round_refusal() == "no MASTER_ADDR and MASTER_PORT for their children to meet at"
    monkeypatch.setenv("MASTER_PORT", "29500")
    assert cpu._round_refusal() is None
    gpus = [GpuInfo(i, "H100", (9, 0), 80 << 30, 132, f"GPU-{i}") for i in range(8)]
    monkeypatch.setattr(hardware, "list_cuda_gpus", lambda: gpus)
    monkeypatch.setattr(
        hardware, "unshared_gpus", lambda uuids: [f"{u} (exclusive-process)" for u in uuids]
    )
    cuda = MultiNodeRun(replace(cpu_context(), device_mode="cuda"), launch)
    # this rank's own GPU (local rank 1), not the node's first
    assert cuda._round_refusal() == (
        "node-a's compute mode refuses a second process (GPU-1 (exclusive-process))"
    )
    emptied: list[bool] = []
    monkeypatch.setattr(hardware, "unshared_gpus", lambda uuids: [])
    monkeypatch.setattr("torch.cuda.empty_cache", lambda: emptied.append(True))
    assert cuda._round_refusal() is None
    assert emptied == [True]  # the children get what this rank's allocator held
