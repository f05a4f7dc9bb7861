"""`accept --isolate --topology FILE` (issue #33 §1): which switch each node hangs off, as
`NODE SWITCH` lines or Slurm's topology.conf (SchedMD/slurm doc/man/man5/topology.conf.5), and
the refusals that come before any work."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.errors import InputError
from gpuaccept.suite.topology import expand_hostlist, parse_topology, read_topology

# topology.conf.5's own example (topology/tree), with its comments
SLURM_EXAMPLE = """\
##################################################################
# Slurm's network topology configuration file for use with the
# topology/tree plugin
##################################################################
SwitchName=s0 Nodes=dev[0-5]
SwitchName=s1 Nodes=dev[6-11]
SwitchName=s2 Nodes=dev[12-17]
SwitchName=s3 Switches=s[0-2]
"""


def test_slurms_example_gives_each_node_its_leaf_switch() -> None:
    topology = parse_topology(SLURM_EXAMPLE)
    assert len(topology) == 18
    assert topology["dev0"] == topology["dev5"] == "s0"
    assert topology["dev6"] == "s1"
    assert topology["dev17"] == "s2"
    assert "s3" not in topology.values()  # a switch of switches holds no node


def test_the_man_pages_host_lists_and_blocks_and_any_case() -> None:
    assert expand_hostlist("tux[0-3,12,18-20]") == [
        "tux0", "tux1", "tux2", "tux3", "tux12", "tux18", "tux19", "tux20",
    ]  # fmt: skip
    assert expand_hostlist("gpu[008-010],login1") == ["gpu008", "gpu009", "gpu010", "login1"]
    blocks = parse_topology("BlockName=block1 Nodes=node[1-2]\nBlockSizes=30,120\n")
    assert blocks == {"node1": "block1", "node2": "block1"}
    assert parse_topology("switchname=leaf nodes=a[1-2]") == {"a1": "leaf", "a2": "leaf"}
    # what `scontrol show topology` prints: more fields on the line
    shown = "SwitchName=leaf7 Level=0 LinkSpeed=1 Nodes=gpu[01-02] Switches=(null)"
    assert parse_topology(shown) == {"gpu01": "leaf7", "gpu02": "leaf7"}


def test_plain_lines_name_a_switch_per_node() -> None:
    text = "# node switch\ngpu01 rack-a\ngpu02 rack-a  # same rack\n\ngpu03 rack-b\n"
    assert parse_topology(text) == {"gpu01": "rack-a", "gpu02": "rack-a", "gpu03": "rack-b"}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "names no node"),
        ("# only a comment\n", "names no node"),
        ("gpu01\n", "give `NODE SWITCH`"),
        ("gpu01 rack-a extra\n", "give `NODE SWITCH`"),
        ("gpu01 rack-a\ngpu01 rack-b\n", "gpu01 is under 'rack-a' and 'rack-b'"),
        ("SwitchName=s0 Nodes=dev[5-1]\n", "empty or too large"),
        ("SwitchName=s0 Nodes=dev[a-b]\n", "not a number"),
        ("SwitchName=s0 Nodes=dev[0-999999999]\n", "empty or too large"),
        ("SwitchName=s0 Nodes=r[1-2]n[1-2]\n", "not a host list"),
        ("SwitchName=s0 Nodes=dev[1-2\n", "not a host list"),
    ],
)
def test_a_topology_that_cannot_be_read_is_said_with_its_line(text: str, said: str) -> None:
    with pytest.raises(InputError, match=said.replace("[", r"\[").replace("(", r"\(")):
        parse_topology(text, "t")


def test_a_topology_file_that_is_not_text_is_refused(tmp_path: Path) -> None:
    binary = tmp_path / "t.bin"
    binary.write_bytes(b"gpu01 \xff\xfe\n")
    with pytest.raises(InputError, match="not text"):
        read_topology(binary)
    nul = tmp_path / "t.nul"
    nul.write_bytes(b"gpu01 rack\x00\n")
    with pytest.raises(InputError, match="NUL"):
        read_topology(nul)


def test_isolate_is_refused_before_any_work_where_it_cannot_run(tmp_path: Path) -> None:
    topology = tmp_path / "topology.txt"
    topology.write_text("gpu01 rack-a\n")
    runner = CliRunner()
    for argv, said in (
        (["--isolate"], "run accept under torchrun or srun"),
        (["--topology", str(topology)], "--topology guides --isolate"),
        (["--isolate", "--topology", str(tmp_path / "none")], "no such file"),
    ):
        result = runner.invoke(app, ["accept", "--device", "cpu", "--no-history", *argv])
        assert result.exit_code == 2, result.output
        assert "[stack]" not in result.stdout
        (line,) = result.stderr.strip().splitlines()
        assert said in line, line


def test_a_topology_is_bounded_in_names_over_all_its_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each line's range was bounded, the file's total not: eight 40-byte lines of a million
    names took 28 s and 0.8 GB. The bound holds over the lines, a name given twice counted
    twice (each costs its making), and no name past it is made."""
    from gpuaccept.suite import topology

    monkeypatch.setattr(topology, "MAX_NODES", 10)
    assert len(parse_topology("SwitchName=s0 Nodes=a[0-4]\nSwitchName=s1 Nodes=b[0-4]\n")) == 10
    for text in (
        "SwitchName=s0 Nodes=a[0-4]\nSwitchName=s1 Nodes=b[0-5]\n",
        "SwitchName=s0 Nodes=a[0-6]\nSwitchName=s0 Nodes=a[0-6]\n",
        "SwitchName=s0 Nodes=a[0-9]\nSwitchName=s1 Nodes=extra\n",
    ):
        with pytest.raises(InputError, match=r"^t:2: Nodes=.*: more than 10 nodes in all$"):
            parse_topology(text, "t")
    made: list[int] = []
    real_range = range

    def counting_range(*args: int) -> range:
        made.append(len(real_range(*args)))
        return real_range(*args)

    monkeypatch.setattr(topology, "range", counting_range, raising=False)
    with pytest.raises(InputError):
        parse_topology("SwitchName=s0 Nodes=a[0-4]\nSwitchName=s1 Nodes=b[0-999999]\n", "t")
    assert made == [5]  # the second line's million names were never made
