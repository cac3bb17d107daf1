"""``trioqueue dashboard --database NAME=DSN``: one dashboard over several databases
(:func:`trioqueue.web.create_multi_app`, each database under ``/db/NAME``; docs/dashboard.rst,
"Several databases").

Every database is opened and checked as migrated before anything is served (an error names
its database); the start line names each one with its DSN's password masked. The token,
hosts, origins and read-only mode are the one-database dashboard's (``_dashboard.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TextIO

import trio

import trioqueue
from trioqueue.cli._dashboard import TOKEN_ENV, Access, token_from_env
from trioqueue.cli._databases import Database
from trioqueue.cli._terminal import check_migrated, stop_on_signals

__all__ = ["serve_dashboards"]


async def serve_dashboards(
    databases: Sequence[Database],
    host: str,
    port: int,
    read_only: bool,
    out: TextIO,
    access: Access | None = None,
) -> None:
    """Serve one dashboard over ``databases`` until Ctrl-C or SIGTERM."""
    from trioqueue.web import create_multi_app, serve
    from trioqueue.web.hosts import bind_hosts

    access = access or Access()
    token = token_from_env()
    async with AsyncExitStack() as stack:
        backends = {}
        for database in databases:
            backends[database.name] = await stack.enter_async_context(_opened(database))
        app = create_multi_app(
            backends,
            read_only=read_only,
            token=token,
            allowed_hosts=bind_hosts(host, access.hosts),
            allowed_origins=access.origins,
        )
        nursery = await stack.enter_async_context(trio.open_nursery())
        binds: list[str] = await nursery.start(_serve, serve, app, host, port, token)
        await nursery.start(stop_on_signals, nursery.cancel_scope)
        mode = ", read-only" if read_only else ""
        auth = f", token from ${TOKEN_ENV}" if token else ""
        for database in databases:
            out.write(f"database {database.name} at {binds[0]}/db/{database.name}/ "
                      f"({database.shown})\n")  # fmt: skip
        out.write(
            f"dashboard: {binds[0]} ({len(databases)} databases{mode}{auth}); Ctrl-C to stop\n"
        )
        out.flush()


async def _serve(
    serve: object,
    app: object,
    host: str,
    port: int,
    token: str | None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    await serve(app, host=host, port=port, token=token, task_status=task_status)  # type: ignore[operator]


@asynccontextmanager
async def _opened(database: Database) -> AsyncIterator[trioqueue.PostgresBackend]:
    """The database's backend, open and checked as migrated; an error of either names it."""
    async with AsyncExitStack() as stack:
        try:
            backend = await stack.enter_async_context(
                trioqueue.open_postgres(database.dsn, schema=database.schema)
            )
            await check_migrated(backend)
        except trioqueue.BackendError as exc:
            raise trioqueue.BackendError(
                f"database {database.name!r}: {exc}", transient=exc.transient, hint=exc.hint
            ) from exc
        yield backend
