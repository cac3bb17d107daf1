"""The PostgreSQL backend's worker side: claims, renewals, pool registration, clocks.

A claim is one statement (two in a transaction for a queue with limits, holding its
``queues`` row); a renewal of any number of jobs is one statement, which also records the
pool's heartbeat. A claimed row whose payload cannot be decoded is failed at once, on the
claim's connection, and costs its batch siblings nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import trio

from trioqueue._backends.postgres.arguments import (
    beat_arguments,
    checkpoint_texts,
    fences,
    is_bigint,
    progress_texts,
    storable_text,
)
from trioqueue._backends.postgres.base import BackendBase
from trioqueue._backends.postgres.driver import DRIVER_ERRORS
from trioqueue._backends.postgres.rows import read_payload
from trioqueue._backends.postgres.statements import (
    execute,
    fetch,
    fetch_planned_for_arguments,
    fetchval,
)
from trioqueue._backends.validation import (
    check_beat,
    check_checkpoint_texts,
    check_claim,
    check_registration,
    check_renew_items,
    check_timeout,
    check_worker_id,
    decode_trace_context,
)
from trioqueue._core.wire import RenewItem, Verdict
from trioqueue._types import (
    Claimed,
    Claims,
    Failure,
    Job,
    PoolBeat,
    PoolRegistration,
    UndecodablePayload,
)

log = logging.getLogger("trioqueue.postgres")


#: Renewals of up to this many jobs run on PostgreSQL's cached (generic) plan of the
#: prepared statement, which saves planning the statement anew each time (planning took as
#: long as running it, for ten jobs). A generic plan cannot know how many jobs the arrays
#: hold and joins them as if they were few: for 10,000 jobs it was measured 45x slower (26 s
#: instead of 0.56 s), so larger renewals ask for a plan made for their arguments.
_GENERIC_PLAN_ITEMS = 100

#: The renew statement's verdicts by their text (a dict lookup: ``Verdict(text)`` per row
#: was a tenth of the Python time of a 10,000-job renewal).
_VERDICTS = {verdict.value: verdict for verdict in Verdict}

#: Enough jobs for any claim; larger limits are clamped to it.
_MAX_CLAIM = 2**31 - 1


class ClaimCalls(BackendBase):
    """Claiming, renewing, registering pools, reading clocks."""

    def wall_time(self) -> float:
        """:attr:`wall_clock`, by default ``time.time()``: row times are the database's
        clock, assumed in sync with ours (docs/protocol.rst §8 says what a pool does when
        its claims prove otherwise)."""
        return self.wall_clock()

    async def database_clock(self) -> float:
        """``clock_timestamp()``, epoch seconds: one statement, the ``"clock"`` operation."""
        at: float = await self._driver.run("clock", fetchval, self._sql["database_clock"])
        return at

    async def claim(
        self,
        queue: str,
        *,
        limit: int,
        worker_id: str,
        visibility_timeout: float,
        quarantine_after: int | None = None,
        alone: bool = False,
    ) -> list[Claimed]:
        """Lease up to ``limit`` claimable jobs of ``queue``, priority DESC then id ASC.

        One statement. Rows whose lease expired on their final attempt, or that were asked
        to cancel while running, are moved to ``failed`` instead of being run again. A
        queue with limits is claimed in a transaction holding its ``queues`` row, and the
        answer's ``retry_after`` says when the limits held rows back (docs/flow.rst).
        Quarantined rows are taken only ``alone`` (docs/protocol.rst §13).
        """
        check_claim(queue, limit, worker_id, visibility_timeout, quarantine_after, alone)
        claim = _Claim(queue, min(limit, _MAX_CLAIM), worker_id, float(visibility_timeout),
                       quarantine_after, alone)  # fmt: skip
        return await self._driver.run("claim", self._aio_claim, claim)

    async def _aio_claim(self, connection: Any, claim: _Claim) -> Claims:
        """The claim statement; then, on the same connection and in the same crossing, the
        final failure of any row whose payload does not decode.

        Decoding is per row, so such a row (another tool wrote it) costs its batch siblings
        nothing: they are delivered. The row itself is failed at once, fenced by its new
        ``claim_seq``, and not retried, since every attempt would decode the same payload
        the same way; an operator can fix the row and retry it. If that write fails, the
        row's lease runs out and a later claim tries again: only the row pays for it.
        """
        rows = await self._claim_rows(connection, claim)
        claimed = Claims()
        undecodable: list[Failure] = []
        for row in rows:
            if row["id"] is None:  # the clock's row, a waiting quarantined row, or limits
                if row["database_clock"] is not None:
                    claimed.database_clock = row["database_clock"]
                elif row["alone_waiting"]:
                    claimed.alone_waiting = True
                else:
                    claimed.retry_after = row["retry_after"]
                continue
            payload = read_payload(row["payload"])
            if isinstance(payload, UndecodablePayload):
                error = storable_text(f"payload cannot be decoded ({payload.error})")
                log.error("job %d fails without running: %s", row["id"], error)
                undecodable.append(Failure(row["id"], row["claim_seq"], error, None))
                continue
            # Job(id, queue, payload, attempt, max_attempts, claim_seq, waited,
            # trace_context, checkpoint): by position, a third cheaper than by keyword for
            # every job. The checkpoint is the one an earlier attempt stored (§16).
            checkpoint = row["checkpoint"]
            job = Job(
                row["id"],
                row["queue"],
                payload,
                row["attempts"],
                row["max_attempts"],
                row["claim_seq"],
                row["waited"],
                decode_trace_context(row["trace_context"]),
                None if checkpoint is None else read_payload(checkpoint),
            )
            claimed.append(Claimed(job, row["lease_until"], row["locked_after"], row["alone"]))
        if undecodable:
            self._driver.calls["fail"] += 1
            errors = [f.error for f in undecodable]
            nothing: list[str | None] = [None] * len(undecodable)  # final; no progress
            try:
                await connection.fetch(
                    self._sql["fail"],
                    *fences(undecodable),
                    errors,
                    nothing,
                    nothing,
                    *(None,) * 5,  # no error type, traceback, timing or checkpoint: it never ran
                )
            except DRIVER_ERRORS as exc:
                log.warning("failing %d undecodable job(s) failed: %r", len(undecodable), exc)
                if not isinstance(exc, asyncpg.PostgresError):
                    connection.terminate()  # the connection may be broken: never reuse it
        return claimed

    async def _claim_rows(self, connection: Any, claim: _Claim) -> list[Any]:
        """The claim statement's rows. A queue with limits is claimed with its ``queues`` row
        locked, in a transaction of two statements, so that the claim's snapshot counts
        what every claim before it took (queries.sql, ``claim``). Queues known to have
        limits go there at once; any other queue's claim says so when it has them."""
        sql, queue = self._sql["claim"], claim.queue
        if queue not in self._limited_queues:
            rows: list[Any] = await connection.fetch(sql, *claim.arguments(locked=False))
            if not any(row["retry_after"] is not None and row["retry_after"] < 0 for row in rows):
                return rows  # (the first step of a limited claim takes nothing)
            self._limited_queues.add(queue)
        async with connection.transaction():
            if not await connection.fetchval(self._sql["lock_queue"], queue):
                self._limited_queues.discard(queue)  # limits lifted: next time, one step
            rows = await connection.fetch(sql, *claim.arguments(locked=True))
        return rows

    async def renew(
        self,
        items: Sequence[RenewItem],
        *,
        visibility_timeout: float,
        beat: PoolBeat | None = None,
    ) -> Mapping[int, Verdict]:
        """Renew every item in one statement, storing progress; one verdict per job.

        A row locked by another transaction is skipped, never waited for: ``UNCHANGED``.
        With ``beat``, the same statement records the pool's heartbeat; a beat without
        items is that statement with no jobs in it (the ``"beat"`` operation).
        """
        lease = check_timeout("visibility_timeout", visibility_timeout)
        items = check_renew_items(items)
        check_checkpoint_texts(items)
        beat = check_beat(beat)
        if not items and beat is None:
            await trio.lowlevel.checkpoint()
            return {}
        # An id out of bigint range names no row: it is gone without asking.
        verdicts = {item.job_id: Verdict.GONE for item in items if not is_bigint(item.job_id)}
        if verdicts:
            items = tuple(item for item in items if item.job_id not in verdicts)
        if not items and beat is None:
            await trio.lowlevel.checkpoint()
            return verdicts
        rows = await self._driver.run(
            "renew" if items else "beat",
            fetch if len(items) <= _GENERIC_PLAN_ITEMS else fetch_planned_for_arguments,
            self._sql["renew"],
            *fences(items),
            progress_texts(items),
            lease,
            *beat_arguments(beat),
            checkpoint_texts(items),
        )
        verdicts.update((row["id"], _VERDICTS[row["verdict"]]) for row in rows)
        return verdicts

    async def register_pool(self, pool: PoolRegistration) -> None:
        """Register a worker pool, started now; first deletes pools stale for over an hour."""
        pool = check_registration(pool)
        await self._driver.run(
            "register_pool",
            execute,
            self._sql["register_pool"],
            pool.worker_id,
            pool.host,
            pool.pid,
            pool.queue,
            pool.concurrency,
            float(pool.heartbeat_interval),
        )

    async def unregister_pool(self, worker_id: str) -> bool:
        """Remove a pool's row (graceful shutdown); False when it had none."""
        worker_id = check_worker_id(worker_id)
        deleted = await self._driver.run(
            "unregister_pool", fetchval, self._sql["unregister_pool"], worker_id
        )
        return deleted is not None


@dataclass(frozen=True, slots=True)
class _Claim:
    """One claim's arguments, checked: the claim statement's parameters but the last."""

    queue: str
    limit: int
    worker_id: str
    lease: float
    quarantine_after: int | None
    alone: bool

    def arguments(self, *, locked: bool) -> tuple[object, ...]:
        """$1..$7 of the claim statement; ``locked``: the queue's row is held ($5)."""
        return (self.queue, self.limit, self.worker_id, self.lease, locked,
                self.quarantine_after, self.alone)  # fmt: skip
