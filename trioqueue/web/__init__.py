"""The dashboard's JSON API (docs/dashboard.rst): an ASGI app over a backend.

Only the public API is used here (``trioqueue``, ``trioqueue.metrics``). Serve the app with
hypercorn under trio (``hypercorn.trio.serve``); Starlette runs on trio through anyio.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from typing import Any, get_args
from urllib.parse import urlsplit

import prometheus_client
import trio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

import trioqueue
from trioqueue.metrics import PrometheusObserver

__all__ = ["check_bind", "create_app"]

#: Job ids are PostgreSQL bigints.
MAX_JOB_ID = 2**63 - 1
STATUSES: tuple[str, ...] = get_args(trioqueue.JobStatus)
TOKEN_COOKIE = "trioqueue_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

Backend = trioqueue.MemoryBackend | trioqueue.PostgresBackend


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve on a non-loopback address without a token (docs/dashboard.rst).

    Raises:
        ValueError: ``host`` is not a loopback address and ``token`` is empty.
    """
    if token:
        return
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(
            f"refusing to serve the dashboard on {host!r} without a token: "
            "bind to a loopback address or set a token (TRIOQUEUE_DASHBOARD_TOKEN)"
        )


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def job_json(info: trioqueue.JobInfo) -> dict[str, Any]:
    """A JobInfo as the API's JSON object."""
    out: dict[str, Any] = {
        "id": info.id,
        "queue": info.queue,
        "payload": str(info.payload)
        if isinstance(info.payload, trioqueue.UndecodablePayload)
        else info.payload,
        "status": info.status,
        "attempts": info.attempts,
        "max_attempts": info.max_attempts,
        "priority": info.priority,
        "progress": info.progress,
        "last_error": info.last_error,
        "created_at": _time(info.created_at),
        "finished_at": _time(info.finished_at),
    }
    if isinstance(info.payload, trioqueue.UndecodablePayload):
        out["undecodable"] = True
    return out


def _job_id(request: Request) -> int | JSONResponse:
    raw = request.path_params["job_id"]
    try:
        job_id = int(raw)
    except ValueError:
        return _error(400, f"job id must be an integer, not {raw!r}")
    if not 1 <= job_id <= MAX_JOB_ID:
        return _error(400, f"job id out of range: {raw}")
    return job_id


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int | str:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        return f"{name} must be an integer, not {raw!r}"
    if not low <= value <= high:
        return f"{name} must be between {low} and {high}"
    return value


def _origin_host(origin: str) -> str | None:
    parts = urlsplit(origin)
    return parts.netloc or None


def create_app(
    backend: Backend,
    *,
    read_only: bool = False,
    token: str | None = None,
    allowed_origins: Iterable[str] | None = None,
) -> Starlette:
    """The dashboard's ASGI app over ``backend`` (docs/dashboard.rst).

    Args:
        backend: the backend the API reads and acts on; the caller keeps it open.
        read_only: refuse every state-changing request with 403.
        token: when set, every request needs ``Authorization: Bearer <token>`` or the
            cookie ``trioqueue_token``, else 401.
        allowed_origins: origins (``scheme://host[:port]``) besides the request's own host
            that may send state-changing requests.
    """
    allowed = frozenset(o.rstrip("/") for o in (allowed_origins or ()))
    observer = PrometheusObserver()

    def authorised(request: Request) -> bool:
        if token is None:
            return True
        expected = token.encode()
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), expected):
            return True
        cookie = request.cookies.get(TOKEN_COOKIE)
        return cookie is not None and hmac.compare_digest(cookie.encode(), expected)

    def same_site(request: Request) -> bool:
        origin = request.headers.get("origin")
        if origin is None:
            return request.headers.get("sec-fetch-site") == "same-origin"
        if origin.rstrip("/") in allowed:
            return True
        host = request.headers.get("host")
        return host is not None and _origin_host(origin) == host

    def guarded(
        handler: Callable[[Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            if not authorised(request):
                return _error(401, "a valid token is required (Authorization: Bearer ...)")
            if request.method not in SAFE_METHODS:
                if read_only:
                    return _error(403, "the dashboard is read-only")
                if not same_site(request):
                    return _error(403, "cross-site request refused (Origin does not match)")
            return await handler(request)

        return endpoint

    async def queues(request: Request) -> Response:
        stats = await backend.queue_stats()
        return JSONResponse(
            [
                {
                    "queue": name,
                    "counts": dict(s.counts),
                    "oldest_ready_age": s.oldest_ready_age,
                    "paused": False,  # no pausing until scheduling lands
                }
                for name, s in sorted(stats.items())
            ]
        )

    async def jobs(request: Request) -> Response:
        params = request.query_params
        if params.get("q"):
            return _error(400, "q is not supported yet")
        queue = params.get("queue") or None
        status = params.get("status") or None
        if status is not None and status not in STATUSES:
            return _error(400, f"status must be one of {', '.join(STATUSES)}, not {status!r}")
        limit = _int_param(request, "limit", 100, 1, 1000)
        offset = _int_param(request, "offset", 0, 0, MAX_JOB_ID)
        if isinstance(limit, str):
            return _error(400, limit)
        if isinstance(offset, str):
            return _error(400, offset)
        found = await backend.list_jobs(
            queue=queue,
            status=status,  # type: ignore[arg-type]  # checked against STATUSES above
            limit=limit,
            offset=offset,
        )
        stats = await backend.queue_stats()
        total = sum(
            n
            for name, s in stats.items()
            if queue is None or name == queue
            for st, n in s.counts.items()
            if status is None or st == status
        )
        return JSONResponse({"jobs": [job_json(j) for j in found], "total": total})

    async def job(request: Request) -> Response:
        job_id = _job_id(request)
        if isinstance(job_id, JSONResponse):
            return job_id
        try:
            info = await backend.get_job(job_id)
        except trioqueue.UnknownJobError:
            return _error(404, f"no job {job_id}")
        return JSONResponse(job_json(info))

    async def exists(job_id: int) -> bool:
        try:
            await backend.get_job(job_id)
        except trioqueue.UnknownJobError:
            return False
        return True

    async def cancel(request: Request) -> Response:
        job_id = _job_id(request)
        if isinstance(job_id, JSONResponse):
            return job_id
        if await backend.cancel(job_id):
            return JSONResponse({"ok": True})
        if not await exists(job_id):
            return _error(404, f"no job {job_id}")
        return _error(409, f"job {job_id} has already finished")

    async def retry(request: Request) -> Response:
        job_id = _job_id(request)
        if isinstance(job_id, JSONResponse):
            return job_id
        if await backend.retry(job_id):
            return JSONResponse({"ok": True})
        if not await exists(job_id):
            return _error(404, f"no job {job_id}")
        return _error(409, f"job {job_id} has not failed")

    async def delete(request: Request) -> Response:
        job_id = _job_id(request)
        if isinstance(job_id, JSONResponse):
            return job_id
        return _error(501, "deleting jobs is not supported yet")

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

    routes = [
        Route("/api/queues", guarded(queues), methods=["GET"]),
        Route("/api/jobs", guarded(jobs), methods=["GET"]),
        Route("/api/jobs/{job_id}", guarded(job), methods=["GET"]),
        Route("/api/jobs/{job_id}", guarded(delete), methods=["DELETE"]),
        Route("/api/jobs/{job_id}/cancel", guarded(cancel), methods=["POST"]),
        Route("/api/jobs/{job_id}/retry", guarded(retry), methods=["POST"]),
        Route("/metrics", guarded(metrics), methods=["GET"]),
    ]
    app = Starlette(routes=routes)
    app.state.observer = observer
    return app
