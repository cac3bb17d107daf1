"""A private PgBouncer for tests: Debian's ``pgbouncer`` binary, started as a child process.

:func:`run_pgbouncer` writes an ini file and an ``auth_file`` into a temporary directory,
starts ``pgbouncer`` on a free port of 127.0.0.1 (``auth_type = trust``, the given
``pool_mode``), in front of the test server (tests/conftest.py finds it), and yields the
DSN of the same database through PgBouncer. :func:`pgbouncer_binary` is None when PgBouncer
is not installed; the tests then skip.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["PgBouncerError", "pgbouncer_binary", "run_pgbouncer"]

#: How long PgBouncer may take to accept connections.
START_TIMEOUT = 15.0


class PgBouncerError(RuntimeError):
    """PgBouncer cannot be started in front of this server."""


def pgbouncer_binary() -> str | None:
    """The ``pgbouncer`` executable, or None (Debian installs it in /usr/sbin)."""
    return shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/usr/bin")


def _server_of(dsn: str) -> dict[str, str]:
    """Host, port, user and database of a ``postgresql://`` DSN, for PgBouncer's ini file."""
    parts = urlsplit(dsn)
    if parts.scheme not in ("postgres", "postgresql"):
        raise PgBouncerError(f"not a postgresql:// URI: {dsn!r}")
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    host = query.get("host") or parts.hostname or "127.0.0.1"
    return {
        "host": host,
        "port": str(query.get("port") or parts.port or 5432),
        "user": unquote(parts.username or "") or query.get("user") or "postgres",
        "dbname": unquote(parts.path.lstrip("/")) or query.get("dbname") or "postgres",
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def run_pgbouncer(server_dsn: str, pool_mode: str, *, pool_size: int = 20) -> Iterator[str]:
    """PgBouncer in ``pool_mode`` in front of ``server_dsn``'s database, for the block.

    Yields the DSN through PgBouncer (same user and database). At most ``pool_size`` server
    connections per user and database; commits are not flushed (``synchronous_commit``, as
    the test DSN has it).

    Raises:
        PgBouncerError: no binary, a DSN it cannot reach, or it did not start.
    """
    binary = pgbouncer_binary()
    if binary is None:
        raise PgBouncerError("pgbouncer is not installed")
    server = _server_of(server_dsn)
    with tempfile.TemporaryDirectory(prefix="trioqueue-pgbouncer-") as tmp:
        directory = Path(tmp)
        directory.chmod(0o755)  # run as root, PgBouncer switches to nobody (it refuses root)
        auth_file = directory / "userlist.txt"
        auth_file.write_text(f'"{server["user"]}" ""\n')
        port = _free_port()
        target = " ".join(f"{key}={value}" for key, value in server.items())
        ini = directory / "pgbouncer.ini"
        ini.write_text(
            "[databases]\n"
            f"{server['dbname']} = {target} connect_query='SET synchronous_commit = off'\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {port}\n"
            "unix_socket_dir =\n"
            "auth_type = trust\n"
            f"auth_file = {auth_file}\n"
            f"pool_mode = {pool_mode}\n"
            "max_client_conn = 500\n"
            f"default_pool_size = {pool_size}\n"
            "min_pool_size = 0\n"
            "server_login_retry = 1\n"
            "log_connections = 0\n"
            "log_disconnections = 0\n"
        )
        for path in (auth_file, ini):
            path.chmod(0o644)
        log = (directory / "pgbouncer.log").open("wb")
        command = [binary, "-q", str(ini)]
        if os.geteuid() == 0:
            command[1:1] = ["-u", "nobody"]
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while not _accepts(port):
                if process.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    output = (directory / "pgbouncer.log").read_text(errors="replace")
                    raise PgBouncerError(f"pgbouncer did not start: {output.strip()[-2000:]}")
                time.sleep(0.05)
            yield f"postgresql://{server['user']}@127.0.0.1:{port}/{server['dbname']}"
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.close()
