"""The dashboard's ASGI app, and serving it with hypercorn under trio (docs/dashboard.rst).

Only the public API is used here (``trioqueue``, ``trioqueue.metrics``). Starlette runs on
trio through anyio, so the app can be mounted in any trio ASGI server or app.
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
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import trioqueue
from trioqueue.metrics import DatabaseGauges
from trioqueue.web import api, pages
from trioqueue.web.auth import Guard, check_bind
from trioqueue.web.events import EventStream, Waker, check_interval

__all__ = ["create_app", "serve"]

Backend = trioqueue.MemoryBackend | trioqueue.PostgresBackend


def create_app(
    backend: Backend,
    *,
    read_only: bool = False,
    token: str | None = None,
    allowed_origins: Iterable[str] | None = None,
    events_interval: float = 1.0,
) -> Starlette:
    """The dashboard's ASGI app over ``backend`` (docs/dashboard.rst).

    Args:
        backend: the backend the app reads and acts on; the caller keeps it open.
        read_only: hide every action and refuse every state-changing request with 403.
        token: when set, every request but the login form and the static files needs
            ``Authorization: Bearer <token>`` or the login cookie ``trioqueue_token``:
            API requests without it get 401, pages redirect to ``/login``.
        allowed_origins: origins (``scheme://host[:port]``) besides the request's own host
            that may send state-changing requests.
        events_interval: seconds between two polls of ``/api/events``; notices (new
            jobs, retries, cancels) wake the streams sooner, while the app's lifespan runs
            (docs/dashboard.rst, "Events").
    """
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
        *api.routes(backend, guard),
        Route("/api/events", events, methods=["GET"]),
        Route("/metrics", guard.api(metrics), methods=["GET"]),
        *pages.routes(backend, guard),
        Mount("/static", static, name="static"),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={trioqueue.BackendError: _backend_unavailable},
        lifespan=lifespan,
    )
    app.state.observer = observer
    app.state.waker = waker
    return app


async def _backend_unavailable(request: Request, exc: Exception) -> Response:
    """The database failed (down, or the schema not migrated): 503 with the reason in one
    line, not a 500 with a traceback."""
    message = " ".join(f"the database failed: {exc}".split())
    if request.url.path.startswith(("/api/", "/metrics")):
        return JSONResponse({"error": message}, status_code=503)
    return PlainTextResponse(message + "\n", status_code=503)


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
