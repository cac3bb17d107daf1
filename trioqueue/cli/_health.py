"""A worker process's health, for orchestrators: liveness and readiness (docs/howto/deploy.rst).

Theory of operation. Three trio tasks of the worker keep a :class:`WorkerHealth` current:

- the **ticker** notes the time every :data:`TICK` seconds. A loop blocked by a handler's
  synchronous code stops ticking, so a tick older than :data:`LOOP_STALE` means the event
  loop is not responsive;
- the **registry read** asks the pool registry (``list_workers``, one cheap statement)
  every :data:`READ_INTERVAL` seconds which of this process's pools (its host and pid) are
  registered and beating. A pool the registry calls stale has not beaten for three of its
  heartbeat intervals (docs/api.rst, "Worker pools"): its guard is not beating. The read
  answering at all is the database being reachable;
- with ``--liveness-file``, the **toucher** touches the file every :data:`TOUCH_INTERVAL`
  seconds while the process is live, so an exec probe or a timer can test its age.

The verdicts are plain functions of that state and the time (:func:`liveness`,
:func:`readiness`). Liveness asks "should this process be restarted?": a blocked loop, or a
guard that does not beat while the database answers. A database that does not answer is
not the process's fault, and restarting every worker for it would not help, so then the
guards are not judged (the registry cannot tell) and only readiness fails. Readiness asks
"is this process doing its work?": the pools have started, the database answered lately,
and every pool is registered and beating. A graceful shutdown cancels the tasks with the
pools: from then on the process is live (it stops on purpose, within its grace) and not
ready.

Threads: the HTTP server (trioqueue.metrics, ``routes=``) answers ``/livez`` and ``/readyz``
on a thread of its own, which is what lets it see a blocked loop. It only reads the state;
the trio tasks replace each value whole (a float, a frozen :class:`RegistryRead`), so
every read sees a consistent one.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

import trio

import trioqueue

log = logging.getLogger("trioqueue.cli")

#: Seconds between the ticker's notes of the time.
TICK = 1.0
#: A loop that has not ticked for this long is blocked: not live (nor ready).
LOOP_STALE = 10.0
#: Seconds between reads of the pool registry, and how long one may take.
READ_INTERVAL = 5.0
READ_TIMEOUT = 5.0
#: A registry read older than this says nothing any more (two reads missed).
READ_STALE = 2 * READ_INTERVAL + READ_TIMEOUT
#: Seconds between touches of the liveness file (an exec probe's ``find -mmin -1`` is
#: far looser).
TOUCH_INTERVAL = 5.0

#: A pool of this process, as the registry reads it.
PoolState = Literal["registered", "stale", "missing"]


@dataclass(frozen=True)
class RegistryRead:
    """One read of the pool registry: when it ended, whether the database answered, and
    (when it did) each of this process's queues' pool state. ``after_start``: the pools
    had started when the read was sent; a read sent before finds them missing, rightly,
    and says nothing of their guards."""

    at: float
    answered: bool
    pools: Mapping[str, PoolState] = field(default_factory=dict)
    after_start: bool = True


@dataclass(frozen=True)
class Verdict:
    """A probe's answer: ``ok`` (HTTP 200, else 503) and what each check found."""

    ok: bool
    checks: dict[str, object]

    def answer(self) -> tuple[int, str]:
        """The HTTP status and the JSON body."""
        body = {"status": "ok" if self.ok else "failing", "checks": self.checks}
        return (200 if self.ok else 503), json.dumps(body, sort_keys=True)


class WorkerHealth:
    """What the health tasks know of the worker process; see the module's docstring.

    ``clock``: seconds on a clock the server's thread may read too (the trio clock may not
    be read off its thread); tests pass their own.
    """

    def __init__(self, queues: Sequence[str], clock: Callable[[], float] = time.monotonic):
        self.queues = tuple(queues)
        self.clock = clock
        self.ticked_at = clock()
        self.started = False  # every pool is claiming (run_workers' task_status)
        self.starts = trio.Event()  # set with started: the registry is read at once
        self.read: RegistryRead | None = None
        # Shutting down: the tasks were cancelled with the pools, which now finish their
        # handlers; the process is stopping on purpose, within its own grace.
        self.stopping = False

    def livez(self) -> tuple[int, str]:
        return liveness(self, self.clock()).answer()

    def readyz(self) -> tuple[int, str]:
        return readiness(self, self.clock()).answer()


def _loop_check(health: WorkerHealth, now: float) -> tuple[bool, str]:
    late = now - health.ticked_at
    if late > LOOP_STALE:
        return False, f"blocked for {late:.0f}s"
    return True, "responsive"


def _fresh_read(health: WorkerHealth, now: float) -> RegistryRead | None:
    """The latest registry read, unless it is too old to say anything."""
    read = health.read
    if read is None or now - read.at > READ_STALE:
        return None
    return read


def _judges_pools(read: RegistryRead | None) -> bool:
    """Whether ``read`` tells how the pools are: the database answered it, and it was
    sent once they had started."""
    return read is not None and read.answered and read.after_start


def liveness(health: WorkerHealth, now: float) -> Verdict:
    """Live: the loop ticks, and no guard is seen not beating. A guard is judged only on a
    fresh read the database answered, once the pools have started."""
    if health.stopping:
        return Verdict(True, {"event_loop": "stopping", "guards": {}})
    loop_ok, loop = _loop_check(health, now)
    read = _fresh_read(health, now)
    judged = health.started and _judges_pools(read)
    guards: dict[str, str] = {}
    for queue in health.queues:
        if not judged or read is None:
            guards[queue] = "unknown"
        else:
            guards[queue] = "beating" if read.pools.get(queue) == "registered" else "not beating"
    ok = loop_ok and "not beating" not in guards.values()
    return Verdict(ok, {"event_loop": loop, "guards": guards})


def readiness(health: WorkerHealth, now: float) -> Verdict:
    """Ready: the loop ticks, the pools have started, the database answered a fresh read,
    and every pool is registered and beating."""
    loop_ok, loop = _loop_check(health, now)
    read = _fresh_read(health, now)
    answered = read is not None and read.answered
    pools: dict[str, str] = {
        queue: (read.pools.get(queue, "missing") if answered and read else "unknown")
        for queue in health.queues
    }
    if answered and not (health.started and _judges_pools(read)):
        pools = dict.fromkeys(health.queues, "starting")
    if health.stopping:
        pools = dict.fromkeys(health.queues, "stopping")
    ok = loop_ok and health.started and answered and set(pools.values()) == {"registered"}
    database = "reachable" if answered else "unreachable"
    return Verdict(ok, {"event_loop": loop, "database": database, "pools": pools})


def pool_states(
    workers: Sequence[trioqueue.WorkerInfo], queues: Sequence[str], host: str, pid: int
) -> dict[str, PoolState]:
    """Each queue's pool of this process (``host``, ``pid``) in the registry: registered,
    stale (not beating), or missing. A queue with a live row and a stale one (a pool that
    restarted) is registered."""
    ours = [w for w in workers if w.host == host and w.pid == pid]
    states: dict[str, PoolState] = {}
    for queue in queues:
        rows = [w for w in ours if w.queue == queue]
        if any(not w.stale for w in rows):
            states[queue] = "registered"
        else:
            states[queue] = "stale" if rows else "missing"
    return states


# -- the tasks ----------------------------------------------------------------------------


class Registry(Protocol):
    """What the registry read needs of a backend (both of trioqueue's have it)."""

    async def list_workers(self) -> list[trioqueue.WorkerInfo]: ...


async def tick(health: WorkerHealth) -> None:
    """Note the time every :data:`TICK` seconds, until cancelled."""
    while True:
        health.ticked_at = health.clock()
        await trio.sleep(TICK)


async def read_once(
    health: WorkerHealth,
    backend: Registry,
    host: str | None = None,
    pid: int | None = None,
) -> None:
    """Read the registry once into ``health`` (a failure or timeout: not answered)."""
    host = socket.gethostname() if host is None else host
    pid = os.getpid() if pid is None else pid
    after_start = health.started
    workers = None
    with trio.move_on_after(READ_TIMEOUT):
        try:
            workers = await backend.list_workers()
        except Exception as exc:  # the database's trouble is readiness's news, not a crash
            log.debug("health: the registry read failed: %r", exc)
    if workers is None:
        health.read = RegistryRead(health.clock(), answered=False, after_start=after_start)
    else:
        pools = pool_states(workers, health.queues, host, pid)
        health.read = RegistryRead(health.clock(), True, pools, after_start)


async def read_registry(health: WorkerHealth, backend: Registry) -> None:
    """:func:`read_once` every :data:`READ_INTERVAL` seconds, until cancelled; and at once
    when the pools have started, so that readiness follows them within a read."""
    while True:
        waiting_for_start = not health.started
        await read_once(health, backend)
        with trio.move_on_after(READ_INTERVAL):
            if waiting_for_start:
                await health.starts.wait()
            else:
                await trio.sleep_forever()


def touch(path: Path) -> None:
    """Create ``path`` or set its times to now."""
    path.touch()


def remove(path: Path) -> None:
    """Remove the liveness file (on the loop, as :func:`touch`: a local file)."""
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("cannot remove the liveness file %s: %s", path, exc)


async def touch_while_live(health: WorkerHealth, path: Path) -> None:
    """Touch ``path`` every :data:`TOUCH_INTERVAL` seconds while the process is live; a
    touch that fails (a full disk, a missing directory) is logged once per outage."""
    failing = False
    while True:
        if liveness(health, health.clock()).ok:
            try:
                # On the loop, not a thread: the file is meant for a local (often in-memory)
                # filesystem, where a touch takes microseconds; a blocked loop stops the
                # touches either way, which is the point.
                touch(path)
            except OSError as exc:
                if not failing:
                    log.warning("cannot touch the liveness file %s: %s", path, exc)
                failing = True
            else:
                failing = False
        await trio.sleep(TOUCH_INTERVAL)


async def watch_health(
    health: WorkerHealth,
    backend: Registry,
    liveness_file: Path | None = None,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the health tasks until cancelled."""
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(tick, health)
            nursery.start_soon(read_registry, health, backend)
            if liveness_file is not None:
                nursery.start_soon(touch_while_live, health, liveness_file)
            task_status.started()
    finally:
        health.stopping = True


@asynccontextmanager
async def watching(
    health: WorkerHealth, backend: Registry, liveness_file: Path | None = None
) -> AsyncIterator[None]:
    """The health tasks, running while the block runs. The liveness file goes with them:
    a process that has stopped serving is not live, and an exec probe should not read a
    minute-old touch as if it were."""
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(watch_health, health, backend, liveness_file)
            yield
            nursery.cancel_scope.cancel()
    finally:
        if liveness_file is not None:
            remove(liveness_file)


class StartedTo(trio.TaskStatus[None]):
    """A ``task_status`` that marks ``health`` started, then passes the news on."""

    def __init__(self, health: WorkerHealth, inner: trio.TaskStatus[None]) -> None:
        self.health = health
        self.inner = inner

    def started(self, value: None = None) -> None:
        self.health.started = True
        self.health.starts.set()
        self.inner.started()
