"""What an operator's dashboard reads and does: searching, sorting and counting jobs,
deleting one, a job's lease details, worker pools and their beats, finished-job history."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest

from trioqueue._backends.cursors import job_cursor
from trioqueue._backends.interface import Backend
from trioqueue._core.wire import Verdict
from trioqueue._errors import UnknownJobError
from trioqueue._types import (
    JOB_SORTS,
    Ack,
    Failure,
    JobCount,
    PoolBeat,
    PoolRegistration,
    TruncatedText,
)
from trioqueue.testing._conformance._base import WORKER, ConformanceBase, Q

__all__ = ["DashboardConformance"]

#: Leeway for comparing two times a database took within one statement or two.
CLOSE = timedelta(seconds=0.05)


def _pool(
    worker_id: str = WORKER, *, queue: str = Q, heartbeat_interval: float = 60.0
) -> PoolRegistration:
    return PoolRegistration(
        worker_id=worker_id,
        host="host-1",
        pid=4321,
        queue=queue,
        concurrency=3,
        heartbeat_interval=heartbeat_interval,
    )


class DashboardConformance(ConformanceBase):
    """Search, sort, count and delete jobs; lease details; worker pools; history."""

    # -- get_jobs: many jobs in one read ----------------------------------------------------

    async def test_get_jobs_reads_many_jobs_in_one_call_leaving_out_unknown_ids(
        self, backend: Backend, clock: object
    ) -> None:
        running, ready, deleted = await backend.enqueue_many(Q, [{"n": 1}, {"n": 2}, {"n": 3}])
        claimed = await self._claim_one(backend)
        assert claimed.job.id == running
        assert await backend.delete_job(deleted)
        calls = backend.statistics().calls["get_jobs"]
        got = await backend.get_jobs([ready, running, deleted, 10**9, 2**63, ready])
        assert backend.statistics().calls["get_jobs"] == calls + 1
        assert sorted(got) == [running, ready]
        assert got[running] == await backend.get_job(running)
        assert got[ready] == await backend.get_job(ready)
        assert got[running].status == "running"
        assert got[running].lease_expires_at is not None
        assert await backend.get_jobs([]) == {}

    async def test_get_jobs_refuses_bad_ids(self, backend: Backend, clock: object) -> None:
        job_id = await backend.enqueue(Q, 1)
        for bad in (["1"], [True], "1", [1.0]):
            with pytest.raises(TypeError):
                await backend.get_jobs(bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="at most 10000"):
            await backend.get_jobs(list(range(1, 10_002)))
        assert (await backend.get_job(job_id)).status == "ready"

    # -- previews: lists carry a bounded prefix of long texts ------------------------------

    async def test_list_jobs_preview_cuts_long_texts_and_says_their_length(
        self, backend: Backend, clock: object
    ) -> None:
        failed, done = await backend.enqueue_many(Q, [{"n": 1}, {"n": 2}])
        claimed = await self._claim(backend, limit=2)
        seqs = {c.job.id: c.job.claim_seq for c in claimed}
        await backend.fail([Failure(failed, seqs[failed], "E" * 500, None)])
        await backend.ack([Ack(done, seqs[done], result='"' + "r" * 300 + '"')])
        big, short = await backend.enqueue_many(Q, ["x" * 1000, "short"])

        listed = {j.id: j for j in await backend.list_jobs(preview=100)}
        payload = listed[big].payload
        assert isinstance(payload, TruncatedText)
        assert (str(payload), payload.length) == ('"' + "x" * 99, 1002)  # its JSON text, cut
        assert listed[short].payload == "short"  # short enough: decoded as ever
        error = listed[failed].last_error
        assert isinstance(error, TruncatedText)
        assert (str(error), error.length) == ("E" * 100, 500)
        result = listed[done].result
        assert isinstance(result, TruncatedText)
        assert (str(result), result.length) == ('"' + "r" * 99, 302)
        assert listed[failed].payload == {"n": 1}

        whole = {j.id: j for j in await backend.list_jobs()}
        assert whole[big].payload == "x" * 1000
        assert whole[failed].last_error == "E" * 500
        assert whole[done].result == "r" * 300
        assert (await backend.get_job(big)).payload == "x" * 1000
        assert (await backend.get_job(failed)).last_error == "E" * 500

        nothing = await backend.get_jobs([big, short], preview=0)
        assert (str(nothing[big].payload), nothing[big].payload.length) == ("", 1002)
        assert (str(nothing[short].payload), nothing[short].payload.length) == ("", 7)
        assert (await backend.get_jobs([big]))[big].payload == "x" * 1000

    async def test_preview_refuses_what_is_not_a_length(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, 1)
        with pytest.raises(ValueError, match="preview"):
            await backend.list_jobs(preview=-1)
        with pytest.raises(TypeError, match="preview"):
            await backend.list_jobs(preview="10")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="preview"):
            await backend.get_jobs([job_id], preview=-1)

    # -- list_jobs: search and sort, count_jobs -------------------------------------------

    async def test_search_matches_payload_text_and_last_error_ignoring_case(
        self, backend: Backend, clock: object
    ) -> None:
        alice, bob, text = await backend.enqueue_many(
            Q, [{"name": "Alice"}, {"name": "bob"}, "ALICE wrote this"]
        )
        other = await backend.enqueue("other", {"name": "alice"})
        failing = await backend.enqueue(Q, {"n": 1}, priority=1)  # claimed first
        claimed = await self._claim_one(backend)
        assert claimed.job.id == failing
        await backend.fail([Failure(failing, claimed.job.claim_seq, "Boom: alice left", None)])

        async def found(search: str, **filters: Any) -> list[int]:
            return self._ids(await backend.list_jobs(search=search, **filters))

        assert await found("alice") == [alice, text, other, failing]
        assert await found("alice", queue=Q) == [alice, text, failing]
        assert await found("alice", status="failed") == [failing]
        assert await found("BOB") == [bob]
        assert await found('"name"') == [alice, bob, other]
        assert await found("nobody") == []
        assert await backend.count_jobs(search="alice") == 4
        assert await backend.count_jobs(queue=Q, search="alice") == 3
        assert await backend.count_jobs(queue=Q, status="failed", search="alice") == 1

    async def test_search_treats_like_wildcards_and_backslash_as_plain_text(
        self, backend: Backend, clock: object
    ) -> None:
        percent, underscore, backslash, plain = await backend.enqueue_many(
            Q, ["100% done", "a_b", "C:\\temp", "abc 100 x"]
        )

        async def found(search: str) -> list[int]:
            return self._ids(await backend.list_jobs(search=search))

        assert await found("%") == [percent]
        assert await found("0%") == [percent]
        assert await found("_") == [underscore]
        assert await found("a_b") == [underscore]
        assert await found("\\") == [backslash]
        assert await found("100") == [percent, plain]

    async def test_count_jobs_counts_what_list_jobs_lists(
        self, backend: Backend, clock: object
    ) -> None:
        assert await backend.count_jobs() == 0
        await backend.enqueue_many(Q, list(range(5)))
        await backend.enqueue("other", "x")
        await backend.enqueue(Q, "later", delay=self.long_timeout)
        await self._claim_one(backend)
        assert await backend.count_jobs() == 7
        assert await backend.count_jobs(queue=Q) == 6
        assert await backend.count_jobs(status="ready") == 5
        assert await backend.count_jobs(queue=Q, status="ready") == 4
        assert await backend.count_jobs(status="running") == 1
        assert await backend.count_jobs(status="scheduled") == 1
        assert await backend.count_jobs(queue="nowhere") == 0

    async def test_list_jobs_sorts_by_each_column_both_ways_ties_by_id(
        self, backend: Backend, clock: object
    ) -> None:
        low, high, mid, high2 = [
            await backend.enqueue(Q, n, priority=p) for n, p in enumerate([0, 9, 5, 9])
        ]
        # Claimed in priority order; finished in the order high2, high (then mid unfinished).
        first, second = await self._claim(backend, limit=2)
        assert (first.job.id, second.job.id) == (high, high2)
        await backend.ack([Ack(high2, second.job.claim_seq)])
        await self._wait_out()  # a later finish
        await backend.ack([Ack(high, first.job.claim_seq)])

        async def listed(sort: Any) -> list[int]:
            return self._ids(await backend.list_jobs(sort=sort))

        assert await listed("id") == [low, high, mid, high2]
        assert await listed("-id") == [high2, mid, high, low]
        assert await listed("priority") == [low, mid, high, high2]
        assert await listed("-priority") == [high2, high, mid, low]
        assert await listed("created_at") == [low, high, mid, high2]
        assert await listed("-created_at") == [high2, mid, high, low]
        # Unfinished jobs come last either way, among themselves by id the same way.
        assert await listed("finished_at") == [high2, high, low, mid]
        assert await listed("-finished_at") == [high, high2, mid, low]
        page = await backend.list_jobs(sort="-priority", limit=2, offset=1)
        assert self._ids(page) == [high, mid]

    async def test_cursor_pages_walk_each_sort_as_the_whole_list_orders_it(
        self, backend: Backend, clock: object
    ) -> None:
        # Keyset paging (docs/api.rst, "Paging through jobs"): pages after (before) a
        # cursor give the list's order, finished and unfinished jobs alike.
        for n, priority in enumerate([0, 9, 5, 9, 5]):
            await backend.enqueue(Q, n, priority=priority)
        first, second = await self._claim(backend, limit=2)
        await backend.ack([Ack(second.job.id, second.job.claim_seq)])
        await self._wait_out()
        await backend.ack([Ack(first.job.id, first.job.claim_seq)])
        for sort in JOB_SORTS:
            every = self._ids(await backend.list_jobs(sort=sort))
            walked: list[int] = []
            page = await backend.list_jobs(sort=sort, limit=2)
            while page:
                walked += self._ids(page)
                page = await backend.list_jobs(sort=sort, limit=2, after=job_cursor(page[-1], sort))
            assert walked == every, sort
            last = (await backend.list_jobs(sort=sort))[-1]
            before = await backend.list_jobs(sort=sort, limit=3, before=job_cursor(last, sort))
            assert self._ids(before) == every[-4:-1], sort
        with pytest.raises(ValueError, match="made for sort"):
            await backend.list_jobs(sort="-id", after=job_cursor(last, "id"))

    async def test_small_counts_are_exact_and_say_so(self, backend: Backend, clock: object) -> None:
        await backend.enqueue_many(Q, list(range(3)))
        await backend.cancel((await backend.list_jobs())[0].id)
        assert await backend.estimate_jobs(Q) == JobCount(3)
        assert await backend.estimate_jobs(Q, "ready") == JobCount(2)
        assert await backend.estimate_jobs(Q, "failed", cancelled=True) == JobCount(1)
        stats = await backend.queue_stats()
        assert stats[Q].estimated is False
        assert dict(stats[Q].counts) == {"ready": 2, "failed": 1}

    @pytest.mark.parametrize(
        ("arguments", "exception", "name"),
        [
            pytest.param({"sort": "bogus"}, ValueError, "sort", id="sort"),
            pytest.param({"sort": "payload"}, ValueError, "sort", id="sort-column"),
            pytest.param({"search": 5}, TypeError, "search", id="search-type"),
            pytest.param({"search": "a\x00b"}, ValueError, "search", id="search-nul"),
            pytest.param({"search": "x" * 1001}, ValueError, "search", id="search-long"),
        ],
    )
    async def test_list_jobs_refuses_bad_sort_and_search(
        self,
        backend: Backend,
        clock: object,
        arguments: dict[str, Any],
        exception: type[Exception],
        name: str,
    ) -> None:
        with pytest.raises(exception, match=name):
            await backend.list_jobs(**arguments)
        if "search" in arguments:
            with pytest.raises(exception, match=name):
                await backend.count_jobs(search=arguments["search"])

    async def test_count_jobs_refuses_bad_filters(self, backend: Backend, clock: object) -> None:
        with pytest.raises(ValueError, match="status"):
            await backend.count_jobs(status="bogus")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="queue"):
            await backend.count_jobs(queue="")

    # -- delete_job ---------------------------------------------------------------------

    async def test_delete_job_deletes_jobs_not_held_by_a_live_lease(
        self, backend: Backend, clock: object
    ) -> None:
        done = await backend.enqueue(Q, "done")
        claimed = await self._claim_one(backend)
        await backend.ack([Ack(done, claimed.job.claim_seq)])
        ready = await backend.enqueue(Q, "ready")
        scheduled = await backend.enqueue(Q, "scheduled", delay=self.long_timeout)
        for job_id in (done, ready, scheduled):
            assert await backend.delete_job(job_id) is True
            with pytest.raises(UnknownJobError):
                await backend.get_job(job_id)
        assert await backend.delete_job(done) is False  # already gone
        assert await backend.delete_job(10**9) is False
        assert await backend.count_jobs() == 0

    async def test_delete_job_refuses_a_running_job_until_its_lease_runs_out(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend, visibility_timeout=self.short_timeout)
        assert await backend.delete_job(job_id) is False
        info = await backend.get_job(job_id)
        assert (info.status, info.attempts) == ("running", 1)
        await self._wait_out()  # the lease ran out: the row is claimable, so deletable
        assert await backend.delete_job(job_id) is True
        assert await self._renew(backend, self._item(claimed)) == {job_id: Verdict.GONE}

    async def test_delete_job_frees_the_dedup_key(self, backend: Backend, clock: object) -> None:
        first = await backend.enqueue(Q, "x", dedup_key="k")
        assert await backend.enqueue(Q, "y", dedup_key="k") == first
        assert await backend.delete_job(first) is True
        second = await backend.enqueue(Q, "z", dedup_key="k")
        assert second != first
        [claimed] = await self._claim(backend)
        assert claimed.job.id == second  # the deleted job is never claimed

    async def test_delete_job_refuses_a_non_int_id(self, backend: Backend, clock: object) -> None:
        with pytest.raises(TypeError, match="job_id"):
            await backend.delete_job("1")  # type: ignore[arg-type]

    # -- a job's lease details ----------------------------------------------------------

    async def test_job_info_shows_lease_holder_renewal_and_cancel_acknowledgement(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        queued = await backend.get_job(job_id)
        assert queued.lease_expires_at is None
        assert queued.last_renewed_at is None
        assert queued.worker_id is None
        assert queued.cancel_requested_at is None
        assert queued.cancel_acknowledged_at is None

        claimed = await self._claim_one(backend)
        running = await backend.get_job(job_id)
        assert running.worker_id == WORKER
        assert running.last_renewed_at is not None
        assert running.lease_expires_at is not None
        lease = running.lease_expires_at - running.last_renewed_at
        assert abs(lease - timedelta(seconds=self.long_timeout)) < CLOSE

        await self._wait_out()
        assert await self._renew(backend, self._item(claimed)) == {job_id: Verdict.EXTENDED}
        renewed = await backend.get_job(job_id)
        assert renewed.last_renewed_at is not None
        assert renewed.last_renewed_at - running.last_renewed_at >= timedelta(
            seconds=self.short_timeout
        )
        assert renewed.lease_expires_at is not None
        assert renewed.lease_expires_at > running.lease_expires_at

        assert await backend.cancel(job_id) is True
        requested = await backend.get_job(job_id)
        assert requested.cancel_requested_at is not None
        assert requested.cancel_acknowledged_at is None  # no renewal delivered it yet
        verdict = await self._renew(backend, self._item(claimed))
        assert verdict == {job_id: Verdict.CANCEL_REQUESTED}
        acknowledged = (await backend.get_job(job_id)).cancel_acknowledged_at
        assert acknowledged is not None
        assert acknowledged >= requested.cancel_requested_at
        await self._renew(backend, self._item(claimed))  # delivered again: still the first time
        assert (await backend.get_job(job_id)).cancel_acknowledged_at == acknowledged

        await backend.fail([Failure(job_id, claimed.job.claim_seq, "cancelled", None)])
        failed = await backend.get_job(job_id)
        assert failed.status == "failed"
        assert (failed.lease_expires_at, failed.worker_id) == (None, None)
        assert failed.cancel_acknowledged_at == acknowledged
        assert await backend.retry(job_id) is True  # a retry clears the cancel
        retried = await backend.get_job(job_id)
        assert (retried.cancel_requested_at, retried.cancel_acknowledged_at) == (None, None)

    async def test_an_expired_lease_shows_no_holder(self, backend: Backend, clock: object) -> None:
        job_id = await backend.enqueue(Q, "x")
        await self._claim_one(backend, visibility_timeout=self.short_timeout)
        await self._wait_out()
        info = await backend.get_job(job_id)
        assert info.status == "ready"
        assert (info.lease_expires_at, info.worker_id) == (None, None)
        assert info.last_renewed_at is not None  # when it was last taken

    # -- worker pools -------------------------------------------------------------------

    async def test_registered_pools_are_listed_by_queue_then_start(
        self, backend: Backend, clock: object
    ) -> None:
        assert await backend.list_workers() == []
        await backend.register_pool(_pool("w-b", queue="b"))
        await backend.register_pool(_pool("w-a1", queue="a"))
        await self._wait_out()  # a later start
        await backend.register_pool(_pool("w-a2", queue="a"))
        workers = await backend.list_workers()
        assert [w.worker_id for w in workers] == ["w-a1", "w-a2", "w-b"]
        first = workers[0]
        assert (first.host, first.pid, first.queue, first.concurrency) == ("host-1", 4321, "a", 3)
        assert (first.in_flight, first.abandoned_renewals, first.stale) == (0, 0, False)
        assert first.last_beat_at == first.started_at
        assert workers[1].started_at > first.started_at

    async def test_a_beat_alone_or_riding_a_renewal_updates_the_pool(
        self, backend: Backend, clock: object
    ) -> None:
        pool = _pool()
        await backend.register_pool(pool)
        [registered] = await backend.list_workers()
        await self._wait_out()
        assert await backend.renew([], visibility_timeout=60, beat=PoolBeat(pool, 0, 2)) == {}
        [beaten] = await backend.list_workers()
        assert (beaten.in_flight, beaten.abandoned_renewals) == (0, 2)
        assert beaten.last_beat_at - registered.last_beat_at >= timedelta(
            seconds=self.short_timeout
        )
        assert beaten.started_at == registered.started_at

        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        verdicts = await backend.renew(
            [self._item(claimed)], visibility_timeout=60, beat=PoolBeat(pool, 1, 3)
        )
        assert verdicts == {job_id: Verdict.EXTENDED}
        [riding] = await backend.list_workers()
        assert (riding.in_flight, riding.abandoned_renewals) == (1, 3)
        assert riding.last_beat_at >= beaten.last_beat_at

    async def test_a_beat_from_an_unknown_pool_registers_it(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.renew([], visibility_timeout=60, beat=PoolBeat(_pool("late"), 4, 0))
        [worker] = await backend.list_workers()
        assert (worker.worker_id, worker.in_flight, worker.stale) == ("late", 4, False)

    async def test_a_pool_turns_stale_after_three_intervals_without_a_beat(
        self, backend: Backend, clock: object
    ) -> None:
        pool = _pool(heartbeat_interval=self.short_timeout / 3)
        await backend.register_pool(pool)
        assert [w.stale for w in await backend.list_workers()] == [False]
        await self._wait_out()
        assert [w.stale for w in await backend.list_workers()] == [True]
        await backend.renew([], visibility_timeout=60, beat=PoolBeat(pool, 0, 0))
        assert [w.stale for w in await backend.list_workers()] == [False]

    async def test_unregister_removes_only_that_pool(self, backend: Backend, clock: object) -> None:
        await backend.register_pool(_pool("one"))
        await backend.register_pool(_pool("two"))
        assert await backend.unregister_pool("one") is True
        assert await backend.unregister_pool("one") is False
        assert [w.worker_id for w in await backend.list_workers()] == ["two"]

    async def test_registering_again_restarts_the_pool(
        self, backend: Backend, clock: object
    ) -> None:
        pool = _pool()
        await backend.register_pool(pool)
        await backend.renew([], visibility_timeout=60, beat=PoolBeat(pool, 2, 1))
        [before] = await backend.list_workers()
        await self._wait_out()
        await backend.register_pool(pool)
        [after] = await backend.list_workers()
        assert (after.in_flight, after.abandoned_renewals) == (0, 0)
        assert after.started_at > before.started_at

    @pytest.mark.parametrize(
        ("change", "exception"),
        [
            pytest.param({"worker_id": ""}, ValueError, id="empty-worker-id"),
            pytest.param({"worker_id": 7}, TypeError, id="int-worker-id"),
            pytest.param({"host": "a\x00b"}, ValueError, id="nul-host"),
            pytest.param({"queue": ""}, ValueError, id="empty-queue"),
            pytest.param({"pid": -1}, ValueError, id="negative-pid"),
            pytest.param({"concurrency": 0}, ValueError, id="zero-concurrency"),
            pytest.param({"heartbeat_interval": 0}, ValueError, id="zero-heartbeat"),
        ],
    )
    async def test_bad_registrations_and_beats_are_refused_and_write_nothing(
        self, backend: Backend, clock: object, change: dict[str, Any], exception: type[Exception]
    ) -> None:
        fields = {
            "worker_id": WORKER,
            "host": "h",
            "pid": 1,
            "queue": Q,
            "concurrency": 1,
            "heartbeat_interval": 1.0,
            **change,
        }
        bad = PoolRegistration(**fields)
        with pytest.raises(exception):
            await backend.register_pool(bad)
        with pytest.raises(exception):
            await backend.renew([], visibility_timeout=60, beat=PoolBeat(bad, 0, 0))
        with pytest.raises(ValueError, match="in_flight"):
            await backend.renew([], visibility_timeout=60, beat=PoolBeat(_pool(), -1, 0))
        assert await backend.list_workers() == []

    # -- finished_history ---------------------------------------------------------------

    async def test_finished_history_counts_outcomes_per_bucket(
        self, backend: Backend, clock: object
    ) -> None:
        empty = await backend.finished_history(window=60, buckets=6)
        assert len(empty) == 6
        assert [(b.succeeded, b.failed) for b in empty] == [(0, 0)] * 6
        starts = [b.start for b in empty]
        for a, b in itertools.pairwise(starts):
            assert abs((b - a) - timedelta(seconds=10)) < CLOSE

        ok, bad = await backend.enqueue_many(Q, ["ok", "bad"])
        await backend.enqueue("other", "other")
        first, second = await self._claim(backend, limit=2)
        await backend.ack([Ack(ok, first.job.claim_seq)])
        await backend.fail([Failure(bad, second.job.claim_seq, "boom", None)])
        [other] = await self._claim(backend, queue="other")
        await backend.ack([Ack(other.job.id, other.job.claim_seq)])
        await backend.enqueue(Q, "unfinished")

        history = await backend.finished_history(window=60, buckets=6)
        assert [(b.succeeded, b.failed) for b in history] == [(0, 0)] * 5 + [(2, 1)]
        mine = await backend.finished_history(window=60, buckets=6, queue=Q)
        assert [(b.succeeded, b.failed) for b in mine] == [(0, 0)] * 5 + [(1, 1)]
        assert history[0].start >= empty[0].start

    async def test_finished_history_leaves_out_jobs_finished_before_the_window(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await backend.enqueue(Q, "x")
        claimed = await self._claim_one(backend)
        await backend.ack([Ack(job_id, claimed.job.claim_seq)])
        await self._wait_out()
        recent = await backend.finished_history(window=self.short_timeout, buckets=3)
        assert [(b.succeeded, b.failed) for b in recent] == [(0, 0)] * 3
        wide = await backend.finished_history(window=self.long_timeout, buckets=1)
        assert [(b.succeeded, b.failed) for b in wide] == [(1, 0)]

    @pytest.mark.parametrize(
        ("arguments", "exception", "name"),
        [
            pytest.param({"window": 0}, ValueError, "window", id="zero-window"),
            pytest.param({"window": -1}, ValueError, "window", id="negative-window"),
            pytest.param({"window": float("nan")}, ValueError, "window", id="nan-window"),
            pytest.param({"window": "1"}, TypeError, "window", id="str-window"),
            pytest.param({"buckets": 0}, ValueError, "buckets", id="zero-buckets"),
            pytest.param({"buckets": 1001}, ValueError, "buckets", id="many-buckets"),
            pytest.param({"buckets": 2.0}, TypeError, "buckets", id="float-buckets"),
            pytest.param({"queue": ""}, ValueError, "queue", id="empty-queue"),
        ],
    )
    async def test_finished_history_refuses_bad_arguments(
        self,
        backend: Backend,
        clock: object,
        arguments: dict[str, Any],
        exception: type[Exception],
        name: str,
    ) -> None:
        with pytest.raises(exception, match=name):
            await backend.finished_history(**arguments)
