"""``GET /healthz``: whether the dashboard's backend answers, for a load balancer or an
orchestrator's probe (docs/howto/deploy.rst).

It needs no token, so it tells nothing a stranger should not learn: ``{"status": "ok"}``
(200) when the backend answers its cheapest read (the database's clock, one statement)
within :data:`TIMEOUT` seconds, else ``{"status": "unavailable"}`` (503), the reason left
out (a database error can name hosts and roles). The Host check still applies, as to every
path (docs/dashboard.rst, "Safety rules"): a probe names an allowed host.
"""

from __future__ import annotations

import trio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import trioqueue

__all__ = ["TIMEOUT", "route"]

Backend = trioqueue.MemoryBackend | trioqueue.PostgresBackend

#: A database slower than this to read its clock is as good as down for a probe.
TIMEOUT = 5.0


def route(backend: Backend) -> Route:
    """The ``/healthz`` route over ``backend``."""

    async def healthz(request: Request) -> Response:
        try:
            with trio.fail_after(TIMEOUT):
                await backend.database_clock()
        except Exception:  # any failure is "unavailable": the probe needs no more
            return JSONResponse({"status": "unavailable"}, status_code=503)
        return JSONResponse({"status": "ok"})

    return Route("/healthz", healthz, methods=["GET"])
