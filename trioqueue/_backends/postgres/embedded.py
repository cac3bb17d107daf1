"""An embedded PostgreSQL server for ``trioqueue demo`` (and for benchmarks without a server).

:func:`embedded_postgres` starts a private server with the ``pgserver`` package (PostgreSQL
in a wheel, the ``embedded`` extra) in a fresh temporary directory, yields its DSN, and
stops it and deletes the directory afterwards. The server listens on a unix socket in that
directory only, so it never clashes with another server on the machine.

Starting takes a few seconds (``initdb`` and server start-up). It is blocking work: call
it before ``trio.run``, or from a worker thread.
"""

from __future__ import annotations

import asyncio
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

import asyncpg

__all__ = [
    "INSTALL_HINT",
    "LOCAL_DSN",
    "EmbeddedPostgresError",
    "embedded_postgres",
    "fast_commits",
    "find_postgres",
]

#: Where a developer machine or CI usually has a server (a local cluster on the default port).
LOCAL_DSN = "postgresql://postgres@127.0.0.1:5432/test"

#: How to get the optional dependency: trioqueue installs from a checkout or its wheel, not
#: from the package index (the command line's hints have this form: trioqueue/cli/_install.py).
INSTALL_HINT = (
    "install the embedded extra: pip install -e '.[embedded]' from a checkout, "
    "or the wheel with [embedded]"
)


class _Server(Protocol):
    def get_uri(self) -> str: ...

    def cleanup(self) -> None: ...


class _GetServer(Protocol):
    def __call__(self, pgdata: Path, cleanup_mode: str | None = ...) -> _Server: ...


class EmbeddedPostgresError(RuntimeError):
    """The embedded server cannot be started (pgserver missing, or it failed to start)."""


@contextmanager
def embedded_postgres() -> Iterator[str]:
    """Run a private PostgreSQL server for the duration of the block; yield its DSN.

    Raises:
        EmbeddedPostgresError: ``pgserver`` is not installed (the message says how to
            install it), or the server did not start.
    """
    get_server = _import_pgserver()
    with tempfile.TemporaryDirectory(prefix="trioqueue-pg-") as data_dir:
        try:
            with warnings.catch_warnings():
                # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI): harmless.
                warnings.simplefilter("ignore")
                server = get_server(Path(data_dir) / "pgdata", cleanup_mode="stop")
        except Exception as exc:
            raise EmbeddedPostgresError(f"the embedded PostgreSQL did not start: {exc}") from exc
        try:
            yield server.get_uri()
        finally:
            server.cleanup()


@contextmanager
def find_postgres(given: str | None = None) -> Iterator[tuple[str, str]]:
    """A server to use, and where it came from: ``given`` if set; else the local server if
    it answers; else an embedded one for the duration of the block.

    Blocking (it may start a server): call it before ``trio.run``.

    Raises:
        EmbeddedPostgresError: no server was given or found, and none could be started.
    """
    if given:
        yield given, "given DSN"
    elif asyncio.run(_answers(LOCAL_DSN)):
        yield LOCAL_DSN, "local server 127.0.0.1:5432"
    else:
        with embedded_postgres() as dsn:
            yield dsn, "embedded pgserver"


def fast_commits(dsn: str) -> str:
    """``dsn`` with ``synchronous_commit=off``, for tests and benchmarks.

    Durability is not under test there, and on a small machine a flushed commit costs
    milliseconds that would dominate every number. asyncpg passes unknown URI parameters on
    as server settings; a keyword-style DSN is left as it is.
    """
    if "://" not in dsn or "synchronous_commit" in dsn:
        return dsn
    return dsn + ("&" if "?" in dsn else "?") + "synchronous_commit=off"


async def _answers(dsn: str) -> bool:
    try:
        connection = await asyncpg.connect(dsn, timeout=3)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
        return False
    await connection.close()
    return True


def _import_pgserver() -> _GetServer:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from pgserver.postgres_server import get_server
    except ImportError:
        raise EmbeddedPostgresError(
            "no DSN given (--dsn or TRIOQUEUE_DSN) and the embedded PostgreSQL is not "
            f"installed; {INSTALL_HINT}"
        ) from None
    return get_server
