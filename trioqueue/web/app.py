"""The dashboard's ASGI app, and serving it with hypercorn under trio (docs/dashboard.rst).

Only the public API is used here (``trioqueue``, ``trioqueue.metrics``). Starlette runs on
trio through anyio, so the app can be mounted in any trio ASGI server or app.

A request meets, in this order: the security headers on whatever answers it
(:mod:`~trioqueue.web.headers`), the ``Host`` check (:mod:`~trioqueue.web.hosts`), the body's
bounds (:mod:`~trioqueue.web.limits`), the login throttle (:mod:`~trioqueue.web.logins`),
then the endpoint's own token, read-only and same-origin checks (:mod:`~trioqueue.web.auth`).
So nothing is read whole, and no token compared, for a request that another rule refuses.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from importlib.resources import files
from typing import Any

import prometheus_client
import trio
from hypercorn.config import Config
from hypercorn.trio import serve as hypercorn_serve
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import trioqueue
from trioqueue.metrics import DatabaseGauges
from trioqueue.web import api, audit, controls, dead, healthz, pages, retention, tables
from trioqueue.web.auditor import Auditor
from trioqueue.web.auth import Guard, check_bind, check_token, refusal
from trioqueue.web.events import EventStream, Waker, check_interval
from trioqueue.web.headers import SecurityHeaders
from trioqueue.web.hosts import HostCheck, check_allowed_hosts
from trioqueue.web.limits import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY,
    BodyLimit,
    check_body_limits,
)
from trioqueue.web.logins import LoginLimit
from trioqueue.web.throttle import LoginThrottle
from trioqueue.web.visible import visible

__all__ = ["create_app", "serve"]

Backend = trioqueue.MemoryBackend | trioqueue.PostgresBackend


def create_app(
    backend: Backend,
    *,
    read_only: bool = False,
    token: str | None = None,
    allowed_origins: Iterable[str] | None = None,
    events_interval: float = 1.0,
    allowed_hosts: Iterable[str] | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    login_throttle: LoginThrottle | None = None,
) -> Starlette:
    """The dashboard's ASGI app over ``backend`` (docs/dashboard.rst).

    Args:
        backend: the backend the app reads and acts on; the caller keeps it open.
        read_only: hide every action and refuse every state-changing request with 403.
        token: when set, every request but the login form and the static files needs
            ``Authorization: Bearer <token>`` or the session cookie ``trioqueue_session``
            that logging in gives: API requests without it get 401, pages redirect to
            ``/login``. At least 22 characters (:func:`~trioqueue.web.auth.check_token`).
        allowed_origins: origins (``scheme://host[:port]``) besides the request's own
            scheme and host that may send state-changing requests (a proxy that rewrites
            ``Host``, or serves https in front of http).
        events_interval: seconds between two polls of ``/api/events``; notices (new
            jobs, retries, cancels) wake the streams sooner, while the app's lifespan runs
            (docs/dashboard.rst, "Events").
        allowed_hosts: the names the ``Host`` header may give (no port; ``"*"``: any);
            others get 400. None: the loopback names only (``localhost``, ``127.0.0.1``,
            ``[::1]``), safe for tests and for an app mounted behind a loopback server.
        max_body: bodies past this many bytes get 413, while they are read.
        body_timeout: a body not whole this many seconds after its request began gets 408.
        login_throttle: the rule for wrong tokens per client (default: 10, then one every
            10 s; docs/dashboard.rst, "Safety rules").

    Raises:
        ValueError: a weak ``token``; an allowed host or origin that is not one, one string
            in place of a list, or ``allowed_hosts=[]`` (which would refuse every request);
            a ``max_body`` below 0, or a ``body_timeout`` not a positive finite number.
    """
    check_token(token or None)
    hosts = check_allowed_hosts(allowed_hosts)
    check_body_limits(max_body, body_timeout)
    guard = Guard(token=token, read_only=read_only, allowed_origins=allowed_origins)
    # The database's gauges only: the worker counters would stay zero here (no pool runs).
    observer = DatabaseGauges()
    waker = Waker()
    events = EventStream(backend, guard, check_interval(events_interval), waker)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # One watch of the backend's notices for every client's event stream.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waker.run, backend)
            yield
            nursery.cancel_scope.cancel()

    async def metrics(request: Request) -> Response:
        # Sample the database gauges on scrape: start() returns after the first sample,
        # then the sampler is cancelled before its sleep ends.
        async with trio.open_nursery() as nursery:
            await nursery.start(observer.sample, backend)
            nursery.cancel_scope.cancel()
        return Response(
            prometheus_client.generate_latest(observer.registry),
            media_type=prometheus_client.CONTENT_TYPE_LATEST,
        )

    static = StaticFiles(directory=str(files("trioqueue.web") / "static"))
    routes = [
        healthz.route(backend),  # no token, no data (trioqueue/web/healthz.py)
        *controls.routes(backend, guard),
        *audit.routes(backend, guard),
        *dead.routes(backend, guard),
        *tables.routes(backend, guard),
        *retention.routes(backend, guard),
        *api.routes(backend, guard),
        Route("/api/events", events, methods=["GET"]),
        Route("/metrics", guard.api(metrics), methods=["GET"]),
        *pages.routes(backend, guard),
        Mount("/static", static, name="static"),
    ]
    # Starlette runs these outside in, inside its error middleware (so a body refused in
    # the middle of an endpoint still reaches BodyLimit, not a 500).
    middleware = [
        Middleware(SecurityHeaders),
        Middleware(HostCheck, hosts=hosts),
        Middleware(BodyLimit, max_bytes=max_body, timeout=body_timeout),
    ]
    if guard.token is not None:
        throttle = login_throttle or LoginThrottle()
        middleware.append(Middleware(LoginLimit, throttle=throttle))
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={trioqueue.BackendError: _backend_unavailable},
        lifespan=lifespan,
    )
    app.state.guard = guard
    app.state.auditor = Auditor(backend, guard)  # every action's record (auditor.py)
    app.state.observer = observer
    app.state.waker = waker
    return app


async def _backend_unavailable(request: Request, exc: Exception) -> Response:
    """The database failed (down, or the schema not migrated): 503 with the reason in one
    line, not a 500 with a traceback. The reason may quote a stored string, so its hidden
    characters show as escapes, as on every page."""
    message = visible(" ".join(f"the database failed: {exc}".split()))
    return refusal(request.url.path, 503, message)


async def serve(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    token: str | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` with hypercorn under trio until cancelled.

    ``task_status.started`` gets the bound addresses (``http://host:port``), so ``port=0``
    can be used to take a free port.

    Raises:
        ValueError: ``host`` is not a loopback address and there is no token
            (:func:`check_bind`), before anything is bound.
    """
    check_bind(host, token)
    config = Config()
    config.bind = [
        f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"
    ]
    config.accesslog = None
    config.graceful_timeout = 1.0
    config.loglevel = "WARNING"  # no "Running on" line: the caller says where it serves
    await hypercorn_serve(app, config, task_status=task_status)
