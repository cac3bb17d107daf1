"""An embedded PostgreSQL server for ``trioqueue demo`` (and for benchmarks without a server).

:func:`embedded_postgres` starts a private server with the ``pgserver`` package (PostgreSQL
in a wheel, the ``embedded`` extra) in a fresh temporary directory, yields its DSN, and
stops it and deletes the directory afterwards. The server listens on a unix socket in that
directory only, so it never clashes with another server on the machine.

Starting takes a few seconds (``initdb`` and server start-up). It is blocking work: call
it before ``trio.run``, or from a worker thread.
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

__all__ = ["INSTALL_HINT", "EmbeddedPostgresError", "embedded_postgres"]

#: How to get the optional dependency.
INSTALL_HINT = "pip install 'trioqueue[embedded]'"


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


def _import_pgserver() -> _GetServer:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from pgserver.postgres_server import get_server
    except ImportError:
        raise EmbeddedPostgresError(
            "no DSN given (--dsn or TRIOQUEUE_DSN) and the embedded PostgreSQL is not "
            f"installed: {INSTALL_HINT}"
        ) from None
    return get_server
