"""``trioqueue dashboard``: serve the web dashboard (docs/cli.rst, docs/dashboard.rst).

hypercorn's trio worker serves :func:`trioqueue.web.create_app` over a PostgreSQL backend
until Ctrl-C. The token comes from ``TRIOQUEUE_DASHBOARD_TOKEN`` only (never an option: a
command line shows up in ``ps``). The hosts and origins it answers to beyond its own address
(a proxy's) come from ``--allowed-host`` / ``--allowed-origin`` and their variables. ``trioqueue.web`` needs the ``dashboard`` extra, so it is
imported only when a dashboard is started; the demo shares :func:`start` to serve one too.
"""

from __future__ import annotations

import argparse
import errno
import os
from dataclasses import dataclass
from typing import Any, TextIO

import trio

import trioqueue
from trioqueue._errors import leaves
from trioqueue.cli._install import install_hint
from trioqueue.cli._terminal import check_migrated, stop_on_signals

__all__ = [
    "DESCRIPTION",
    "HELP",
    "HOSTS_ENV",
    "ORIGINS_ENV",
    "TOKEN_ENV",
    "Access",
    "add_arguments",
    "serve_dashboard",
    "start",
]

TOKEN_ENV = "TRIOQUEUE_DASHBOARD_TOKEN"
HOSTS_ENV = "TRIOQUEUE_DASHBOARD_ALLOWED_HOSTS"
ORIGINS_ENV = "TRIOQUEUE_DASHBOARD_ALLOWED_ORIGINS"
DEFAULT_PORT = 8080
INSTALL_HINT = install_hint("dashboard")
HELP = "serve the web dashboard"
DESCRIPTION = (
    "Serve the web dashboard (pages, JSON API, live events, /metrics) with hypercorn under "
    f"trio until Ctrl-C. It binds 127.0.0.1 unless told otherwise; any other address needs a "
    f"token in ${TOKEN_ENV}, which every request must then carry (exit 2 without one)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host", default="127.0.0.1", help="the address to bind (default: %(default)s)"
    )
    parser.add_argument(
        "--port", type=port, default=DEFAULT_PORT, help="the port (default: %(default)s)"
    )
    parser.add_argument(
        "--read-only", action="store_true", help="hide every action and refuse every change"
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a further name the Host header may give, e.g. a proxy's (repeatable; also "
        f"${HOSTS_ENV}, comma-separated; '*' for any); the bound address, and the loopback "
        "names for a loopback bind, are always allowed",
    )
    parser.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a further origin (scheme://host[:port]) that may change things, for a proxy "
        f"that rewrites Host or serves https (repeatable; also ${ORIGINS_ENV})",
    )


@dataclass(frozen=True)
class Access:
    """Who besides the bound address may reach the dashboard: ``--allowed-host`` and
    ``--allowed-origin`` with their variables' values."""

    hosts: tuple[str, ...] = ()
    origins: tuple[str, ...] = ()

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Access:
        """Raises: ValueError: a name that is not a host, or an origin that is not one."""
        from trioqueue.web.hosts import normal_host, normal_origin

        hosts = [*getattr(args, "allowed_host", []), *_env_list(HOSTS_ENV)]
        origins = [*getattr(args, "allowed_origin", []), *_env_list(ORIGINS_ENV)]
        return cls(
            hosts=tuple(normal_host(h) for h in hosts),
            origins=tuple(normal_origin(o) for o in origins),
        )


def _env_list(name: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be between 0 and 65535, got {value}")
    return value


def token_from_env() -> str | None:
    return os.environ.get(TOKEN_ENV) or None


def check(host: str, args: argparse.Namespace | None = None) -> Access:
    """Refuse a public address without a token, a weak token, and allowed hosts or origins
    that are not ones, before connecting to anything.

    Raises:
        ValueError: the one-line reason (the command line exits 2 with it).
    """
    try:
        from trioqueue.web import check_bind
    except ImportError:
        raise ValueError(f"the dashboard is not installed; {INSTALL_HINT}") from None
    check_bind(host, token_from_env())
    return Access.from_args(args) if args is not None else Access()


def _address_in_use(exc: BaseException) -> bool:
    found = list(leaves(exc)) if isinstance(exc, BaseExceptionGroup) else [exc]
    return bool(found) and all(
        isinstance(e, OSError) and e.errno == errno.EADDRINUSE for e in found
    )


async def start(
    nursery: trio.Nursery,
    backend: trioqueue.MemoryBackend | trioqueue.PostgresBackend,
    *,
    host: str,
    port: int,
    read_only: bool = False,
    token: str | None = None,
    fallback: bool = False,
    access: Access | None = None,
) -> str:
    """Serve the dashboard over ``backend`` in ``nursery``; its address (``http://...``).

    With ``fallback``, a port already in use is replaced by a free one (the demo's
    choice); without, that is an error. The app answers to the bound host (with the
    loopback names for a loopback bind) and to ``access``'s hosts and origins.

    Raises:
        ValueError: a public ``host`` without a token, a weak token, or the port is taken.
    """
    from trioqueue.web import create_app, serve
    from trioqueue.web.hosts import bind_hosts

    access = access or Access()
    app = create_app(
        backend,
        read_only=read_only,
        token=token,
        allowed_hosts=bind_hosts(host, access.hosts),
        allowed_origins=access.origins,
    )
    try:
        binds: list[str] = await nursery.start(_serve, serve, app, host, port, token)
    except (OSError, BaseExceptionGroup) as exc:
        if not _address_in_use(exc):
            raise
        if not fallback:
            raise ValueError(f"cannot listen on {host}:{port}: the address is in use") from None
        binds = await nursery.start(_serve, serve, app, host, 0, token)
    return binds[0]


async def _serve(
    serve: Any,
    app: Any,
    host: str,
    port: int,
    token: str | None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    await serve(app, host=host, port=port, token=token, task_status=task_status)


async def serve_dashboard(
    dsn: str,
    schema: str,
    host: str,
    port: int,
    read_only: bool,
    out: TextIO,
    access: Access | None = None,
    read_dsn: str | None = None,
) -> None:
    """``trioqueue dashboard``: serve until Ctrl-C or SIGTERM; with ``read_dsn``, its pages
    and API read the replica there where docs/postgres.rst ("Read replicas") says so."""
    token = token_from_env()
    async with (
        trioqueue.open_postgres(dsn, schema=schema, read_dsn=read_dsn) as backend,
        trio.open_nursery() as nursery,
    ):
        await check_migrated(backend)
        address = await start(
            nursery, backend, host=host, port=port, read_only=read_only, token=token, access=access
        )
        await nursery.start(stop_on_signals, nursery.cancel_scope)
        mode = ", read-only" if read_only else ""
        auth = f", token from ${TOKEN_ENV}" if token else ""
        auth += ", reads on the read replica" if read_dsn else ""
        out.write(f"dashboard: {address} (schema {schema}{mode}{auth}); Ctrl-C to stop\n")
        out.flush()
