"""The PostgreSQL backend's ``wait_for``: a job's final snapshot, driven by NOTIFY.

Waiters share one LISTEN connection (``finishes.py``); without one (a transaction pooler and
no ``listen_dsn``) they poll, with the pauses of :func:`_poll_delays`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from functools import partial
from typing import Any

import trio

from trioqueue._backends.postgres.arguments import is_bigint
from trioqueue._backends.postgres.finishes import Waiter
from trioqueue._backends.postgres.reads import ReadCalls
from trioqueue._backends.postgres.rows import job_info
from trioqueue._backends.validation import check_age, check_job_id
from trioqueue._backends.waiting import FINISHED, wait_finished
from trioqueue._errors import BackendError, UnknownJobError
from trioqueue._types import JobInfo

log = logging.getLogger("trioqueue.postgres")


#: wait_for's first pause between reads, and the longest, when it cannot LISTEN (behind a
#: transaction pooler without listen_dsn; docs/postgres.rst, "Results").
WAIT_POLL_FIRST = 0.05
WAIT_POLL_MAX = 1.0


class WaitCalls(ReadCalls):
    """Waiting for a job to finish (reads it with :class:`ReadCalls`' ``get_job``)."""

    async def wait_for(
        self,
        job_id: int,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (a plain argument callers outside trio use)
    ) -> JobInfo:
        """Wait until the job is finished (succeeded or failed); its final JobInfo.

        Driven by NOTIFY: the first call LISTENs on one connection that every ``wait_for``
        of this backend shares (kept until the backend closes), then marks the job
        awaited and reads it in one statement; the statements that finish or delete a
        marked job send it a notice. A waiter also reads again every 2 s in case a notice
        was lost. ``timeout=0`` only looks: it neither listens nor marks. Without a LISTEN connection (a transaction pooler, no ``listen_dsn``)
        it polls instead: 0.05 s doubling to 1 s between reads (docs/postgres.rst,
        "Results"; ``finishes.py``). ``timeout`` is in seconds (None: no limit).

        Raises:
            UnknownJobError: no job has this id, or it was deleted while waited for.
            TimeoutError: it was not finished within ``timeout`` seconds.
            TypeError, ValueError: a bad ``job_id`` or ``timeout``; nothing is read.
        """
        checked_id = check_job_id(job_id)
        if timeout is not None:
            check_age("timeout", timeout)
        # timeout=0 looks once: nothing to listen for, no row to mark.
        if timeout == 0 or not await self._can_hear_finishes():
            delays = _poll_delays()
            return await wait_finished(
                checked_id,
                timeout,
                partial(self.get_job, fresh=True),  # never a replica's: it may lag behind
                lambda: partial(trio.sleep, next(delays)),
            )
        with self._finishes.register(checked_id) as waiter:
            read = partial(self._await_job, waiter=waiter)
            return await wait_finished(checked_id, timeout, read, waiter.arm)

    async def _can_hear_finishes(self) -> bool:
        """LISTEN for finishes unless already listening; False when notices cannot arrive."""
        try:
            return await self._finishes.ensure()
        except BackendError as exc:
            if self._finishes.closed:
                raise
            log.warning("wait_for cannot LISTEN, polling instead: %s", exc)
            return False

    async def _await_job(self, job_id: int, *, waiter: Waiter) -> JobInfo:
        """wait_for's read: the job after marking it awaited (counted as a ``get_job``).
        When its row was locked and could not be marked, ``waiter`` reads again soon."""
        if not is_bigint(job_id):
            await trio.lowlevel.checkpoint()
            raise UnknownJobError(job_id)
        row, marked = await self._driver.run("get_job", self._aio_await_job, job_id)
        if row is None:
            raise UnknownJobError(job_id)
        if not marked:
            waiter.read_again_soon()
        return job_info(row)

    async def _aio_await_job(self, connection: Any, job_id: int) -> tuple[Any, bool]:
        """The job's row (None: unknown), and False when it is unfinished and unmarked."""
        row = await connection.fetchrow(self._sql["await_job"], job_id)
        if row is not None:
            return row, True
        # Finished, unknown, marked already, or locked: read it (a new snapshot, which also
        # sees a finish committed while the first statement ran).
        self._driver.calls["get_job"] += 1
        row = await connection.fetchrow(self._sql["get_job"], job_id)
        return row, row is None or row["awaited"] or row["state"] in FINISHED


def _poll_delays() -> Iterator[float]:
    """wait_for's pauses between reads: 0.05 s, doubling up to 1 s."""
    delay = WAIT_POLL_FIRST
    while True:
        yield delay
        delay = min(2 * delay, WAIT_POLL_MAX)
