"""Differential test: the memory backend and the PostgreSQL backend, step by step.

Each hypothesis example opens a fresh memory backend and a PostgreSQL backend on a fresh
schema, draws a sequence of operations (enqueue, enqueue_many, claim, renew, ack, fail,
release, snooze, await_children, cancel, retry, expire, delete_job, a searched and sorted
list_jobs with its count_jobs, set/delete/list_schedules, a schedule made due and the scheduling pass
``enqueue_due``, flow control (pause_queue, resume_queue, set_queue_limits, enqueues
with a group, queue_stats), enqueues with dependencies and their ``dependencies``
read (docs/protocol.rst §21), and bad input), runs each one against both backends, and
compares every answer and, after every step, a normalised view of every job. The memory
backend is the reference model (``trioqueue/_backends/memory/model.py``) in a thin async
shell, so this compares the model's statements with ``queries.sql``'s; it goes through the
shell rather than the model so that bad input, checked in the shell, is compared too.

Both run on trio's real clock with a long lease (``V``), so no lease runs out by itself
during an example: only the ``expire`` step ends one, with the memory backend's
:meth:`~trioqueue._backends.memory.MemoryBackend.expire` hook and the equivalent SQL on PostgreSQL.

What is not compared, on purpose:

* Job ids as numbers: PostgreSQL's come from a sequence, which an enqueue that meets a dedup
  key's duplicate (``ON CONFLICT DO NOTHING``) still advances, so its ids have gaps where
  the memory backend's do not. Ids are opaque; the test maps each memory id to the
  PostgreSQL id enqueued in its place (in order), and compares everything in memory ids.
* ``lease_until`` of claims, and a job's times (``created_at``, ``finished_at``,
  ``lease_expires_at``, ``last_renewed_at``, ``cancel_requested_at``,
  ``cancel_acknowledged_at``) beyond whether each is set: the backends' clocks differ (trio
  time vs. the database's). Sorting by ``created_at`` or ``finished_at`` is compared only
  when those orders follow from the operations (see :meth:`Differential.list_jobs`).
* A schedule's ``next_run_at`` beyond whether it is set, for schedules that tick every
  minute or every five (a minute may turn between the two backends' calls), and its
  ``last_run_at`` beyond whether it is set. A schedule made due is moved to the same past
  instant in both (``move_schedule`` and SQL), so its tick, and the job, are the same.
* A claim's ``retry_after`` beyond whether it is set, and a queue's ``oldest_ready_age``
  beyond whether it is set: both are clock readings. The rates drawn for
  ``max_per_second`` are slow enough that their buckets (one token each) refill by no
  whole token during an example, so which claims they let through does not depend on
  either clock; a rate of one or more would refill within a second, at moments the two
  backends' claims see differently.
* Searches are ASCII: case-insensitive matching of other letters follows the database's
  locale in PostgreSQL and Python's ``str.lower`` in memory (docs/api.rst).
* Payloads are JSON without floats: ``jsonb`` normalises numbers (``1e300`` comes back as
  an int, ``1.0`` may lose its type), a documented and accepted difference. Dict key order
  is normalised by ``jsonb`` too, and is ignored since payloads are compared with ``==``.
"""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest
import trio
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from trioqueue._backends.memory import MemoryBackend, open_memory
from trioqueue._backends.postgres import PostgresBackend, open_postgres
from trioqueue._core.wire import RenewItem
from trioqueue._types import (
    Ack,
    ChildWaitWrite,
    Claimed,
    Claims,
    Failure,
    JobDependencies,
    JobInfo,
    QueueStats,
    Release,
    ScheduleInfo,
    SnoozeWrite,
)

from ..conftest import Janitor

pytestmark = pytest.mark.postgres

T = TypeVar("T")

QUEUES = ("a", "b")
#: Leases long enough that none runs out by itself during an example.
V = 60.0
STEPS = 30
#: Added to an id no job has, to name no PostgreSQL job either.
UNKNOWN_OFFSET = 10**12

# Small JSON without floats (see the module docstring). Text avoids NUL, which both refuse.
json_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | json_text,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(json_text, children, max_size=3)
    ),
    max_leaves=6,
)
#: Handlers' results as the runtime sends them: JSON text, or None for none.
results = st.none() | json_values.map(json.dumps)
priorities = st.integers(-2, 2)
max_attempts = st.integers(1, 3)
delays = st.sampled_from([None, None, None, 0, 0.0, 3600])
dedup_keys = st.none() | st.none() | st.none() | st.sampled_from(["k1", "k2"])
groups = st.none() | st.sampled_from(["g1", "g2"])
#: docs/protocol.rst §18: keep mostly; without a dedup key, or debounce without a delay, a
#: policy is bad input (refused alike).
on_duplicates = st.sampled_from(["keep", "keep", "replace", "debounce"])
#: Small limits: a running cap a few claims reach, and rates too slow to refill a token
#: during an example (see the module docstring).
max_runnings = st.sampled_from([None, 1, 2])
max_per_seconds = st.sampled_from([None, None, 0.001, 0.002])
#: Progress values as the runtime might send them: valid, None, and invalid ones a backend
#: must filter out (never store).
progresses = st.sampled_from(
    [None, None, 0.0, 0.25, 1.0, 0.5, -0.1, 1.5, math.nan, math.inf, -math.inf]
)
retry_delays = st.sampled_from([None, 0, 0.0])
#: A snooze's seconds: ready at once, or scheduled for longer than an example runs.
snooze_seconds = st.sampled_from([0, 0.0, 3600.0])
#: What to search for: characters JSON text is made of, wildcards LIKE would misread, a
#: word of the failures' text (with another case), and nothing at all.
searches = st.sampled_from([None, "a", "A", "1", '"', "[", "{", ": ", "%", "_", "\\", "BOOM"])
#: Orders both backends must agree on exactly (the clocks of the time orders differ).
sorts = st.sampled_from(["id", "-id", "priority", "-priority"])
SCHEDULES = ("s1", "s2")
#: Cron expressions: two whose next tick is the same in both backends unless a year turns
#: between their calls, and two whose next tick may differ by a minute turning meanwhile.
SPARSE_CRONS = ("0 0 1 1 *", "30 2 1 7 *")
crons = st.sampled_from([*SPARSE_CRONS, "* * * * *", "*/5 * * * *"])
zones = st.sampled_from(["UTC", "Europe/Berlin", "America/New_York"])
#: Where a schedule made due is moved, in both backends: in the past, a second per step.
DUE_FROM = datetime(2020, 1, 1, tzinfo=UTC)


def normalised(job: JobInfo, id_of: Callable[[int], int]) -> tuple[Any, ...]:
    """A job as compared across backends: everything but the clock readings."""
    return (
        id_of(job.id),
        job.queue,
        job.payload,
        job.status,
        job.attempts,
        job.max_attempts,
        job.priority,
        job.progress,
        job.last_error,
        job.finished_at is None,
        job.lease_expires_at is None,
        job.last_renewed_at is None,
        job.cancel_requested_at is None,
        job.cancel_acknowledged_at is None,
        job.worker_id,
        job.result,
        job.group,
        job.cancelled,
        job.snoozes,
    )


def schedule_view(info: ScheduleInfo) -> tuple[Any, ...]:
    """A schedule as compared across backends (see the module docstring)."""
    return (
        info.name,
        info.queue,
        info.cron,
        info.timezone,
        info.payload,
        info.priority,
        info.max_attempts,
        info.next_run_at if info.cron in SPARSE_CRONS else info.next_run_at is None,
        info.last_run_at is None,
    )


def view(result: Any, id_of: Callable[[int], int]) -> Any:
    """An answer with its job ids in memory ids; claims without their ``lease_until``;
    schedules as :func:`schedule_view` shows them."""
    if isinstance(result, ScheduleInfo):
        return schedule_view(result)
    if isinstance(result, Claims):  # whether limits held rows back, then the claims
        return (result.retry_after is None, view(list(result), id_of))
    if isinstance(result, list) and result and isinstance(result[0], ScheduleInfo):
        return [schedule_view(info) for info in result]
    if isinstance(result, list) and result and isinstance(result[0], Claimed):
        return [
            (
                id_of(c.job.id),
                c.job.queue,
                c.job.payload,
                c.job.attempt,
                c.job.max_attempts,
                c.job.claim_seq,
            )
            for c in result
        ]
    if isinstance(result, JobDependencies):
        return (
            id_of(result.job_id),
            [(id_of(d.id), d.queue, d.status) for d in result.dependencies],
            [(id_of(d.id), d.queue, d.status) for d in result.dependents],
            None if result.parent is None else id_of(result.parent.id),
            [(id_of(d.id), d.queue, d.status) for d in result.children],
        )
    if isinstance(result, dict):  # renewal verdicts
        return {id_of(job_id): verdict for job_id, verdict in result.items()}
    if result and isinstance(result, list) and type(result[0]) is int:  # enqueue_many's ids
        return [id_of(job_id) for job_id in result]
    if isinstance(result, int) and not isinstance(result, bool):  # enqueue's id
        return id_of(result)
    return result


async def outcome(call: Callable[[], Awaitable[Any]]) -> tuple[str, Any]:
    """``("ok", result)`` or ``("raised", exception type)``."""
    try:
        return ("ok", await call())
    except Exception as exc:
        return ("raised", type(exc))


async def expire_postgres(backend: PostgresBackend, job_id: int) -> None:
    async with backend.acquire() as connection:
        status = await connection.fetchval(
            f'UPDATE "{backend.schema}".jobs SET not_visible_until = now() - interval '
            f"'1 second', lease_floor = now() - interval '1 second' "  # (migration 0006)
            f"WHERE id = $1 AND status = 'running' RETURNING status",
            job_id,
        )
    assert status == "running", f"job {job_id} is not running in PostgreSQL"


class Differential:
    """Runs each operation on both backends and asserts they agree."""

    def __init__(self, memory: MemoryBackend, postgres: PostgresBackend, data: st.DataObject):
        self.memory = memory
        self.postgres = postgres
        self.data = data
        self.jobs = 0  # ids 1..jobs exist (both backends number from 1)
        self.pairs: list[tuple[int, int]] = []  # every (id, claim_seq) ever claimed
        self.running: list[int] = []  # ids whose row status is "running"
        self.failed: list[int] = []
        self.log: list[str] = []
        self.postgres_ids: dict[int, int] = {}  # memory id -> PostgreSQL id
        self.memory_ids: dict[int, int] = {}  # PostgreSQL id -> memory id
        self.schedules: set[str] = set()  # names of the schedules that exist
        self.due_steps = 0

    def draw(self, strategy: st.SearchStrategy[T], label: str) -> T:
        return self.data.draw(strategy, label=label)

    def to_postgres(self, job_id: int) -> int:
        """The PostgreSQL id of the job with memory id ``job_id``; an unknown id stays unknown."""
        if job_id in self.postgres_ids:
            return self.postgres_ids[job_id]
        return job_id + UNKNOWN_OFFSET if 0 < job_id < 2**62 else job_id

    def to_memory(self, job_id: int) -> int:
        """The inverse of :meth:`to_postgres`."""
        if job_id in self.memory_ids:
            return self.memory_ids[job_id]
        return (
            job_id - UNKNOWN_OFFSET if UNKNOWN_OFFSET < job_id < 2**62 + UNKNOWN_OFFSET else job_id
        )

    async def both(
        self, name: str, call: Callable[[Any, Callable[[int], int]], Awaitable[Any]]
    ) -> Any:
        """Call ``call(backend, id_of)`` on both backends; assert the outcomes agree.

        ``id_of`` turns a memory id into the backend's id; answers are compared in memory
        ids. Returns the memory backend's answer (claims as :func:`claimed_view`).
        """
        self.log.append(name)
        expected = await outcome(lambda: call(self.memory, lambda i: i))
        actual = await outcome(lambda: call(self.postgres, self.to_postgres))
        if name.startswith("enqueue") and expected[0] == actual[0] == "ok":
            # Map new ids in order (see the module docstring: PostgreSQL's ids have gaps).
            ids = expected[1] if isinstance(expected[1], list) else [expected[1]]
            pg_ids = actual[1] if isinstance(actual[1], list) else [actual[1]]
            for memory_id, postgres_id in zip(ids, pg_ids, strict=False):
                if memory_id not in self.postgres_ids and postgres_id not in self.memory_ids:
                    self.postgres_ids[memory_id] = postgres_id
                    self.memory_ids[postgres_id] = memory_id
        expected = (expected[0], view(expected[1], lambda i: i))
        actual = (actual[0], view(actual[1], self.to_memory))
        assert actual == expected, f"{name}: memory {expected!r}, postgres {actual!r}"
        return expected[1]

    async def compare_jobs(self) -> None:
        memory = [normalised(job, lambda i: i) for job in await self.memory.list_jobs(limit=10_000)]
        postgres = [
            normalised(job, self.to_memory) for job in await self.postgres.list_jobs(limit=10_000)
        ]
        assert postgres == memory, "job views differ after: " + " | ".join(self.log)
        for job in memory:  # what the example reached (--hypothesis-show-statistics)
            event(f"reached: {job[3]}, last_error={job[8]!r}")
        # Ids are never reused: after a delete the highest id, not the count, bounds them.
        self.jobs = max([self.jobs, *(job[0] for job in memory)])
        self.running = [job[0] for job in memory if job[3] == "running"]
        self.failed = [job[0] for job in memory if job[3] == "failed"]

    def some_id(self) -> int:
        known = list(range(1, self.jobs + 1))
        unknown = [self.jobs + 1, self.jobs + 7, 0, -3, 2**70]
        return self.draw(
            st.sampled_from(known + unknown) if known else st.sampled_from(unknown), "id"
        )

    def some_pairs(self, max_size: int) -> list[tuple[int, int]]:
        if not self.pairs:
            return []
        # Mostly recent claims (likely still current), also old (stale) ones and made-up ones.
        pair = (
            st.sampled_from(self.pairs[-4:])
            | st.sampled_from(self.pairs)
            | st.tuples(st.integers(1, self.jobs + 2), st.integers(0, 4))
        )
        return self.draw(st.lists(pair, max_size=max_size), "pairs")

    # -- operations --------------------------------------------------------------------------

    async def enqueue(self) -> None:
        queue = self.draw(st.sampled_from(QUEUES), "queue")
        payload = self.draw(json_values, "payload")
        options = self.enqueue_options()
        await self.both(
            f"enqueue({queue!r}, {payload!r}, {options})",
            lambda b, _: b.enqueue(queue, payload, **options),
        )

    def enqueue_options(self) -> dict[str, Any]:
        return {
            "priority": self.draw(priorities, "priority"),
            "delay": self.draw(delays, "delay"),
            "max_attempts": self.draw(max_attempts, "max_attempts"),
            "dedup_key": self.draw(dedup_keys, "dedup_key"),
            "group": self.draw(groups, "group"),
            "on_duplicate": self.draw(on_duplicates, "on_duplicate"),
        }

    async def enqueue_many(self) -> None:
        queue = self.draw(st.sampled_from(QUEUES), "queue")
        payloads = self.draw(st.lists(json_values, max_size=3), "payloads")
        options = self.enqueue_options()  # with several payloads a dedup key is an error
        await self.both(
            f"enqueue_many({queue!r}, {payloads!r}, {options})",
            lambda b, _: b.enqueue_many(queue, payloads, **options),
        )

    async def enqueue_after(self) -> None:
        """enqueue_many with depends_on (known ids, some unknown), a policy, and now and
        then an option depends_on excludes."""
        queue = self.draw(st.sampled_from(QUEUES), "queue")
        payloads = self.draw(st.lists(json_values, min_size=1, max_size=2), "payloads")
        depends_on = [self.some_id() for _ in range(self.draw(st.integers(0, 3), "deps"))]
        options: dict[str, Any] = {
            "priority": self.draw(priorities, "priority"),
            "max_attempts": self.draw(max_attempts, "max_attempts"),
            "group": self.draw(groups, "group"),
            "on_dependency_failure": self.draw(st.sampled_from(["fail", "cancel"]), "policy"),
        }
        if self.draw(st.integers(0, 9), "excluded option") == 0:
            options["delay"] = 5.0
        parent = self.some_id() if self.draw(st.booleans(), "under a parent") else None

        async def run(b: Any, id_of: Callable[[int], int]) -> Any:
            ids = [id_of(i) for i in depends_on]
            under = None if parent is None else id_of(parent)
            return await b.enqueue_many(queue, payloads, depends_on=ids, parent_id=under, **options)

        await self.both(f"enqueue_after({queue!r}, {depends_on}, {parent}, {options})", run)

    async def dependencies(self) -> None:
        job_id = self.some_id()
        await self.both(f"dependencies({job_id})", lambda b, id_of: b.dependencies(id_of(job_id)))

    async def claim(self) -> None:
        queue = self.draw(st.sampled_from(QUEUES), "queue")
        limit = self.draw(st.integers(1, 3), "limit")
        no_retry_after, claims = await self.both(
            f"claim({queue!r}, limit={limit})",
            lambda b, _: b.claim(queue, limit=limit, worker_id="w", visibility_timeout=V),
        )
        event(f"claim held back by limits: {not no_retry_after}")
        for job_id, *_, claim_seq in claims:
            self.pairs.append((job_id, claim_seq))

    async def renew(self) -> None:
        # One item per job: with the same job twice in one renewal the backends disagree
        # (PostgreSQL's UPDATE ... FROM applies one of the duplicates, not predictably
        # which; memory applies each in turn). The guard never sends duplicates.
        pairs = list({job_id: (job_id, seq) for job_id, seq in self.some_pairs(4)}.values())
        items = [RenewItem(i, s, self.draw(progresses, "progress")) for i, s in pairs]
        await self.both(
            f"renew({items})",
            lambda b, id_of: b.renew(
                [RenewItem(id_of(i.job_id), i.claim_seq, i.progress) for i in items],
                visibility_timeout=V,
            ),
        )

    async def ack(self) -> None:
        items = [
            Ack(i, s, self.draw(progresses, "progress"), self.draw(results, "result"))
            for i, s in self.some_pairs(3)
        ]
        await self.both(
            f"ack({items})",
            lambda b, id_of: b.ack([replace(i, job_id=id_of(i.job_id)) for i in items]),
        )

    async def fail(self) -> None:
        items = [
            Failure(
                i,
                s,
                "boom",
                self.draw(retry_delays, "retry_delay"),
                self.draw(progresses, "progress"),
            )
            for i, s in self.some_pairs(3)
        ]
        await self.both(
            f"fail({items})",
            lambda b, id_of: b.fail([replace(i, job_id=id_of(i.job_id)) for i in items]),
        )

    async def release(self) -> None:
        items = [Release(i, s, self.draw(progresses, "progress")) for i, s in self.some_pairs(3)]
        await self.both(
            f"release({items})",
            lambda b, id_of: b.release([replace(i, job_id=id_of(i.job_id)) for i in items]),
        )

    async def snooze(self) -> None:
        items = [
            SnoozeWrite(
                i, s, self.draw(snooze_seconds, "seconds"), self.draw(progresses, "progress")
            )
            for i, s in self.some_pairs(3)
        ]
        bound = self.draw(st.integers(0, 2), "max_snoozes")
        await self.both(
            f"snooze({items}, max_snoozes={bound})",
            lambda b, id_of: b.snooze(
                [replace(i, job_id=id_of(i.job_id)) for i in items], max_snoozes=bound
            ),
        )

    async def await_children(self) -> None:
        items = [
            ChildWaitWrite(
                i,
                s,
                self.draw(st.sampled_from(["fail", "continue"]), "on_child_failure"),
                self.draw(progresses, "progress"),
            )
            for i, s in self.some_pairs(3)
        ]
        await self.both(
            f"await_children({items})",
            lambda b, id_of: b.await_children([replace(i, job_id=id_of(i.job_id)) for i in items]),
        )

    async def cancel(self) -> None:
        running = self.draw(st.booleans(), "cancel a running job") if self.running else False
        if running:
            job_id = self.draw(st.sampled_from(self.running), "id")
        else:
            job_id = self.some_id()
        await self.both(f"cancel({job_id})", lambda b, id_of: b.cancel(id_of(job_id)))

    async def retry(self) -> None:
        job_id = self.draw(st.sampled_from(self.failed), "id") if self.failed else self.some_id()
        await self.both(f"retry({job_id})", lambda b, id_of: b.retry(id_of(job_id)))

    async def delete_job(self) -> None:
        running = self.draw(st.booleans(), "delete a running job") if self.running else False
        job_id = self.draw(st.sampled_from(self.running), "id") if running else self.some_id()
        await self.both(f"delete_job({job_id})", lambda b, id_of: b.delete_job(id_of(job_id)))

    async def list_jobs(self) -> None:
        queue = self.draw(st.sampled_from([None, *QUEUES]), "queue")
        status = self.draw(
            st.sampled_from([None, "ready", "running", "scheduled", "failed"]), "status"
        )
        search = self.draw(searches, "search")
        sort = self.draw(sorts, "sort")
        limit = self.draw(st.integers(1, 5), "limit")
        offset = self.draw(st.integers(0, 3), "offset")

        async def listed(backend: Any, _: Callable[[int], int]) -> tuple[list[int], tuple[int]]:
            jobs = await backend.list_jobs(queue, status, limit, offset, search=search, sort=sort)
            count = await backend.count_jobs(queue, status, search=search)
            return [job.id for job in jobs], (count,)  # ids mapped below; the count is not

        self.log.append(f"list_jobs({queue!r}, {status!r}, {limit}, {offset}, {search!r}, {sort})")
        memory = await listed(self.memory, lambda i: i)
        postgres = await listed(self.postgres, self.to_postgres)
        assert ([self.to_memory(i) for i in postgres[0]], postgres[1]) == memory, self.log

    async def expire(self) -> None:
        if not self.running:
            return
        job_id = self.draw(st.sampled_from(self.running), "id")
        self.log.append(f"expire({job_id})")
        self.memory.expire(job_id)
        await expire_postgres(self.postgres, self.to_postgres(job_id))

    async def pause_queue(self) -> None:
        queue = self.draw(st.sampled_from(QUEUES), "queue")
        await self.both(f"pause_queue({queue!r})", lambda b, _: b.pause_queue(queue))

    async def resume_queue(self) -> None:
        queue = self.draw(st.sampled_from(QUEUES), "queue")
        await self.both(f"resume_queue({queue!r})", lambda b, _: b.resume_queue(queue))

    async def set_queue_limits(self) -> None:
        queue = self.draw(st.sampled_from(QUEUES), "queue")
        limits = {
            "max_running": self.draw(max_runnings, "max_running"),
            "max_per_second": self.draw(max_per_seconds, "max_per_second"),
        }
        await self.both(
            f"set_queue_limits({queue!r}, {limits})",
            lambda b, _: b.set_queue_limits(queue, **limits),
        )

    async def queue_stats(self) -> None:
        def shown(stats: dict[str, QueueStats]) -> dict[str, tuple[Any, ...]]:
            return {
                queue: (
                    dict(s.counts),
                    s.oldest_ready_age is None,
                    s.paused,
                    s.max_running,
                    s.max_per_second,
                )
                for queue, s in stats.items()
            }

        async def stats(backend: Any, _: Callable[[int], int]) -> tuple[str, dict[str, Any]]:
            return ("stats", shown(await backend.queue_stats()))  # (a dict is verdicts)

        await self.both("queue_stats()", stats)

    async def set_schedule(self) -> None:
        name = self.draw(st.sampled_from(SCHEDULES), "name")
        queue = self.draw(st.sampled_from(QUEUES), "queue")
        cron = self.draw(crons, "cron")
        payload = self.draw(json_values, "payload")
        options = {
            "timezone": self.draw(zones, "timezone"),
            "priority": self.draw(priorities, "priority"),
            "max_attempts": self.draw(st.none() | max_attempts, "max_attempts"),
        }
        await self.both(
            f"set_schedule({name!r}, {queue!r}, {cron!r}, {payload!r}, {options})",
            lambda b, _: b.set_schedule(name, queue, cron, payload, **options),
        )
        self.schedules.add(name)

    async def delete_schedule(self) -> None:
        name = self.draw(st.sampled_from(SCHEDULES), "name")
        await self.both(f"delete_schedule({name!r})", lambda b, _: b.delete_schedule(name))
        self.schedules.discard(name)

    async def list_schedules(self) -> None:
        await self.both("list_schedules()", lambda b, _: b.list_schedules())

    async def enqueue_due(self) -> None:
        """Make a schedule due (moved to the same past instant in both), or none, then pass."""
        make_due = bool(self.schedules) and self.draw(st.booleans(), "make one due")
        if make_due:
            name = self.draw(st.sampled_from(sorted(self.schedules)), "due")
            self.due_steps += 1
            at = DUE_FROM + timedelta(seconds=self.due_steps)
            self.log.append(f"move_schedule({name!r}, {at})")
            self.memory.move_schedule(name, at)
            async with self.postgres.acquire() as connection:
                await connection.execute(
                    f'UPDATE "{self.postgres.schema}".schedules SET next_run_at = $2 '
                    "WHERE name = $1",
                    name,
                    at,
                )
        enqueued = await self.both("enqueue_due()", lambda b, _: b.enqueue_due())
        event(f"enqueue_due enqueued {len(enqueued)}")

    async def bad_input(self) -> None:
        calls: dict[str, Callable[[Any, Callable[[int], int]], Awaitable[Any]]] = {
            "enqueue(max_attempts=0)": lambda b, _: b.enqueue("a", 1, max_attempts=0),
            "enqueue(payload={1})": lambda b, _: b.enqueue("a", {1}),
            "enqueue(payload='\\x00')": lambda b, _: b.enqueue("a", "\x00"),
            "enqueue(queue='')": lambda b, _: b.enqueue("", 1),
            "enqueue(delay=-1)": lambda b, _: b.enqueue("a", 1, delay=-1),
            "enqueue_many(dedup_key, 2 payloads)": lambda b, _: b.enqueue_many(
                "a", [1, 2], dedup_key="k1"
            ),
            "claim(limit=0)": lambda b, _: b.claim(
                "a", limit=0, worker_id="w", visibility_timeout=V
            ),
            "claim(visibility_timeout=0)": lambda b, _: b.claim(
                "a", limit=1, worker_id="w", visibility_timeout=0
            ),
            "cancel('1')": lambda b, _: b.cancel("1"),
            "delete_job(True)": lambda b, _: b.delete_job(True),
            "list_jobs(sort='bogus')": lambda b, _: b.list_jobs(sort="bogus"),
            "count_jobs(search='\\x00')": lambda b, _: b.count_jobs(search="\x00"),
            "retry(1.0)": lambda b, _: b.retry(1.0),
            "get_job(unknown)": lambda b, id_of: b.get_job(id_of(self.jobs + 1)),
            "fail(retry_delay=-1)": lambda b, _: b.fail([Failure(1, 1, "x", -1)]),
            "snooze(seconds=-1)": lambda b, _: b.snooze([SnoozeWrite(1, 1, -1)], max_snoozes=1),
            "snooze(max_snoozes=-1)": lambda b, _: b.snooze([], max_snoozes=-1),
            "renew(visibility_timeout=-1)": lambda b, _: b.renew(
                [RenewItem(1, 1, None)], visibility_timeout=-1
            ),
            "set_schedule(cron='61 * * * *')": lambda b, _: b.set_schedule("s1", "a", "61 * * * *"),
            "set_schedule(timezone='Nowhere')": lambda b, _: b.set_schedule(
                "s1", "a", "* * * * *", timezone="Nowhere"
            ),
            "set_schedule(name='')": lambda b, _: b.set_schedule("", "a", "* * * * *"),
            "delete_schedule(1)": lambda b, _: b.delete_schedule(1),
            "set_queue_limits(max_running=0)": lambda b, _: b.set_queue_limits("a", max_running=0),
            "set_queue_limits(max_per_second=nan)": lambda b, _: b.set_queue_limits(
                "a", max_per_second=math.nan
            ),
            "enqueue(group='')": lambda b, _: b.enqueue("a", 1, group=""),
            "enqueue_many(group=1)": lambda b, _: b.enqueue_many("a", [1], group=1),
        }
        name = self.draw(st.sampled_from(sorted(calls)), "bad input")
        await self.both(name, calls[name])

    async def step(self) -> None:
        operations = [
            (self.enqueue, 4),
            (self.enqueue_many, 2),
            (self.enqueue_after, 3),
            (self.dependencies, 1),
            (self.claim, 5),
            (self.renew, 2),
            (self.ack, 2),
            (self.fail, 2),
            (self.release, 1),
            (self.snooze, 2),
            (self.await_children, 2),
            (self.cancel, 2),
            (self.retry, 1),
            (self.expire, 2),
            (self.delete_job, 1),
            (self.list_jobs, 2),
            (self.set_schedule, 2),
            (self.delete_schedule, 1),
            (self.list_schedules, 1),
            (self.enqueue_due, 2),
            (self.pause_queue, 1),
            (self.resume_queue, 1),
            (self.set_queue_limits, 2),
            (self.queue_stats, 1),
            (self.bad_input, 1),
        ]
        weighted = [op for op, weight in operations for _ in range(weight)]
        operation = self.draw(st.sampled_from(weighted), "operation")
        await operation()
        await self.compare_jobs()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
async def test_memory_and_postgres_backends_agree(
    data: st.DataObject, postgres_dsn: str, postgres_janitor: Janitor
) -> None:
    schema = f"tq_diff_{secrets.token_hex(6)}"
    try:
        async with open_memory() as memory, open_postgres(postgres_dsn, schema=schema) as pg:
            await pg.migrate()
            started = trio.current_time()
            differential = Differential(memory, pg, data)
            for _ in range(STEPS):
                await differential.step()
            # No lease ran out by itself: the example stayed well inside V.
            assert trio.current_time() - started < V / 2
    finally:
        postgres_janitor.drop(schema)
