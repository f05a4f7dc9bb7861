"""A history behind a directory this user may not search (issue #51's operator review): every
command that opens it says so in one line and exits 2, never a PermissionError traceback (Path's
exists and is_dir raise it; before, `history list`, `history fleet`, `report ID` and `accept`
traced back)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuaccept.store.base import HistoryError
from gpuaccept.store.history import SqliteHistory

# root searches any directory: drop the capabilities that let it, as an operator's own user has none
_AS_A_USER = (
    ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search"]
    if os.geteuid() == 0
    else []
)


@pytest.fixture
def unsearchable(tmp_path: Path) -> Iterator[Path]:
    if _AS_A_USER and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: no user to lose the right to search")
    closed = tmp_path / "closed"
    closed.mkdir()
    closed.chmod(0)
    yield closed / "h.sqlite"
    closed.chmod(0o700)


@pytest.mark.parametrize(
    "command",
    [
        ["history", "list"],
        ["history", "fleet"],
        ["history", "show", "1"],
        ["report", "1"],
        ["accept", "--device", "cpu", "--level", "quick", "--only", "stack", "--no-history"],
    ],
)
def test_a_history_behind_an_unsearchable_directory_is_one_line_and_exit_2(
    unsearchable: Path, command: list[str]
) -> None:
    if command[0] == "accept":  # --no-history: the history option is the one refused below
        command = [*command[:-1], "--history", str(unsearchable)]
    else:
        command = [*command, "--history", str(unsearchable)]
    done = subprocess.run(
        [*_AS_A_USER, sys.executable, "-m", "gpuaccept", *command],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"gpuaccept {' '.join(command[:2] if command[0] == 'history' else command[:1])}: error: "
        f"history {unsearchable}: cannot be reached: Permission denied"
    ]


def test_the_store_refuses_it_as_a_history_error(tmp_path: Path) -> None:
    """In-process, where the test can make the check itself fail: an OSError from a path's
    metadata is a HistoryError naming the path."""

    class Unreachable(type(tmp_path)):  # type: ignore[misc]
        def is_dir(self) -> bool:
            raise PermissionError(13, "Permission denied")

    where = Unreachable(tmp_path / "h.sqlite")
    refused = pytest.raises(HistoryError, match=r"h\.sqlite: cannot be reached: Permission denied")
    with refused, SqliteHistory.open_file(where):
        pass
