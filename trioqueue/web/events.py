"""``GET /api/events``: server-sent events for the live pages (docs/dashboard.rst, "Events").

One :class:`Poller` per app reads the backend once per tick (one second by default) for
every stream at once: the queue counts, the running jobs, and every job some stream
follows (``?jobs=``, and those that stopped running) in one ``get_jobs`` call. However
many clients are open, a tick costs the same three statements. Each stream then diffs
that :class:`Snapshot` against what it sent before and sends only what changed: one
``queue`` event per queue whose counts moved, and ``job`` events for running jobs whose
status or progress moved (and for the jobs it follows, also every renewal, so an open job
page follows its lease), at most :data:`MAX_JOB_EVENTS` per tick. However fast jobs go
(10k/s), a client sees at most one burst per tick: the diff coalesces everything between.

The poller runs in the streams' own tasks, not in the app's lifespan (an app may be
mounted without one): the first stream to take its lock drives it while the others wait
on that lock, and when the driving client leaves, the next one takes over. With no stream
open, nothing reads. Streams are capped per client address and in all (429 and 503).

Fed by LISTEN/NOTIFY, with polling behind it: one :class:`Waker` per app watches every
notice of the backend (``backend.watch()``: enqueues, retries and cancels, on one dedicated
connection however many clients are open) and wakes the poller, so a new job or a cancel
shows within :data:`MIN_GAP`; the poller reads at most once per ``MIN_GAP`` however many
notices arrive (10k jobs/s make one read, not 10k). Progress sends no notice, and a finish
only when a ``wait_for`` waits for it (a NOTIFY per ack would serialise the workers'
commits), so the poll every ``interval`` stays: it is also what runs when the watch cannot
(a transaction pooler without ``listen_dsn``, a lost connection, no lifespan).

The stream is a plain ASGI app, so that it can wait for the client's ``http.disconnect``
while it waits for the next snapshot: a client that goes away ends its stream at once.
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

__all__ = [
    "MAX_JOB_EVENTS",
    "MAX_STREAMS",
    "MAX_STREAMS_PER_CLIENT",
    "MAX_WATCHED",
    "MIN_GAP",
    "EventStream",
    "Poller",
    "Waker",
]

log = logging.getLogger("trioqueue.web")

#: The most ``job`` events one tick sends; the rest wait for a later tick (or are
#: superseded by it).
MAX_JOB_EVENTS = 50
#: The most ids ``?jobs=`` may name.
MAX_WATCHED = 200
#: How many running jobs a tick reads.
RUNNING_WINDOW = 500
#: The most ids one ``get_jobs`` call of the poller names (the backends' bound).
READ_CHUNK = 10_000
#: The most streams one client address may hold open (429 past it). Behind a reverse
#: proxy every client has the proxy's address: raise it there.
MAX_STREAMS_PER_CLIENT = 16
#: The most streams the app holds open in all (503 past it).
MAX_STREAMS = 128
#: A comment line this often keeps proxies from closing an idle stream.
KEEPALIVE = 15.0
#: The shortest time between two reads of the poller: notices wake it no more often.
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


@dataclass(frozen=True)
class Snapshot:
    """One read of the backend, shared by every stream: the queues' JSON by name, the
    running jobs, and the jobs read by id (followed, or no longer running; a job asked
    for and not found is :data:`DELETED`)."""

    generation: int
    queues: dict[str, dict[str, Any]]
    running: dict[int, JobState]
    by_id: dict[int, JobState]

    def state(self, job_id: int) -> JobState | None:
        """The job's state in this read; None when it was not read."""
        return self.running.get(job_id) or self.by_id.get(job_id)


class Differ:
    """One stream's view: what changed since the snapshot it saw before, as SSE events.

    ``wanted`` is what this stream needs read by id: the jobs it follows, and those it
    last saw running that a snapshot did not show (one it missed while its client was
    slow); the poller reads them at its next tick.
    """

    def __init__(self, watched: list[int]) -> None:
        self.watched = watched
        self.wanted: set[int] = set(watched)
        self.queues: dict[str, dict[str, Any]] = {}
        self.jobs: dict[int, JobState] = {}
        self.pending: list[int] = []  # jobs seen changing but not yet sent (over the cap)

    def diff(self, snapshot: Snapshot) -> list[bytes]:
        events = [sse("queue", q) for q in self._queue_changes(snapshot.queues)]
        events += [state.event(job_id) for job_id, state in self._job_changes(snapshot)]
        return events

    def _queue_changes(self, now: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        changed = [q for name, q in now.items() if _key(self.queues.get(name)) != _key(q)]
        changed += [queue_json(name, None) for name in self.queues if name not in now]
        self.queues = now
        return changed

    def _job_changes(self, snapshot: Snapshot) -> list[tuple[int, JobState]]:
        seen = dict(snapshot.running)
        unread: set[int] = set()
        # Followed jobs, and jobs that were running at the previous tick and are not now.
        gone = [j for j, s in self.jobs.items() if j not in seen and s.status == "running"]
        for job_id in (*self.watched, *gone):
            state = snapshot.state(job_id)
            if state is None:
                unread.add(job_id)  # asked for after this read began: the next one has it
            else:
                seen[job_id] = state
        self.wanted = set(self.watched) | unread
        changed = [j for j, state in seen.items() if self._changed(j, state)]
        queue = list(dict.fromkeys(self.pending + changed))
        send, self.pending = queue[:MAX_JOB_EVENTS], queue[MAX_JOB_EVENTS:]
        out = [(job_id, seen.get(job_id) or self.jobs[job_id]) for job_id in send]
        # Remember what this tick saw, so the next one sends only changes.
        keep = seen.keys() | set(self.pending) | unread
        self.jobs = {j: s for j, s in (self.jobs | seen).items() if j in keep}
        return out

    def _changed(self, job_id: int, state: JobState) -> bool:
        before = self.jobs.get(job_id)
        watched = job_id in self.watched
        return before is None or before.key(watched) != state.key(watched)


def _key(queue: dict[str, Any] | None) -> tuple[Any, ...] | None:
    """What counts as a change of a queue: its counts, its pause and its limits (not the
    age of its oldest ready job, which moves at every tick)."""
    if queue is None:
        return None
    return (queue["counts"], queue["paused"], queue["max_running"], queue["max_per_second"])


class Waker:
    """Wakes the app's poller when the backend sends a notice.

    :meth:`run` belongs in the app's lifespan: one watch for all clients. Without it,
    :attr:`woken` is set only by a new stream and the poller polls.
    """

    def __init__(self) -> None:
        #: Set (then replaced) at each notice; the poller takes it before it reads.
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


class Poller:
    """The app's one reader of the backend for all its streams (see the module's notes).

    Each stream adds its :class:`Differ` (:meth:`subscribe`), runs :meth:`drive` beside
    its own loop (one stream's :meth:`drive` reads at a time; the others wait for its
    lock and take over in turn), and takes each new :class:`Snapshot` with :meth:`next`.
    """

    def __init__(self, backend: Backend, interval: float, waker: Waker) -> None:
        self.backend = backend
        self.interval = interval
        self.waker = waker
        self.subscribers: dict[Differ, str] = {}  # each stream's view, and its client
        self.latest: Snapshot | None = None
        self._published = trio.Event()
        self._driving = trio.Lock()
        self._woken = waker.woken  # taken before the latest read began
        self._read_at = -math.inf

    def streams_of(self, client: str) -> int:
        return sum(1 for c in self.subscribers.values() if c == client)

    def subscribe(self, differ: Differ, client: str) -> int:
        """Add a stream; the generation its first snapshot must be newer than."""
        self.subscribers[differ] = client
        if self.latest is None:
            return 0
        if self._driving.locked():
            if any(self.latest.state(job_id) is None for job_id in differ.watched):
                self.waker.wake()  # its jobs are not in that read: the next one comes soon
            return self.latest.generation - 1  # kept fresh: start from the latest one
        self.waker.wake()  # nobody was reading (it may be hours old): read again at once
        return self.latest.generation

    def unsubscribe(self, differ: Differ) -> None:
        del self.subscribers[differ]

    async def next(self, after: int) -> Snapshot:
        """The latest snapshot, once it is newer than generation ``after``."""
        while self.latest is None or self.latest.generation <= after:
            await self._published.wait()
        return self.latest

    async def drive(self) -> None:
        """Read and publish snapshots, once this task holds the lock, until cancelled."""
        async with self._driving:
            while True:
                await self._nap()
                self._woken = self.waker.woken  # a notice during the read ends the next nap
                self._read_at = trio.current_time()
                self._publish(await self._read())

    async def _nap(self) -> None:
        """Until the next read: ``interval`` after the previous one, or sooner once a
        notice set ``woken``, but never sooner than ``MIN_GAP`` (the debounce)."""
        gap = min(MIN_GAP, self.interval)
        await trio.sleep_until(self._read_at + gap)
        with trio.move_on_at(self._read_at + self.interval):
            await self._woken.wait()

    async def _read(self) -> Snapshot:
        # preview=0: an event carries no payload, so none is read (it may be megabytes).
        queues = {q["queue"]: q for q in queues_json(await self.backend.queue_stats())}
        running = {
            info.id: JobState.of(info)
            for info in await self.backend.list_jobs(
                status="running", limit=RUNNING_WINDOW, preview=0
            )
        }
        before = {} if self.latest is None else self.latest.running
        wanted = set().union(*(d.wanted for d in self.subscribers)) | before.keys()
        by_id = await self._read_by_id(sorted(wanted - running.keys()))
        generation = 1 if self.latest is None else self.latest.generation + 1
        return Snapshot(generation, queues, running, by_id)

    async def _read_by_id(self, ids: list[int]) -> dict[int, JobState]:
        """The jobs' states, :data:`DELETED` for those not found: one ``get_jobs`` call
        per :data:`READ_CHUNK` ids (one in all for 50 streams of 200 ids)."""
        states = dict.fromkeys(ids, DELETED)
        for start in range(0, len(ids), READ_CHUNK):
            found = await self.backend.get_jobs(ids[start : start + READ_CHUNK], preview=0)
            states |= {job_id: JobState.of(info) for job_id, info in found.items()}
        return states

    def _publish(self, snapshot: Snapshot) -> None:
        self.latest = snapshot
        self._published.set()
        self._published = trio.Event()


class EventStream:
    """The ASGI app of ``GET /api/events``."""

    def __init__(self, backend: Backend, guard: Guard, interval: float, waker: Waker) -> None:
        self.guard = guard
        self.poller = Poller(backend, interval, waker)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        client = request.client.host if request.client else ""
        refused = self.guard.refusal(request)
        if refused is None and request.method != "GET":
            refused = (405, "method not allowed")
        try:
            watched = _parse_watch(request.query_params.get("jobs"))
        except ValueError as exc:
            refused = refused or (400, str(exc))
            watched = []
        refused = refused or self._over_cap(client)
        if refused is not None:
            await error(*refused)(scope, receive, send)
            return
        differ = Differ(watched)
        after = self.poller.subscribe(differ, client)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._until_disconnect, receive, nursery.cancel_scope)
                nursery.start_soon(self.poller.drive)
                await self._stream(send, differ, after)
        finally:
            self.poller.unsubscribe(differ)

    def _over_cap(self, client: str) -> tuple[int, str] | None:
        """429 past :data:`MAX_STREAMS_PER_CLIENT` streams from one address, 503 past
        :data:`MAX_STREAMS` in all (each open stream holds a task and its diff state)."""
        if self.poller.streams_of(client) >= MAX_STREAMS_PER_CLIENT:
            return (
                429,
                f"too many event streams from this client (at most {MAX_STREAMS_PER_CLIENT})",
            )
        if len(self.poller.subscribers) >= MAX_STREAMS:
            return (503, f"too many event streams open (at most {MAX_STREAMS}); try again later")
        return None

    async def _until_disconnect(self, receive: Receive, scope: trio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        scope.cancel()

    async def _stream(self, send: Send, differ: Differ, generation: int) -> None:
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
            snapshot = await self.poller.next(generation)
            generation = snapshot.generation
            events = differ.diff(snapshot)
            if events:
                await self._body(send, b"".join(events))
                quiet_since = trio.current_time()
            elif trio.current_time() - quiet_since >= KEEPALIVE:
                await self._body(send, b": keepalive\n\n")
                quiet_since = trio.current_time()

    async def _body(self, send: Send, data: bytes) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": True})


def check_interval(interval: float) -> float:
    if not (math.isfinite(interval) and interval > 0):
        raise ValueError(f"events_interval must be a positive number of seconds, not {interval!r}")
    return interval
