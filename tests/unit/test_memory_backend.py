"""The memory backend: the conformance suite, then what only the memory backend has.

Fault injection, the connection model, notices and the claim index are memory-backend
features; the runtime's tests lean on them, so they are pinned here. Wherever time passes
it is on trio's MockClock (``autojump_clock``): no test waits in real time.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trioqueue._backends.interface import OPERATIONS
from trioqueue._backends.memory import MemoryBackend, open_memory
from trioqueue._core.wire import RenewItem, Verdict
from trioqueue._errors import BackendError
from trioqueue._types import (
    Ack,
    ChildWaitWrite,
    Claimed,
    Failure,
    Notice,
    NoticeKind,
    PoolBeat,
    PoolRegistration,
    Release,
    SnoozeWrite,
)
from trioqueue.testing import BackendConformance, delay, error, hang, omit

Q = "q"
V = 10.0  # the lease length used unless a test needs another
BEAT = PoolBeat(PoolRegistration("w", "host", 1, Q, 1, 1.0), in_flight=0, abandoned_renewals=0)


class TestMemoryConformance(BackendConformance):
    @pytest.fixture
    async def backend(self) -> AsyncIterator[MemoryBackend]:
        async with open_memory() as backend:
            yield backend

    @pytest.fixture
    def clock(self) -> trio.testing.MockClock:
        return trio.testing.MockClock(autojump_threshold=0)


@pytest.fixture
async def backend() -> AsyncIterator[MemoryBackend]:
    async with open_memory() as backend:
        yield backend


async def claim(backend: MemoryBackend, limit: int = 10, worker: str = "w") -> list[Claimed]:
    return await backend.claim(Q, limit=limit, worker_id=worker, visibility_timeout=V)


async def claim_one(backend: MemoryBackend, worker: str = "w") -> Claimed:
    [claimed] = await claim(backend, limit=1, worker=worker)
    return claimed


def item(claimed: Claimed, progress: float | None = None) -> RenewItem:
    return RenewItem(claimed.job.id, claimed.job.claim_seq, progress)


def ack(claimed: Claimed) -> list[Ack]:
    return [Ack(claimed.job.id, claimed.job.claim_seq)]


class Call:
    """A backend call running in its own task, so a test can watch it stall."""

    def __init__(self) -> None:
        self.result: Any = None  # stays None when the call was cancelled
        self.finished_at: float | None = None

    @property
    def done(self) -> bool:
        return self.finished_at is not None

    async def run(self, fn: Callable[[], Awaitable[Any]], cancel_after: float = math.inf) -> None:
        with trio.move_on_after(cancel_after):
            self.result = await fn()
        self.finished_at = trio.current_time()


def start(
    nursery: trio.Nursery, fn: Callable[[], Awaitable[Any]], cancel_after: float = math.inf
) -> Call:
    """Run ``fn`` in a task of ``nursery``, cancelled ``cancel_after`` seconds from now."""
    call = Call()
    nursery.start_soon(call.run, fn, cancel_after)
    return call


# -- opening ------------------------------------------------------------------------------


@pytest.mark.parametrize(("connections", "exc_type"), [(0, ValueError), (True, TypeError)])
async def test_open_memory_rejects_bad_pool_size(
    connections: Any, exc_type: type[Exception]
) -> None:
    with pytest.raises(exc_type, match="connections"):
        async with open_memory(connections=connections):
            pass


async def test_times_are_trio_times(backend: MemoryBackend, autojump_clock: trio.abc.Clock) -> None:
    job_id = await backend.enqueue(Q, "x")
    created = (await backend.get_job(job_id)).created_at
    await trio.sleep(90)
    [claimed] = await backend.claim(Q, limit=1, worker_id="w", visibility_timeout=V)
    assert backend.wall_time() == trio.current_time()
    assert claimed.lease_until == trio.current_time() + V
    await backend.ack(ack(claimed))
    finished = (await backend.get_job(job_id)).finished_at
    assert finished is not None
    assert (finished - created).total_seconds() == pytest.approx(90)


async def test_oldest_ready_age_in_exact_seconds(
    backend: MemoryBackend, autojump_clock: trio.abc.Clock
) -> None:
    """On the mock clock the conformance suite's bounds become exact values."""
    start = trio.current_time()
    await backend.enqueue(Q, "ready at 0")
    await backend.enqueue("delayed", "ready at 5", delay=5)
    await backend.enqueue("leased", "lease ends at 3")
    await backend.claim("leased", limit=1, worker_id="w", visibility_timeout=3)
    await trio.sleep_until(start + 2)
    stats = await backend.queue_stats()
    assert stats[Q].oldest_ready_age == pytest.approx(2)
    assert stats["delayed"].oldest_ready_age is None
    assert stats["leased"].oldest_ready_age is None  # running
    await trio.sleep_until(start + 7)
    stats = await backend.queue_stats()
    assert stats[Q].oldest_ready_age == pytest.approx(7)
    assert stats["delayed"].oldest_ready_age == pytest.approx(2)
    assert stats["leased"].oldest_ready_age == pytest.approx(4)  # ready since its lease ran out
    assert stats["leased"].counts == {"ready": 1}


# -- faults -------------------------------------------------------------------------------


async def test_error_fails_the_call_before_it_takes_effect(backend: MemoryBackend) -> None:
    job_id = await backend.enqueue(Q, "x")
    claimed = await claim_one(backend)
    backend.inject("ack", error())
    with pytest.raises(BackendError, match="injected error in ack"):
        await backend.ack(ack(claimed))
    assert (await backend.get_job(job_id)).status == "running"
    assert backend.statistics().calls["ack"] == 1  # the statement was issued


async def test_error_raises_the_given_exception(backend: MemoryBackend) -> None:
    backend.inject("enqueue", error(RuntimeError("disk full")))
    with pytest.raises(RuntimeError, match="disk full"):
        await backend.enqueue(Q, "x")
    assert await backend.list_jobs() == []


async def test_error_after_takes_effect_and_still_raises(backend: MemoryBackend) -> None:
    job_id = await backend.enqueue(Q, "x")
    claimed = await claim_one(backend)
    backend.inject("ack", error(after=True))
    with pytest.raises(BackendError):
        await backend.ack(ack(claimed))
    assert (await backend.get_job(job_id)).status == "succeeded"


async def test_fault_with_times_clears_itself(backend: MemoryBackend) -> None:
    await backend.enqueue(Q, "x")
    backend.inject("claim", error(times=2))
    for _ in range(2):
        with pytest.raises(BackendError):
            await claim(backend)
    assert len(await claim(backend)) == 1


async def test_hang_holds_the_call_until_cleared_then_it_takes_effect(
    backend: MemoryBackend, autojump_clock: trio.abc.Clock
) -> None:
    job_id = await backend.enqueue(Q, "x")
    claimed = await claim_one(backend)
    backend.inject("ack", hang())
    async with trio.open_nursery() as nursery:
        call = start(nursery, lambda: backend.ack(ack(claimed)))
        await trio.sleep(5)
        assert not call.done
        assert (await backend.get_job(job_id)).status == "running"  # not yet in effect
        assert backend.statistics().connections_in_use == 1
        backend.inject("ack", None)
    assert call.result == [True]
    assert call.finished_at == 5
    assert (await backend.get_job(job_id)).status == "succeeded"


async def test_hang_after_takes_effect_and_holds_the_answer(
    backend: MemoryBackend, autojump_clock: trio.abc.Clock
) -> None:
    job_id = await backend.enqueue(Q, "x")
    claimed = await claim_one(backend)
    backend.inject("ack", hang(after=True))
    async with trio.open_nursery() as nursery:
        call = start(nursery, lambda: backend.ack(ack(claimed)))
        await trio.sleep(5)
        assert not call.done
        assert (await backend.get_job(job_id)).status == "succeeded"  # in effect already
        backend.inject("ack", None)
    assert (call.result, call.finished_at) == ([True], 5)


async def test_interruptible_hang_is_cancelled_without_effect(
    backend: MemoryBackend, autojump_clock: trio.abc.Clock
) -> None:
    job_id = await backend.enqueue(Q, "x")
    claimed = await claim_one(backend)
    backend.inject("ack", hang())
    async with trio.open_nursery() as nursery:
        call = start(nursery, lambda: backend.ack(ack(claimed)), cancel_after=2)
    assert call.finished_at == 2
    assert call.result is None
    assert (await backend.get_job(job_id)).status == "running"
    assert backend.statistics().connections_in_use == 0


async def test_hang_for_seconds_ends_by_itself(
    backend: MemoryBackend, autojump_clock: trio.abc.Clock
) -> None:
    backend.inject("enqueue", hang(3))
    job_id = await backend.enqueue(Q, "x")
    assert trio.current_time() == 3
    assert (await backend.get_job(job_id)).status == "ready"


async def test_uninterruptible_hang_ignores_cancellation_until_cleared(
    backend: MemoryBackend, autojump_clock: trio.abc.Clock
) -> None:
    """Like a wedged driver call: the caller's deadline passes, the call does not return."""
    await backend.enqueue(Q, "x")
    claimed = await claim_one(backend)
    backend.inject("renew", hang(interruptible=False))
    async with trio.open_nursery() as nursery:
        call = start(nursery, lambda: backend.renew([item(claimed)], visibility_timeout=V), 1)
        await trio.sleep(30)
        assert not call.done
        assert backend.statistics().connections_in_use == 1
        backend.inject("renew", None)
    assert call.finished_at == 30
    # The wedged statement went through when it came unstuck: a late answer.
    assert call.result == {claimed.job.id: Verdict.EXTENDED}


async def test_uninterruptible_hang_ends_after_its_seconds(
    backend: MemoryBackend, autojump_clock: trio.abc.Clock
) -> None:
    backend.inject("cancel", hang(4, interruptible=False))
    async with trio.open_nursery() as nursery:
        call = start(nursery, lambda: backend.cancel(1), cancel_after=1)
    assert call.finished_at == 4
    assert call.result is False  # the late answer still came back (job 1 is unknown)


async def test_delay_slows_the_call_and_is_interruptible(
    backend: MemoryBackend, autojump_clock: trio.abc.Clock
) -> None:
    backend.inject("enqueue", delay(2))
    await backend.enqueue(Q, "x")
    assert trio.current_time() == 2
    async with trio.open_nursery() as nursery:
        call = start(nursery, lambda: backend.enqueue(Q, "y"), cancel_after=1)
    assert call.finished_at == 3
    assert call.result is None
    assert [info.payload for info in await backend.list_jobs()] == ["x"]


async def test_delay_after_takes_effect_before_answering(
    backend: MemoryBackend, autojump_clock: trio.abc.Clock
) -> None:
    backend.inject("enqueue", delay(2, after=True, times=1))
    async with trio.open_nursery() as nursery:
        call = start(nursery, lambda: backend.enqueue(Q, "x"))
        await trio.sleep(1)
        assert not call.done
        assert len(await backend.list_jobs()) == 1
    assert call.finished_at == 2


async def test_clearing_releases_calls_of_a_fault_that_cleared_itself(
    backend: MemoryBackend, autojump_clock: trio.abc.Clock
) -> None:
    backend.inject("claim", hang(times=1))
    async with trio.open_nursery() as nursery:
        wedged = start(nursery, lambda: claim(backend))
        await trio.sleep(1)
        assert await claim(backend) == []  # the fault is spent: this one goes through
        assert not wedged.done
        backend.inject("claim", None)
    assert wedged.result == []


async def test_replacing_a_fault_keeps_its_held_calls(
    backend: MemoryBackend, autojump_clock: trio.abc.Clock
) -> None:
    backend.inject("claim", hang())
    async with trio.open_nursery() as nursery:
        wedged = start(nursery, lambda: claim(backend))
        await trio.sleep(1)
        backend.inject("claim", error())
        with pytest.raises(BackendError):
            await claim(backend)
        await trio.sleep(1)
        assert not wedged.done
        backend.inject("claim", None)
    assert wedged.result == []


async def test_closing_the_backend_releases_held_calls(autojump_clock: trio.abc.Clock) -> None:
    async with trio.open_nursery() as nursery, open_memory() as backend:
        backend.inject("claim", hang(interruptible=False))
        call = start(nursery, lambda: claim(backend))
        await trio.sleep(1)
        assert not call.done
    assert call.finished_at == 1
    with pytest.raises(BackendError, match="closed"):
        await backend.enqueue(Q, "too late")


async def test_inject_rejects_unknown_ops_and_misplaced_faults(backend: MemoryBackend) -> None:
    with pytest.raises(ValueError, match="op must be one of"):
        backend.inject("get_job", error())
    with pytest.raises(ValueError, match="renew"):
        backend.inject("ack", omit([1]))
    with pytest.raises(TypeError, match=r"trioqueue\.testing"):
        backend.inject("ack", "boom")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("build", "exc_type"),
    [
        pytest.param(lambda: hang(-1), ValueError, id="negative-hang"),
        pytest.param(lambda: delay(math.nan), ValueError, id="nan-delay"),
        pytest.param(lambda: error(times=0), ValueError, id="zero-times"),
        pytest.param(lambda: error("boom"), TypeError, id="error-not-exception"),  # type: ignore[arg-type]
        pytest.param(lambda: omit(["1"]), TypeError, id="omit-not-int"),  # type: ignore[list-item]
        pytest.param(lambda: delay(-(10**400)), ValueError, id="delay-below-float"),
    ],
)
def test_fault_constructors_validate(
    build: Callable[[], object], exc_type: type[Exception]
) -> None:
    with pytest.raises(exc_type):
        build()


def test_a_fault_of_an_int_beyond_the_float_range_lasts_forever() -> None:
    """Not an OverflowError: 10**400 seconds is as long as math.inf (issue 7 item 7)."""
    assert hang(10**400).seconds == math.inf
    assert delay(10**400).seconds == math.inf


async def test_omit_leaves_jobs_out_of_a_renewal(
    backend: MemoryBackend, autojump_clock: trio.abc.Clock
) -> None:
    await backend.enqueue_many(Q, ["a", "b"])
    a, b = await claim(backend)
    await trio.sleep(5)
    backend.inject("renew", omit([a.job.id], times=1))
    verdicts = await backend.renew([item(a), item(b)], visibility_timeout=V)
    assert verdicts == {b.job.id: Verdict.EXTENDED}
    await trio.sleep(6)  # a's lease (not renewed) has expired, b's has not
    assert [c.job.id for c in await claim(backend)] == [a.job.id]
    verdicts = await backend.renew([item(b)], visibility_timeout=V)
    assert verdicts == {b.job.id: Verdict.EXTENDED}  # the fault was for one renewal only


async def test_locked_rows_are_unchanged_by_renewal_and_skipped_by_claims(
    backend: MemoryBackend, autojump_clock: trio.abc.Clock
) -> None:
    job_id = await backend.enqueue(Q, "x")
    claimed = await claim_one(backend)
    backend.lock_rows([job_id])
    await trio.sleep(V - 1)
    assert await backend.renew([item(claimed)], visibility_timeout=V) == {job_id: Verdict.UNCHANGED}
    await trio.sleep(2)  # the lease was not extended: it has expired now
    assert (await backend.get_job(job_id)).status == "ready"
    assert await claim(backend) == []  # SKIP LOCKED
    backend.unlock_rows([job_id])
    assert [c.job.attempt for c in await claim(backend)] == [2]


# -- connections --------------------------------------------------------------------------


async def test_hung_calls_hold_connections_and_the_rest_wait(
    autojump_clock: trio.abc.Clock,
) -> None:
    async with open_memory(connections=3) as backend:
        await backend.enqueue_many(Q, list(range(5)))
        jobs = await claim(backend)
        backend.inject("renew", hang(interruptible=False))
        async with trio.open_nursery() as nursery:
            calls = [
                start(nursery, partial(backend.renew, [item(c)], visibility_timeout=V))
                for c in jobs
            ]
            await trio.sleep(1)
            stats = backend.statistics()
            assert (stats.connections_in_use, stats.peak_connections_in_use) == (3, 3)
            assert stats["connections_waiting"] == 2
            assert stats.calls["renew"] == 3  # the waiting ones issued nothing yet
            backend.inject("renew", None)
        stats = backend.statistics()
        assert (stats.connections_in_use, stats.peak_connections_in_use) == (0, 3)
        assert stats.calls["renew"] == 5
        assert all(
            call.result == {c.job.id: Verdict.EXTENDED} for call, c in zip(calls, jobs, strict=True)
        )


OPERATION_CALLS: dict[str, Callable[[MemoryBackend, Claimed], Awaitable[Any]]] = {
    "claim": lambda backend, _: claim(backend),
    "renew": lambda backend, c: backend.renew([item(c)], visibility_timeout=V),
    "ack": lambda backend, c: backend.ack(ack(c)),
    "fail": lambda backend, c: backend.fail([Failure(c.job.id, c.job.claim_seq, "x", None)]),
    "release": lambda backend, c: backend.release([Release(c.job.id, c.job.claim_seq)]),
    "snooze": lambda backend, c: backend.snooze(
        [SnoozeWrite(c.job.id, c.job.claim_seq, 0.0)], max_snoozes=1
    ),
    "await_children": lambda backend, c: backend.await_children(
        [ChildWaitWrite(c.job.id, c.job.claim_seq)]
    ),
    "enqueue": lambda backend, _: backend.enqueue(Q, "more"),
    "cancel": lambda backend, c: backend.cancel(c.job.id),
    "beat": lambda backend, _: backend.renew([], visibility_timeout=V, beat=BEAT),
    "register_pool": lambda backend, _: backend.register_pool(BEAT.pool),
    "unregister_pool": lambda backend, _: backend.unregister_pool(BEAT.worker_id),
    "enqueue_due": lambda backend, _: backend.enqueue_due(),
    "clock": lambda backend, _: backend.database_clock(),
}


@pytest.mark.parametrize("op", OPERATIONS)
async def test_every_operation_holds_its_connection_through_its_fault(
    backend: MemoryBackend, autojump_clock: trio.abc.Clock, op: str
) -> None:
    await backend.enqueue(Q, "x")
    claimed = await claim_one(backend)
    before = backend.statistics().calls[op]
    backend.inject(op, delay(2, after=True))
    async with trio.open_nursery() as nursery:
        call = start(nursery, lambda: OPERATION_CALLS[op](backend, claimed))
        await trio.sleep(1)  # the operation took effect; its answer is still on the way
        assert backend.statistics().connections_in_use == 1
        assert backend.statistics().calls[op] == before + 1
    assert call.finished_at == 2
    assert backend.statistics().connections_in_use == 0


async def test_reads_are_counted_under_their_own_names(backend: MemoryBackend) -> None:
    job_id = await backend.enqueue(Q, "x")
    await backend.get_job(job_id)
    await backend.list_jobs()
    calls = backend.statistics().calls
    assert (calls["enqueue"], calls["get_job"], calls["list_jobs"]) == (1, 1, 1)


# -- semantics beyond the conformance suite -----------------------------------------------


async def test_invalid_progress_is_never_stored(backend: MemoryBackend) -> None:
    job_id = await backend.enqueue(Q, "x")
    claimed = await claim_one(backend)
    for bad in (1.5, -0.1, math.nan, True):
        await backend.renew([item(claimed, bad)], visibility_timeout=V)
    assert (await backend.get_job(job_id)).progress is None


async def test_release_after_a_cancel_request_fails_the_job(backend: MemoryBackend) -> None:
    job_id = await backend.enqueue(Q, "x")
    claimed = await claim_one(backend)
    await backend.cancel(job_id)
    assert await backend.release([Release(job_id, claimed.job.claim_seq)]) == [True]
    info = await backend.get_job(job_id)
    assert info.status == "failed"
    assert info.last_error == "cancelled: cancel requested"


async def test_dead_letter_message_names_the_attempts(
    backend: MemoryBackend, autojump_clock: trio.abc.Clock
) -> None:
    job_id = await backend.enqueue(Q, "x", max_attempts=2)
    for _ in range(2):
        await claim_one(backend)
        await trio.sleep(V)
    assert await claim(backend) == []
    last_error = (await backend.get_job(job_id)).last_error
    assert last_error == (
        "lease expired on the final attempt (2 of 2): "
        "the worker running it stopped without recording an outcome"
    )


async def test_a_renewed_final_attempt_outlives_its_first_lease(
    backend: MemoryBackend, autojump_clock: trio.abc.Clock
) -> None:
    job_id = await backend.enqueue(Q, "x", max_attempts=1)
    claimed = await claim_one(backend)
    await trio.sleep(V / 2)
    await backend.renew([item(claimed)], visibility_timeout=V)
    await trio.sleep(V / 2 + 1)  # past the first lease, within the renewed one
    assert await claim(backend) == []
    assert (await backend.get_job(job_id)).status == "running"
    assert await backend.renew([item(claimed)], visibility_timeout=V) == {job_id: Verdict.EXTENDED}


async def test_old_owner_can_renew_an_expired_lease_until_reclaimed(
    backend: MemoryBackend, autojump_clock: trio.abc.Clock
) -> None:
    """Only claim_seq fences a renewal: an expired, unclaimed row is re-leased by it."""
    x = await backend.enqueue(Q, "x")
    old = await claim_one(backend)
    await trio.sleep(V + 1)
    y = await backend.enqueue(Q, "y", priority=5)
    # This claim sees x ready too (it takes only y): x's renewal below must hide it again.
    [taken] = await claim(backend, limit=1, worker="other")
    assert taken.job.id == y
    await backend.ack(ack(taken))
    assert await backend.renew([item(old)], visibility_timeout=V) == {x: Verdict.EXTENDED}
    assert await claim(backend) == []
    await trio.sleep(V + 1)
    assert [(c.job.id, c.job.attempt) for c in await claim(backend)] == [(x, 2)]


# -- notices ------------------------------------------------------------------------------


def pending(notices: trio.MemoryReceiveChannel[Notice]) -> list[Notice]:
    """The notices already delivered to a channel (the memory backend delivers at once)."""
    received = []
    while True:
        try:
            received.append(notices.receive_nowait())
        except trio.WouldBlock:
            return received


async def test_cancel_notice_goes_only_to_the_owning_worker(backend: MemoryBackend) -> None:
    job_id = await backend.enqueue(Q, "x")
    async with backend.listen(Q, "w1") as mine, backend.listen(Q, "w2") as theirs:
        await claim_one(backend, worker="w1")
        await backend.cancel(job_id)
        assert pending(mine) == [Notice(NoticeKind.CANCEL, Q, job_id)]
        assert pending(theirs) == []


async def test_available_notices_go_to_the_queue_listeners(backend: MemoryBackend) -> None:
    async with backend.listen(Q, "w1") as mine, backend.listen("other", "w1") as theirs:
        await backend.enqueue_many(Q, ["a", "b"])  # one statement, one notice
        first, second = await claim(backend)
        await backend.fail([Failure(first.job.id, first.job.claim_seq, "boom", 1.0)])
        await backend.release([Release(second.job.id, second.job.claim_seq)])
        available = Notice(NoticeKind.AVAILABLE, Q)
        assert pending(mine) == [available] * 3
        assert pending(theirs) == []


async def test_a_listener_that_falls_behind_loses_notices_not_time(
    backend: MemoryBackend,
) -> None:
    async with backend.listen(Q, "w") as notices:
        for n in range(1001):
            await backend.enqueue(Q, n)  # never blocks on the full channel
        assert len(pending(notices)) == 1000
        assert backend.statistics()["notices_dropped"] == 1


async def test_listening_ends_with_the_block(backend: MemoryBackend) -> None:
    async with backend.listen(Q, "w") as notices:
        pass
    await backend.enqueue(Q, "x")  # nobody listens: nothing to deliver, nothing fails
    with pytest.raises(trio.ClosedResourceError):
        notices.receive_nowait()


# -- claim order, against a brute-force oracle -------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_claims_agree_with_a_brute_force_reading_of_the_rows(data: st.DataObject) -> None:
    """The incremental claim index agrees with a brute-force reading of every row.

    ``list_jobs`` derives each status from the row alone, so every claim must return the
    ready jobs by priority DESC then id, minus those it must fail instead (an expired final
    attempt, an expired attempt asked to cancel), whatever came before: delays, retries,
    releases, cancels, expired leases and renewals by an expired lease's old owner.
    """
    model = RowsModel(data)
    trio.run(model.run, clock=trio.testing.MockClock(autojump_threshold=0))


class RowsModel:
    """Random operations on a memory backend, each claim checked against ``list_jobs``."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.held: list[Claimed] = []  # every attempt ever claimed, stale ones included
        self.flagged: set[int] = set()  # cancel requested while running

    def draw(self, strategy: st.SearchStrategy[Any]) -> Any:
        return self.data.draw(strategy)

    async def run(self) -> None:
        async with open_memory() as backend:
            for _ in range(self.draw(st.integers(1, 40))):
                action = self.draw(st.sampled_from(ACTIONS))
                await getattr(self, action)(backend)

    async def enqueue(self, backend: MemoryBackend) -> None:
        await backend.enqueue(
            Q,
            None,
            priority=self.draw(st.integers(-2, 2)),
            delay=self.draw(st.sampled_from([None, 0.5, 3.0])),
            max_attempts=self.draw(st.integers(1, 3)),
        )

    async def claim(self, backend: MemoryBackend) -> None:
        limit = self.draw(st.integers(1, 3))
        ready = await backend.list_jobs(queue=Q, status="ready")
        doomed = [i for i in ready if i.attempts >= i.max_attempts or i.id in self.flagged]
        runnable = sorted((i for i in ready if i not in doomed), key=lambda i: (-i.priority, i.id))
        running = await backend.list_jobs(queue=Q, status="running")
        v = self.draw(st.sampled_from([1.0, 4.0]))
        claimed = await backend.claim(Q, limit=limit, worker_id="w", visibility_timeout=v)
        assert [c.job.id for c in claimed] == [i.id for i in runnable[:limit]]
        for info in doomed:
            assert (await backend.get_job(info.id)).status == "failed"
        for info in running:  # a live lease is never touched by a claim
            assert await backend.get_job(info.id) == info
        self.held.extend(claimed)

    async def settle(self, backend: MemoryBackend) -> None:
        if not self.held:
            return
        target = self.draw(st.sampled_from(self.held))  # perhaps a stale attempt
        job_id, seq = target.job.id, target.job.claim_seq
        kind = self.draw(st.sampled_from(["ack", "retry", "release"]))
        if kind == "ack":
            await backend.ack([Ack(job_id, seq)])
        elif kind == "retry":
            retry_delay = self.draw(st.sampled_from([0.0, 1.0]))
            await backend.fail([Failure(job_id, seq, "boom", retry_delay)])
        else:
            await backend.release([Release(job_id, seq)])

    async def renew(self, backend: MemoryBackend) -> None:
        if self.held:
            target = self.draw(st.sampled_from(self.held))
            v = self.draw(st.sampled_from([1.0, 4.0]))
            await backend.renew([item(target)], visibility_timeout=v)

    async def cancel(self, backend: MemoryBackend) -> None:
        jobs = await backend.list_jobs(queue=Q)
        if jobs:
            job_id = self.draw(st.sampled_from([info.id for info in jobs]))
            await backend.cancel(job_id)
            if (await backend.get_job(job_id)).status == "running":
                self.flagged.add(job_id)

    async def sleep(self, backend: MemoryBackend) -> None:
        await trio.sleep(self.draw(st.sampled_from([0.5, 1.0, 2.5])))


ACTIONS = ["enqueue", "enqueue", "claim", "claim", "settle", "renew", "cancel", "sleep"]


async def test_registering_deletes_pools_stale_for_over_an_hour(
    backend: MemoryBackend, autojump_clock: trio.abc.Clock
) -> None:
    old = PoolRegistration("old", "h", 1, Q, 1, heartbeat_interval=10.0)
    await backend.register_pool(old)
    await trio.sleep(3600 + 30)  # stale since 30 s, an hour ago: kept
    await backend.register_pool(PoolRegistration("new", "h", 2, Q, 1, 10.0))
    assert [(w.worker_id, w.stale) for w in await backend.list_workers()] == [
        ("old", True),
        ("new", False),
    ]
    await trio.sleep(1)  # now stale for more than an hour
    await backend.register_pool(PoolRegistration("newer", "h", 3, Q, 1, 10.0))
    assert [w.worker_id for w in await backend.list_workers()] == ["new", "newer"]
