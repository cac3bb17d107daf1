"""``GET /api/events``: server-sent events for the live pages (docs/dashboard.rst, "Events").

Each client's stream polls the backend once per tick (one second by default) and sends
only what changed since its previous tick: one ``queue`` event per queue whose counts moved,
and ``job`` events for running jobs whose status or progress moved, at most
:data:`MAX_JOB_EVENTS` per tick. However fast jobs go (10k/s), a client sees at most one
burst per tick: the diff coalesces everything in between.

Polling rather than LISTEN/NOTIFY: the PostgreSQL backend's ``listen`` takes a dedicated
connection per queue and carries only enqueue, retry and cancel notices, never progress or
finishes, so the dashboard would still have to poll for what it shows most.

The stream is a plain ASGI app, so that it can wait for the client's ``http.disconnect``
while it sleeps: a client that goes away ends its stream at once, whatever it was doing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import trio
from starlette.requests import Request

import trioqueue
from trioqueue.web.api import MAX_JOB_ID, queues_json
from trioqueue.web.auth import Guard, error

__all__ = ["MAX_JOB_EVENTS", "MAX_WATCHED", "EventStream"]

#: The most ``job`` events one tick sends; the rest wait for a later tick (or are
#: superseded by it).
MAX_JOB_EVENTS = 50
#: The most ids ``?jobs=`` may name (each is read on every tick).
MAX_WATCHED = 200
#: How many running jobs a tick reads.
RUNNING_WINDOW = 500
#: A comment line this often keeps proxies from closing an idle stream.
KEEPALIVE = 15.0

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Backend = trioqueue.MemoryBackend | trioqueue.PostgresBackend


def sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _parse_watch(raw: str | None) -> list[int]:
    if not raw:
        return []
    ids: list[int] = []
    for part in raw.split(","):
        try:
            job_id = int(part)
        except ValueError:
            raise ValueError(f"jobs must be comma-separated job ids, not {part!r}") from None
        if not 1 <= job_id <= MAX_JOB_ID:
            raise ValueError(f"job id out of range: {part}")
        ids.append(job_id)
    if len(ids) > MAX_WATCHED:
        raise ValueError(f"jobs may name at most {MAX_WATCHED} ids")
    return list(dict.fromkeys(ids))


class Differ:
    """What changed since the previous tick, as SSE events."""

    def __init__(self, backend: Backend, watched: list[int]) -> None:
        self.backend = backend
        self.watched = watched
        self.queues: dict[str, dict[str, Any]] = {}
        self.jobs: dict[int, tuple[str, float | None]] = {}
        self.pending: list[int] = []  # jobs seen changing but not yet sent (over the cap)

    async def tick(self) -> list[bytes]:
        events = [sse("queue", q) for q in await self._queue_changes()]
        for job_id, status, progress in await self._job_changes():
            events.append(sse("job", {"id": job_id, "status": status, "progress": progress}))
        return events

    async def _queue_changes(self) -> list[dict[str, Any]]:
        now = {q["queue"]: q for q in queues_json(await self.backend.queue_stats())}
        changed = [q for name, q in now.items() if _counts(self.queues.get(name)) != q["counts"]]
        changed += [
            {"queue": name, "counts": {}, "oldest_ready_age": None, "paused": False}
            for name in self.queues
            if name not in now
        ]
        self.queues = now
        return changed

    async def _job_changes(self) -> list[tuple[int, str, float | None]]:
        seen: dict[int, tuple[str, float | None]] = {}
        running = await self.backend.list_jobs(status="running", limit=RUNNING_WINDOW)
        for info in running:
            seen[info.id] = (info.status, info.progress)
        for job_id in self.watched:
            if job_id not in seen:
                seen[job_id] = await self._state(job_id)
        # Jobs that were running at the previous tick and are not now: read where they went.
        gone = [j for j in self.jobs if j not in seen and self.jobs[j][0] == "running"]
        for job_id in gone[:MAX_JOB_EVENTS]:
            seen[job_id] = await self._state(job_id)
        changed = [j for j, state in seen.items() if self.jobs.get(j) != state]
        queue = list(dict.fromkeys(self.pending + changed))
        send, self.pending = queue[:MAX_JOB_EVENTS], queue[MAX_JOB_EVENTS:]
        out = []
        for job_id in send:
            state = seen.get(job_id) or await self._state(job_id)
            out.append((job_id, state[0], state[1]))
        # Remember what this tick saw, so the next one sends only changes.
        self.jobs = {j: s for j, s in (self.jobs | seen).items() if j in seen or j in self.pending}
        return out

    async def _state(self, job_id: int) -> tuple[str, float | None]:
        try:
            info = await self.backend.get_job(job_id)
        except trioqueue.UnknownJobError:
            return ("deleted", None)
        return (info.status, info.progress)


def _counts(queue: dict[str, Any] | None) -> dict[str, int] | None:
    return None if queue is None else queue["counts"]


class EventStream:
    """The ASGI app of ``GET /api/events``."""

    def __init__(self, backend: Backend, guard: Guard, interval: float) -> None:
        self.backend = backend
        self.guard = guard
        self.interval = interval

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        refused = self.guard.refusal(request)
        if refused is None and request.method != "GET":
            refused = (405, "method not allowed")
        try:
            watched = _parse_watch(request.query_params.get("jobs"))
        except ValueError as exc:
            refused = refused or (400, str(exc))
            watched = []
        if refused is not None:
            await error(*refused)(scope, receive, send)
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._until_disconnect, receive, nursery.cancel_scope)
            await self._stream(send, Differ(self.backend, watched))
            nursery.cancel_scope.cancel()

    async def _until_disconnect(self, receive: Receive, scope: trio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        scope.cancel()

    async def _stream(self, send: Send, differ: Differ) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream; charset=utf-8"),
                    (b"cache-control", b"no-store"),
                    (b"x-accel-buffering", b"no"),
                ],
            }
        )
        await self._body(send, b"retry: 2000\n\n")
        quiet_since = trio.current_time()
        while True:
            events = await differ.tick()
            if events:
                await self._body(send, b"".join(events))
                quiet_since = trio.current_time()
            elif trio.current_time() - quiet_since >= KEEPALIVE:
                await self._body(send, b": keepalive\n\n")
                quiet_since = trio.current_time()
            await trio.sleep(self.interval)

    async def _body(self, send: Send, data: bytes) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": True})


def check_interval(interval: float) -> float:
    if not (math.isfinite(interval) and interval > 0):
        raise ValueError(f"events_interval must be a positive number of seconds, not {interval!r}")
    return interval
