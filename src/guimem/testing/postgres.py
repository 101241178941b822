"""Start a throw-away PostgreSQL server on loopback for tests (Debian's postgresql package).

PostgreSQL refuses to run as root; as root the data directory is handed to the ``postgres`` user
and the server is started through ``runuser``.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from guimem.testing.server import free_port


def postgres_bin() -> str | None:
    """The folder with ``initdb`` and ``pg_ctl`` (newest installed version), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return os.path.dirname(found[-1]) if found else None


def _as_server_user(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@contextmanager
def temporary_postgres() -> Iterator[str]:
    """A fresh server with trust auth on 127.0.0.1; yields its DSN; stops and deletes it on exit."""
    bindir = postgres_bin()
    if bindir is None:
        raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql, or make setup)")
    root = tempfile.mkdtemp(prefix="guimem-pg-")
    data, sock = os.path.join(root, "data"), os.path.join(root, "sock")
    os.makedirs(sock)
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sock, "postgres")
    port = free_port()
    try:
        subprocess.run(_as_server_user([f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "guimem",
                                        "--no-sync", "-E", "UTF8"]), check=True, capture_output=True)
        subprocess.run(_as_server_user([f"{bindir}/pg_ctl", "-D", data, "-l", os.path.join(root, "log"), "-w",
                                        "-o", f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off "
                                              f"-c max_connections=50", "start"]),
                       check=True, capture_output=True, timeout=60)
        dsn = f"postgresql://guimem@127.0.0.1:{port}/postgres"
        _wait(dsn)
        yield dsn
    finally:
        subprocess.run(_as_server_user([f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"]),
                       capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def _wait(dsn: str, timeout_s: float = 30) -> None:
    import psycopg

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            psycopg.connect(dsn, connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
