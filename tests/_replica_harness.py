"""A private primary and its streaming replica for tests: PostgreSQL's own server binaries.

:func:`run_replicated` initdb's a primary into a temporary directory, starts it on a free
port of 127.0.0.1 (trust authentication, ``wal_level = replica``, small buffers, no fsync),
clones it with ``pg_basebackup -R`` (which writes ``standby.signal`` and the
``primary_conninfo`` that makes the clone a streaming standby), starts the clone on another
free port, waits until the primary's ``pg_stat_replication`` shows it streaming, and yields
both DSNs. Both servers are stopped by pid (SIGINT, PostgreSQL's fast shutdown, then SIGKILL)
and their directories removed. The machine's own server is never touched.

PostgreSQL refuses to run as root: when the tests run as root, every binary runs as the
``postgres`` user (``setpriv``, else ``runuser``), and the temporary directory is handed to that user.

:func:`server_binaries` is None when no ``initdb`` is found; the tests then skip, as they do
when the cluster cannot be started (:class:`ReplicaError`). :func:`wait_for_replay` waits,
by polling the replica's replay position, until it has replayed everything the primary had
written when it was called: tests read what they just wrote without sleeping.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import trio

__all__ = [
    "ReplicaError",
    "Replicated",
    "Server",
    "pause_replay",
    "resume_replay",
    "run_replicated",
    "server_binaries",
    "wait_for_receipt",
    "wait_for_replay",
]

#: How long a server may take to start, and the replica to start streaming.
START_TIMEOUT = 30.0
#: How long a fast shutdown may take before the server is killed.
STOP_TIMEOUT = 10.0
#: The unprivileged user the servers run as when the tests run as root.
SERVER_USER = "postgres"

#: The primary's settings: a test cluster, small and unsafe on power loss, which is fine.
PRIMARY_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "unix_socket_directories": "''",
    "wal_level": "replica",
    "max_wal_senders": "4",
    "max_connections": "40",
    "shared_buffers": "16MB",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "log_min_messages": "warning",
    # The replica's answers to the primary (its replay position) come this often: the
    # primary's pg_stat_replication shows the stream within this.
    "wal_receiver_status_interval": "1s",
}


class ReplicaError(RuntimeError):
    """The primary or its replica cannot be started here."""


def server_binaries() -> Path | None:
    """The directory of PostgreSQL's server binaries (``initdb``, ``pg_ctl``, ``postgres``,
    ``pg_basebackup``), or None: ``pg_config --bindir``, else Debian's
    /usr/lib/postgresql/<version>/bin (the newest)."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            )
            candidates.append(Path(out.stdout.strip()))
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_of, reverse=True)
    candidates.extend(Path(p) for p in versions)
    needed = ("initdb", "pg_ctl", "postgres", "pg_basebackup")
    for directory in candidates:
        if all(os.access(directory / name, os.X_OK) for name in needed):
            return directory
    return None


def _version_of(bindir: str) -> int:
    part = Path(bindir).parent.name
    return int(part) if part.isdigit() else 0


@dataclass(frozen=True)
class Server:
    """One running server of the pair."""

    bindir: Path
    port: int
    data: Path
    process: subprocess.Popen[bytes]

    @property
    def dsn(self) -> str:
        return _dsn(self.port)

    @property
    def pid(self) -> int:
        """The server's pid (the postmaster)."""
        return self.process.pid


def _dsn(port: int) -> str:
    return f"postgresql://{SERVER_USER}@127.0.0.1:{port}/postgres"


@dataclass
class Replicated:
    """The pair: the primary, its replica (None while stopped), and how to restart it."""

    primary: Server
    replica: Server | None
    replica_port: int  #: kept across stop_replica and start_replica
    replica_data: Path
    logs: Path

    @property
    def primary_dsn(self) -> str:
        return self.primary.dsn

    @property
    def replica_dsn(self) -> str:
        """The replica's DSN, also while it is stopped."""
        return _dsn(self.replica_port)

    def stop_replica(self) -> None:
        """Stop the replica (fast shutdown, by pid); its data stay for a restart."""
        if self.replica is not None:
            _stop(self.replica)
            self.replica = None

    def start_replica(self) -> None:
        """Start the replica (again) on its port, and wait until it streams."""
        if self.replica is None:
            log = self.logs / "replica.log"
            self.replica = _start(self.primary.bindir, self.replica_data, self.replica_port, log)
            _wait_streaming(self.primary, log)


def _as_server_user(command: list[str]) -> list[str]:
    """``command`` as the unprivileged server user when we are root (PostgreSQL refuses
    root); as ourselves otherwise. ``setpriv`` changes user and then execs the command, so
    the child's pid is the server's own and signals reach it (``runuser`` forks, and does
    not pass SIGINT on)."""
    if os.geteuid() != 0:
        return command
    entry = pwd.getpwnam(SERVER_USER)
    setpriv = shutil.which("setpriv")
    if setpriv is not None:
        ids = [f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--init-groups"]
        return [setpriv, *ids, "--", *command]
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"
    return [runuser, "-u", SERVER_USER, "--", *command]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _run(command: list[str], what: str) -> None:
    try:
        done = subprocess.run(_as_server_user(command), capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ReplicaError(f"{what} failed: {exc}") from exc
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip()[-2000:]
        raise ReplicaError(f"{what} failed ({done.returncode}): {output}")


def _psql_value(bindir: Path, port: int, query: str) -> str:
    """One value from ``query`` on the server at ``port`` ('' when it does not answer)."""
    psql = bindir / "psql"
    command = [str(psql), "-h", "127.0.0.1", "-p", str(port), "-U", SERVER_USER, "-d", "postgres"]
    try:
        done = subprocess.run(
            [*command, "-XAtqc", query], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _start(bindir: Path, data: Path, port: int, log: Path) -> Server:
    """``postgres -D data -p port`` as a child process; returns once it answers a query."""
    with log.open("ab") as out:
        process = subprocess.Popen(
            _as_server_user([str(bindir / "postgres"), "-D", str(data), "-p", str(port)]),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C of the test run reaches it through _stop only
        )
    server = Server(bindir, port, data, process)
    deadline = time.monotonic() + START_TIMEOUT
    while not (_accepts(port) and _psql_value(bindir, port, "SELECT 1") == "1"):
        if process.poll() is not None or time.monotonic() > deadline:
            _stop(server)
            text = log.read_text(errors="replace").strip()[-2000:]
            raise ReplicaError(f"PostgreSQL did not start on port {port}: {text}")
        time.sleep(0.05)
    return server


def _stop(server: Server) -> None:
    """Fast shutdown by pid (SIGINT), then SIGKILL of its process group (the server and its
    children) if it does not end in time."""
    process = server.process
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGINT)
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _wait_streaming(primary: Server, log: Path) -> None:
    """Wait until the primary's ``pg_stat_replication`` shows a standby streaming."""
    deadline = time.monotonic() + START_TIMEOUT
    query = "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"
    while _psql_value(primary.bindir, primary.port, query) in ("", "0"):
        if time.monotonic() > deadline:
            text = log.read_text(errors="replace").strip()[-2000:]
            raise ReplicaError(f"the replica did not start streaming: {text}")
        time.sleep(0.05)


def _initdb(bindir: Path, data: Path) -> None:
    """A new cluster in ``data`` with the primary's settings. ``initdb -A trust`` lets
    local and 127.0.0.1 connections in, replication connections included."""
    command = [str(bindir / "initdb"), "-D", str(data), "-U", SERVER_USER, "-A", "trust"]
    _run([*command, "-E", "UTF8", "--locale=C", "--no-sync"], "initdb")
    with (data / "postgresql.conf").open("a") as conf:  # ours, or we are root
        conf.writelines(f"{name} = {value}\n" for name, value in PRIMARY_SETTINGS.items())


def _base_backup(primary: Server, data: Path) -> None:
    """Clone the primary into ``data`` as a standby (``-R``: ``standby.signal`` and its
    ``primary_conninfo``), with the WAL it needs streamed alongside."""
    command = [str(primary.bindir / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(primary.port)]
    command += ["-U", SERVER_USER, "-D", str(data), "-R", "-X", "stream", "-c", "fast"]
    _run([*command, "--no-sync"], "pg_basebackup")


def _private_directory(root: Path) -> None:
    """Hand ``root`` to the server user when we are root (initdb runs as that user)."""
    if os.geteuid() == 0:
        try:
            entry = pwd.getpwnam(SERVER_USER)
        except KeyError:
            raise ReplicaError(f"running as root, and there is no {SERVER_USER!r} user") from None
        os.chown(root, entry.pw_uid, entry.pw_gid)
    root.chmod(0o700)


@contextlib.contextmanager
def run_replicated() -> Iterator[Replicated]:
    """A primary and its streaming replica, for the block (see the module docstring).

    Raises:
        ReplicaError: no server binaries, or the pair could not be started.
    """
    bindir = server_binaries()
    if bindir is None:
        raise ReplicaError("PostgreSQL's server binaries (initdb, pg_basebackup) are not installed")
    with tempfile.TemporaryDirectory(prefix="trioqueue-replica-") as tmp:
        root = Path(tmp)
        _private_directory(root)
        logs = root / "logs"  # opened by us: the servers inherit the descriptors
        logs.mkdir()
        _initdb(bindir, root / "primary")
        primary = _start(bindir, root / "primary", _free_port(), logs / "primary.log")
        pair = Replicated(primary, None, _free_port(), root / "replica", logs)
        try:
            _base_backup(primary, pair.replica_data)
            pair.start_replica()
            yield pair
        finally:
            pair.stop_replica()
            _stop(primary)


async def wait_for_replay(pair: Replicated) -> None:
    """Return once the replica has replayed everything the primary had written at the call."""
    await _wait_for_position(pair, "pg_last_wal_replay_lsn()")


async def wait_for_receipt(pair: Replicated) -> None:
    """Return once the replica has received (not necessarily replayed) everything the
    primary had written at the call: with its replay paused, it is then behind."""
    await _wait_for_position(pair, "pg_last_wal_receive_lsn()")


async def _wait_for_position(pair: Replicated, position: str) -> None:
    """Read the primary's current WAL insert position once, then the replica's ``position``
    until it has reached it. The insert position, not the write position: with
    ``synchronous_commit = off`` a commit just made may not be written yet, and the replica
    gets it only once it is. PostgreSQL has no call that waits for another server's
    progress, so this polls (every 10 ms, within START_TIMEOUT)."""
    primary = pair.primary
    lsn = await trio.to_thread.run_sync(
        _psql_value, primary.bindir, primary.port, "SELECT pg_current_wal_insert_lsn()"
    )
    assert lsn, "the primary did not answer"
    query = f"SELECT {position} >= '{lsn}'::pg_lsn"
    with trio.fail_after(START_TIMEOUT):
        while (
            await trio.to_thread.run_sync(_psql_value, primary.bindir, pair.replica_port, query)
            != "t"
        ):
            await trio.sleep(0.01)


def pause_replay(pair: Replicated) -> None:
    """Stop the replica's replay (it goes on receiving WAL): it falls behind."""
    _replica_call(pair, "SELECT pg_wal_replay_pause()")


def resume_replay(pair: Replicated) -> None:
    """Let the replica replay again."""
    _replica_call(pair, "SELECT pg_wal_replay_resume()")


def _replica_call(pair: Replicated, query: str) -> None:
    answer = _psql_value(pair.primary.bindir, pair.replica_port, f"SELECT 1 FROM ({query}) AS done")
    if answer != "1":
        raise ReplicaError(f"the replica did not run {query!r}")
