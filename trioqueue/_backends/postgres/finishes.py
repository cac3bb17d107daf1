"""``wait_for`` on PostgreSQL: finishes heard through one shared LISTEN, with a slow poll.

Theory of operation
-------------------
A finish sends a notice only when someone waits for it. ``wait_for`` marks the job's row
``awaited`` (the ``await_job`` statement), and the statements that finish or delete a row
send ``f:<id>:<queue>`` for marked rows only (queries.sql): an ack nobody waits for takes
no notify lock at commit, so the workers' commits are not serialised on it.

Order matters. A waiter is registered, and its backend LISTENs, *before* the statement
that marks the row and reads it: a finish committed after that statement saw the mark
and is heard, and one committed before it is seen by the read itself. Marking never waits
for the row's lock (``SKIP LOCKED``): when another statement holds it (an ack about to
commit, a stuck renewal), the row stays unmarked, and the waiter reads again after
:data:`WAIT_MARK_RETRY` seconds, so ``wait_for``'s timeout holds however long the lock is
kept.

Every ``wait_for`` of a backend shares one LISTEN connection (:class:`FinishWatch`): the
first opens it, and it stays open until the backend closes, so a thousand waiters cost one
connection, and a stream of short waits does not open one each. Its callback runs on
trio's thread (``Driver.listen``) and sets the events of that job's waiters; no task runs.

Notices are hints and may be lost (the connection dropped, PostgreSQL's notify queue was
full, a row's mark was cleared): each waiter also reads again every
:data:`WAIT_POLL_SLOW` seconds. When the LISTEN connection is lost, every waiter reads
again at once, after the next of them LISTENs again. Behind a transaction pooler without
``listen_dsn`` nothing can be heard: ``wait_for`` then polls quickly instead (0.05 s
doubling to 1 s) and marks nothing (docs/postgres.rst, "Results").
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from functools import partial

import trio

from trioqueue._backends.postgres.driver import Driver, Listener
from trioqueue._errors import BackendError

__all__ = ["WAIT_MARK_RETRY", "WAIT_POLL_SLOW", "FinishWatch", "Waiter", "parse_finished"]

#: Seconds between a listening waiter's reads when no notice comes (lost notices).
WAIT_POLL_SLOW = 2.0
#: Seconds before a waiter reads again when its job's row was locked and left unmarked.
WAIT_MARK_RETRY = 0.05

log = logging.getLogger("trioqueue.postgres")


def parse_finished(payload: str) -> tuple[int, str] | None:
    """``f:<id>:<queue>`` as ``(id, queue)``; None for any other payload."""
    if not payload.startswith("f:"):
        return None
    job_id, _, queue = payload[2:].partition(":")
    if not job_id.isdigit() or not queue:
        return None
    return int(job_id), queue


class Waiter:
    """One ``wait_for`` call's wake-up: a notice for its job, a lost listener, or the poll."""

    def __init__(self, watch: FinishWatch) -> None:
        self._watch = watch
        self._event = trio.Event()
        self._soon = False

    def read_again_soon(self) -> None:
        """The last read could not mark the row (another statement held its lock): no
        notice would come for it, so the next read comes after :data:`WAIT_MARK_RETRY`."""
        self._soon = True

    def wake(self) -> None:
        self._event.set()

    def arm(self) -> Callable[[], Awaitable[None]]:
        """A fresh wake-up, taken before a read (``wait_finished``'s ``arm``), so that a
        notice arriving during the read is not missed."""
        self._event = event = trio.Event()
        return partial(self._woken, event)

    async def _woken(self, event: trio.Event) -> None:
        pause, self._soon = WAIT_MARK_RETRY if self._soon else WAIT_POLL_SLOW, False
        with trio.move_on_after(pause):
            await event.wait()
        if not self._watch.listening:
            # The connection was lost: LISTEN again before the next read marks and reads,
            # so that a finish after that read is heard.
            try:
                await self._watch.ensure()
            except BackendError as exc:
                log.warning("wait_for cannot LISTEN again, polling meanwhile: %s", exc)


class FinishWatch:
    """The LISTEN connection every ``wait_for`` of one backend shares, and their waiters."""

    def __init__(self, driver: Driver, channel: str) -> None:
        self._driver = driver
        self._channel = channel
        self._waiters: dict[int, set[Waiter]] = {}
        self._listener: Listener | None = None
        self._lost = False
        self._closed = False
        self._lock = trio.Lock()  # one opener at a time: concurrent first waiters share it

    @property
    def listening(self) -> bool:
        """A LISTEN connection is open and has not been lost."""
        return self._listener is not None and self._listener.hears and not self._lost

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def waiters(self) -> int:
        """``wait_for`` calls waiting on the shared listener now."""
        return sum(len(peers) for peers in self._waiters.values())

    async def ensure(self) -> bool:
        """LISTEN unless already listening (again, after a lost connection).

        Returns:
            Whether notices can arrive: False behind a transaction pooler without
            ``listen_dsn``, where nothing is opened.

        Raises:
            BackendError: the connection could not be opened, or the backend is closed.
        """
        async with self._lock:
            if self._closed:
                raise BackendError("the backend is closed", transient=False)
            if self._listener is not None and not self._lost:
                return self._listener.hears
            old, self._listener = self._listener, None
            if old is not None:
                await old.aclose()
            self._lost = False
            self._listener = await self._driver.listen(
                self._channel, self._on_payload, self._on_lost
            )
            return self._listener.hears

    @contextmanager
    def register(self, job_id: int) -> Iterator[Waiter]:
        """A waiter for ``job_id``'s notices, for the block."""
        waiter = Waiter(self)
        self._waiters.setdefault(job_id, set()).add(waiter)
        try:
            yield waiter
        finally:
            peers = self._waiters[job_id]
            peers.discard(waiter)
            if not peers:
                del self._waiters[job_id]

    async def aclose(self) -> None:
        """Close the connection (with the backend); waiters read again and fail."""
        self._closed = True
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.aclose()
        self._wake_all()

    def _on_payload(self, payload: str) -> None:
        finished = parse_finished(payload)
        if finished is not None:
            for waiter in self._waiters.get(finished[0], ()):
                waiter.wake()

    def _on_lost(self) -> None:
        # Notices sent while nobody listened are gone: everyone reads again.
        self._lost = True
        self._wake_all()

    def _wake_all(self) -> None:
        for peers in self._waiters.values():
            for waiter in peers:
                waiter.wake()
