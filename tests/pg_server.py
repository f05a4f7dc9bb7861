"""A real PostgreSQL server for the tests, started from the binaries Debian's `postgresql`
package installs (`initdb`, `pg_ctl`), in a temporary directory, and stopped after.

PostgreSQL refuses to run as root: under root (CI, containers) the server runs as the
`postgres` user the package creates, in a directory that user owns. The tests connect over TCP
with a password read from a PGPASSFILE, as a fleet's nodes would; a server that cannot be
started makes the tests that need it skip, saying why.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

USER = "gpuaccept"


def binaries() -> Path | None:
    """The directory of initdb and pg_ctl: on PATH, else Debian's /usr/lib/postgresql/N/bin."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    return versions[-1].parent if versions else None


def why_not() -> str | None:
    """Why no server can be started here; None when one can."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install -e '.[test]')"
    if binaries() is None:
        return "no PostgreSQL server binaries (Debian: apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and no 'postgres' user to run the server as"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Server:
    port: int
    password: str
    passfile: Path
    home: Path

    def uri(self, database: str = "postgres", user: str = USER, **query: str) -> str:
        tail = "&".join(f"{k}={v}" for k, v in query.items())
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}" + (
            f"?{tail}" if tail else ""
        )

    def env(self) -> dict[str, str]:
        """What a client of this server needs in its environment: the password file."""
        return {"PGPASSFILE": str(self.passfile)}

    def sql(self, statement: str, database: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(
            self.uri(database), autocommit=True, passfile=str(self.passfile)
        ) as connection:
            connection.execute(statement)

    def database(self, name: str | None = None) -> str:
        """A new empty database: its URI."""
        name = name or f"t_{secrets.token_hex(6)}"
        self.sql(f'CREATE DATABASE "{name}"')
        return self.uri(name)


@contextmanager
def running(*, durable: bool = False) -> Iterator[Server]:
    """A server for the duration of the block: fsync off (its data is thrown away after) unless
    `durable` (the benchmarks, whose writes should cost what a real server's cost)."""
    bin_dir = binaries()
    assert bin_dir is not None
    root = Path(tempfile.mkdtemp(prefix="gpuaccept-pg-"))
    as_user: dict[str, object] = {}
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(root, owner.pw_uid, owner.pw_gid)
        as_user = {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}
    password = secrets.token_hex(16)
    data, log = root / "data", root / "server.log"
    secret = root / "password"
    secret.write_text(password + "\n")
    if as_user:
        os.chown(secret, int(as_user["user"]), int(as_user["group"]))
    port = _free_port()
    env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
    client = Path(tempfile.mkdtemp(prefix="gpuaccept-pgpass-"))
    passfile = client / "pgpass"
    passfile.write_text(f"127.0.0.1:{port}:*:{USER}:{password}\n")
    passfile.chmod(0o600)
    run = {
        "env": env,
        "cwd": root,
        "check": True,
        "capture_output": True,
        "timeout": 120,
        **as_user,
    }
    try:
        subprocess.run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                USER,
                "--pwfile",
                str(secret),
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            **run,
        )
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c max_connections=200" + (
            "" if durable else " -c fsync=off"
        )
        subprocess.run(
            [
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(log),
                "-o",
                options,
                "-w",
                "-t",
                "60",
                "start",
            ],
            **run,
        )
    except subprocess.CalledProcessError as error:
        raise RuntimeError(
            f"PostgreSQL would not start: {error.stderr.decode(errors='replace')[-2000:]}"
            + (log.read_text(errors="replace")[-2000:] if log.exists() else "")
        ) from None
    try:
        yield Server(port, password, passfile, root)
    finally:
        subprocess.run(
            [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
            **{**run, "check": False},
        )
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(client, ignore_errors=True)
