"""``GET /api/events``: server-sent events for the live pages (docs/dashboard.rst, "Events").

Each client's stream polls the backend once per tick (one second by default) and sends
only what changed since its previous tick: one ``queue`` event per queue whose counts moved,
and ``job`` events for running jobs whose status or progress moved (and for the jobs named
by ``?jobs=``, also every renewal, so an open job page follows its lease), at most
:data:`MAX_JOB_EVENTS` per tick. However fast jobs go (10k/s), a client sees at most one
burst per tick: the diff coalesces everything in between.

Fed by LISTEN/NOTIFY, with polling behind it: one :class:`Waker` per app watches every
notice of the backend (``backend.watch()``: enqueues, retries and cancels, on one dedicated
connection however many clients are open) and wakes every stream at once, so a new job or
a cancel shows within :data:`MIN_GAP`; a stream ticks at most once per ``MIN_GAP`` however
many notices arrive (10k jobs/s make one tick, not 10k). Progress sends no notice, and a
finish only when a ``wait_for`` waits for it (a NOTIFY per ack would serialise the
workers' commits), so the poll every
``interval`` stays: it is also what runs when the watch cannot (a transaction pooler
without ``listen_dsn``, a lost connection, an app mounted without its lifespan).

The stream is a plain ASGI app, so that it can wait for the client's ``http.disconnect``
while it sleeps: a client that goes away ends its stream at once, whatever it was doing.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import asdict, dataclass
from typing import Any

import trio
from starlette.requests import Request

import trioqueue
from trioqueue.web.api import iso, parse_job_id, queue_json, queues_json
from trioqueue.web.auth import Guard, error

__all__ = ["MAX_JOB_EVENTS", "MAX_WATCHED", "MIN_GAP", "EventStream", "Waker"]

log = logging.getLogger("trioqueue.web")

#: The most ``job`` events one tick sends; the rest wait for a later tick (or are
#: superseded by it).
MAX_JOB_EVENTS = 50
#: The most ids ``?jobs=`` may name (each is read on every tick).
MAX_WATCHED = 200
#: How many running jobs a tick reads.
RUNNING_WINDOW = 500
#: A comment line this often keeps proxies from closing an idle stream.
KEEPALIVE = 15.0
#: The shortest time between two ticks of a stream: notices wake it no more often.
MIN_GAP = 0.25
#: How long the waker waits before watching again after the watch failed or ended.
REWATCH_DELAY = 5.0

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
    parts = raw.split(",")
    if len(parts) > MAX_WATCHED:
        raise ValueError(f"jobs may name at most {MAX_WATCHED} ids")
    return list(dict.fromkeys(parse_job_id(part) for part in parts))


@dataclass(frozen=True)
class JobState:
    """What a ``job`` event says about a job."""

    status: str
    progress: float | None = None
    lease_expires_at: str | None = None
    last_renewed_at: str | None = None

    @classmethod
    def of(cls, info: trioqueue.JobInfo) -> JobState:
        return cls(
            info.status, info.progress, iso(info.lease_expires_at), iso(info.last_renewed_at)
        )

    def key(self, watched: bool) -> tuple[Any, ...]:
        """What counts as a change: every renewal of a watched job (its page shows the
        lease), only status and progress of the others (a renewal per heartbeat of every
        running job would be noise)."""
        if watched:
            return (self.status, self.progress, self.lease_expires_at, self.last_renewed_at)
        return (self.status, self.progress)

    def event(self, job_id: int) -> bytes:
        return sse("job", {"id": job_id} | asdict(self))


DELETED = JobState("deleted")


class Differ:
    """What changed since the previous tick, as SSE events."""

    def __init__(self, backend: Backend, watched: list[int]) -> None:
        self.backend = backend
        self.watched = watched
        self.queues: dict[str, dict[str, Any]] = {}
        self.jobs: dict[int, JobState] = {}
        self.pending: list[int] = []  # jobs seen changing but not yet sent (over the cap)

    async def tick(self) -> list[bytes]:
        events = [sse("queue", q) for q in await self._queue_changes()]
        events += [state.event(job_id) for job_id, state in await self._job_changes()]
        return events

    async def _queue_changes(self) -> list[dict[str, Any]]:
        now = {q["queue"]: q for q in queues_json(await self.backend.queue_stats())}
        changed = [q for name, q in now.items() if _key(self.queues.get(name)) != _key(q)]
        changed += [queue_json(name, None) for name in self.queues if name not in now]
        self.queues = now
        return changed

    async def _job_changes(self) -> list[tuple[int, JobState]]:
        seen: dict[int, JobState] = {}
        running = await self.backend.list_jobs(status="running", limit=RUNNING_WINDOW)
        for info in running:
            seen[info.id] = JobState.of(info)
        for job_id in self.watched:
            if job_id not in seen:
                seen[job_id] = await self._state(job_id)
        # Jobs that were running at the previous tick and are not now: read where they went.
        gone = [j for j, s in self.jobs.items() if j not in seen and s.status == "running"]
        for job_id in gone[:MAX_JOB_EVENTS]:
            seen[job_id] = await self._state(job_id)
        changed = [j for j, state in seen.items() if self._changed(j, state)]
        queue = list(dict.fromkeys(self.pending + changed))
        send, self.pending = queue[:MAX_JOB_EVENTS], queue[MAX_JOB_EVENTS:]
        out = [(job_id, seen.get(job_id) or await self._state(job_id)) for job_id in send]
        # Remember what this tick saw, so the next one sends only changes.
        self.jobs = {j: s for j, s in (self.jobs | seen).items() if j in seen or j in self.pending}
        return out

    def _changed(self, job_id: int, state: JobState) -> bool:
        before = self.jobs.get(job_id)
        watched = job_id in self.watched
        return before is None or before.key(watched) != state.key(watched)

    async def _state(self, job_id: int) -> JobState:
        try:
            return JobState.of(await self.backend.get_job(job_id))
        except trioqueue.UnknownJobError:
            return DELETED


def _key(queue: dict[str, Any] | None) -> tuple[Any, ...] | None:
    """What counts as a change of a queue: its counts, its pause and its limits (not the
    age of its oldest ready job, which moves at every tick)."""
    if queue is None:
        return None
    return (queue["counts"], queue["paused"], queue["max_running"], queue["max_per_second"])


class Waker:
    """Wakes every event stream of an app when the backend sends a notice.

    :meth:`run` belongs in the app's lifespan: one watch for all clients. Without it,
    :attr:`woken` is simply never set and the streams poll.
    """

    def __init__(self) -> None:
        #: Set (then replaced) at each notice; a stream takes it before it naps.
        self.woken = trio.Event()
        #: True while a watch is open (for tests and the logs).
        self.watching = False

    def wake(self) -> None:
        self.woken.set()
        self.woken = trio.Event()

    async def run(self, backend: Backend) -> None:
        """Watch the backend's notices until cancelled; watch again after a failure."""
        while True:
            try:
                async with backend.watch() as notices:
                    self.watching = True
                    async for _ in notices:
                        self.wake()
                log.info("dashboard: the notice watch ended; polling until it is back")
            except Exception as exc:  # the database is away: the streams poll meanwhile
                log.warning("dashboard: cannot watch notices (%s); polling meanwhile", exc)
            finally:
                self.watching = False
            await trio.sleep(REWATCH_DELAY)


class EventStream:
    """The ASGI app of ``GET /api/events``."""

    def __init__(self, backend: Backend, guard: Guard, interval: float, waker: Waker) -> None:
        self.backend = backend
        self.guard = guard
        self.interval = interval
        self.waker = waker

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
            # Taken before the tick reads: a notice that comes while it reads (too late for
            # what it read) still ends the nap after it.
            woken = self.waker.woken
            events = await differ.tick()
            if events:
                await self._body(send, b"".join(events))
                quiet_since = trio.current_time()
            elif trio.current_time() - quiet_since >= KEEPALIVE:
                await self._body(send, b": keepalive\n\n")
                quiet_since = trio.current_time()
            await self._nap(woken)

    async def _nap(self, woken: trio.Event) -> None:
        """Until the next tick: ``interval``, or sooner once ``woken`` is set (a notice
        since the last tick began), but never sooner than ``MIN_GAP`` (the debounce)."""
        gap = min(MIN_GAP, self.interval)
        await trio.sleep(gap)
        with trio.move_on_after(self.interval - gap):
            await woken.wait()

    async def _body(self, send: Send, data: bytes) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": True})


def check_interval(interval: float) -> float:
    if not (math.isfinite(interval) and interval > 0):
        raise ValueError(f"events_interval must be a positive number of seconds, not {interval!r}")
    return interval
