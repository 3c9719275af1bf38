"""A throwaway PostgreSQL server from the Debian package, for tests and benchmarks.

initdb a cluster in a temporary directory, listen on 127.0.0.1 at a free port and on a
Unix socket in that directory, trust authentication (loopback only), and remove it all
on stop. PostgreSQL refuses to run as root: as root the server runs as the ``postgres``
user the Debian package creates.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path


def bindir() -> Path | None:
    """The newest installed server's bin directory (Debian: /usr/lib/postgresql/N/bin)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    def __init__(self, fsync: bool = False) -> None:
        found = bindir()
        if found is None:
            raise RuntimeError(
                "PostgreSQL is not installed (make test installs the postgresql package)"
            )
        self.bin = found
        self.fsync = fsync
        self.base = Path(tempfile.mkdtemp(prefix="agentvisor-pg-"))
        self.data = self.base / "data"
        self.port = _free_port()
        self.user: str | None = None
        if os.getuid() == 0:
            self.user = "postgres"
            owner = pwd.getpwnam(self.user)
            os.chown(self.base, owner.pw_uid, owner.pw_gid)
        self.started = False

    def _run(self, *argv: str) -> None:
        subprocess.run(
            [str(self.bin / argv[0]), *argv[1:]],
            check=True,
            user=self.user,
            cwd=self.base,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=120,
        )

    def start(self) -> PgServer:
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "agentvisor",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        options = (
            f"-h 127.0.0.1 -p {self.port} -k {self.base} -c max_connections=300 "
            "-c shared_buffers=32MB" + ("" if self.fsync else " -F")
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.base / "log"),
            "-w",
            "-t",
            "60",
            "-o",
            options,
            "start",
        )
        self.started = True
        return self

    def stop(self) -> None:
        if self.started:
            subprocess.run(
                [str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"],
                user=self.user,
                cwd=self.base,
                capture_output=True,
                timeout=60,
            )
            self.started = False
        shutil.rmtree(self.base, ignore_errors=True)

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://agentvisor@127.0.0.1:{self.port}/{dbname}"

    def create_database(self) -> str:
        """A fresh, empty database; returns its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        import psycopg

        name = url.rsplit("/", 1)[1]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
