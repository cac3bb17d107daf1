"""Operator controls: bulk retry and delete in batches, schedules switched off and run by
hand, the audit log and table health (docs/dashboard.rst, "Controls")."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
import trio

from trioqueue import PostgresBackend
from trioqueue._backends.interface import Backend
from trioqueue._types import Failure
from trioqueue.testing._conformance._base import WORKER, ConformanceBase, Q

__all__ = ["ControlsConformance"]

EVERY_MINUTE = "* * * * *"

#: Audit entries no backend may store: ``(overrides, exception type, text the error names)``.
BAD_AUDIT = [
    pytest.param({"action": ""}, ValueError, "action", id="empty-action"),
    pytest.param({"action": 5}, TypeError, "action", id="int-action"),
    pytest.param({"action": "a\x00"}, ValueError, "action", id="nul-action"),
    pytest.param({"target": "t\udcff"}, ValueError, "target", id="surrogate-target"),
    pytest.param({"session": ""}, ValueError, "session", id="empty-session"),
    pytest.param({"detail": [1]}, TypeError, "detail", id="list-detail"),
    pytest.param({"detail": {"x": {1, 2}}}, TypeError, "detail", id="set-in-detail"),
    pytest.param({"detail": {"x": float("nan")}}, TypeError, "detail", id="nan-in-detail"),
    pytest.param({"detail": {"x": "a\x00b"}}, ValueError, "detail", id="nul-in-detail"),
]


class ControlsConformance(ConformanceBase):
    """Operator controls: bulk retry and delete, schedules enabled, disabled and run now,
    the audit log, table health."""

    async def _failed(self, backend: Backend, queue: str = Q, **options: Any) -> int:
        """A job of ``queue`` failed for good (its one attempt failed)."""
        job_id = await backend.enqueue(queue, {"n": queue}, max_attempts=1, **options)
        [claimed] = await self._claim(backend, limit=1, queue=queue)
        assert claimed.job.id == job_id
        await backend.fail([Failure(job_id, claimed.job.claim_seq, "boom: disk full", None)])
        return job_id

    async def _pass_tick(self, backend: Backend, name: str) -> None:
        """Let the next tick of the once-a-minute schedule ``name`` pass (on PostgreSQL by
        moving its next run into the past, as ``schedules.py`` does)."""
        if isinstance(backend, PostgresBackend):
            async with backend.acquire() as connection:
                await connection.execute(
                    f'UPDATE "{backend.schema}".schedules '
                    "SET next_run_at = now() - interval '1 millisecond' WHERE name = $1",
                    name,
                )
        else:
            await trio.sleep(60.0)

    # -- bulk retry ----------------------------------------------------------------------

    async def test_retry_matching_retries_every_matching_failed_job_in_batches(
        self, backend: Backend, clock: object
    ) -> None:
        failed = [await self._failed(backend) for _ in range(5)]
        other = await self._failed(backend, "other")
        ready = await backend.enqueue(Q, "still ready")
        before = backend.statistics().calls["retry_matching"]
        assert await backend.retry_matching(Q, batch_size=2) == 5
        # Five matching jobs two at a time: batches of 2, 2 and 1, one statement each.
        assert backend.statistics().calls["retry_matching"] - before == 3
        infos = await backend.get_jobs([*failed, other, ready])
        assert [infos[i].status for i in failed] == ["ready"] * 5
        assert all(infos[i].max_attempts == 2 for i in failed)  # one more attempt, as retry
        assert infos[other].status == "failed"  # another queue
        assert await backend.retry_matching() == 1  # no filter: every failed job
        assert (await backend.get_job(other)).status == "ready"
        assert await backend.retry_matching() == 0

    async def test_retry_matching_filters_by_search_as_list_jobs_does(
        self, backend: Backend, clock: object
    ) -> None:
        first = await self._failed(backend)
        await backend.enqueue(Q, "x")
        job_id = await backend.enqueue(Q, {"kind": "special"}, max_attempts=1)
        claims = await self._claim(backend, limit=10)
        special = next(c for c in claims if c.job.id == job_id)
        await backend.fail([Failure(job_id, special.job.claim_seq, "other error", None)])
        listed = await backend.list_jobs(status="failed", search="SPECIAL")
        assert [j.id for j in listed] == [job_id]
        assert await backend.retry_matching(status="failed", search="SPECIAL") == 1
        assert (await backend.get_job(job_id)).status == "ready"
        assert (await backend.get_job(first)).status == "failed"
        assert await backend.retry_matching(search="disk FULL") == 1  # last_error matches
        assert (await backend.get_job(first)).status == "ready"

    async def test_retry_matching_retries_one_of_the_failed_jobs_sharing_a_dedup_key(
        self, backend: Backend, clock: object
    ) -> None:
        first = await self._failed(backend, dedup_key="k")
        second = await self._failed(backend, dedup_key="k")
        # As retry does one by one: the first takes the key back, the second is left.
        assert await backend.retry_matching(batch_size=10) == 1
        infos = await backend.get_jobs([first, second])
        assert (infos[first].status, infos[second].status) == ("ready", "failed")
        assert await backend.retry_matching() == 0  # the key is held now

    @pytest.mark.parametrize(
        "arguments",
        [
            pytest.param({"status": "ready"}, id="status-ready"),
            pytest.param({"status": "bogus"}, id="status-bogus"),
            pytest.param({"batch_size": 0}, id="batch-0"),
            pytest.param({"batch_size": 10_001}, id="batch-10001"),
            pytest.param({"search": "x" * 1001}, id="long-search"),
        ],
    )
    async def test_retry_matching_refuses_bad_arguments_and_writes_nothing(
        self, backend: Backend, clock: object, arguments: dict[str, Any]
    ) -> None:
        job_id = await self._failed(backend)
        [name] = arguments
        with pytest.raises(ValueError, match=name):
            await backend.retry_matching(**arguments)
        with pytest.raises(TypeError, match="batch_size"):
            await backend.retry_matching(batch_size=True)
        assert (await backend.get_job(job_id)).status == "failed"

    # -- bulk delete ---------------------------------------------------------------------

    async def test_delete_matching_deletes_in_batches_and_never_a_live_lease(
        self, backend: Backend, clock: object
    ) -> None:
        running = await backend.enqueue(Q, "running")
        await self._claim_one(backend)
        ready = [await backend.enqueue(Q, i) for i in range(4)]
        kept = await backend.enqueue("other", "kept")
        before = backend.statistics().calls["delete_matching"]
        assert await backend.delete_matching(Q, batch_size=2) == 4
        # Five rows of the queue picked two at a time: 2, 2, then 1 (the running one).
        assert backend.statistics().calls["delete_matching"] - before == 3
        assert await backend.get_jobs([*ready]) == {}
        assert (await backend.get_job(running)).status == "running"
        assert (await backend.get_job(kept)).status == "ready"

    async def test_delete_matching_filters_by_status(self, backend: Backend, clock: object) -> None:
        failed = await self._failed(backend)
        ready = await backend.enqueue(Q, "ready")
        assert await backend.delete_matching(status="failed") == 1
        assert list(await backend.get_jobs([failed, ready])) == [ready]
        assert await backend.count_jobs() == 1
        with pytest.raises(ValueError, match="batch_size"):
            await backend.delete_matching(batch_size=0)
        assert await backend.count_jobs() == 1

    # -- schedules -----------------------------------------------------------------------

    async def test_a_disabled_schedule_enqueues_nothing_and_restarts_at_the_next_tick(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.set_schedule("tick", Q, EVERY_MINUTE, "p")
        assert await backend.set_schedule_enabled("tick", False) is True
        [info] = await backend.list_schedules()
        assert info.enabled is False
        await self._pass_tick(backend, "tick")
        [missed] = await backend.list_schedules()
        assert await backend.enqueue_due() == []
        assert await backend.counts() == {}
        assert await backend.set_schedule_enabled("tick", True) is True
        [info] = await backend.list_schedules()
        # The missed tick is dropped: the next run is the first tick after now, so the
        # schedule is not due at once.
        assert info.enabled is True
        assert info.next_run_at > missed.next_run_at
        assert await backend.enqueue_due() == []
        await self._pass_tick(backend, "tick")
        assert len(await backend.enqueue_due()) == 1

    async def test_set_schedule_enabled_of_an_unknown_schedule_is_false(
        self, backend: Backend, clock: object
    ) -> None:
        assert await backend.set_schedule_enabled("nope", True) is False
        with pytest.raises(TypeError, match="enabled"):
            await backend.set_schedule_enabled("nope", 1)  # type: ignore[arg-type]

    async def test_replacing_a_schedule_keeps_it_disabled(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.set_schedule("tick", Q, EVERY_MINUTE)
        await backend.set_schedule_enabled("tick", False)
        info = await backend.set_schedule("tick", Q, "0 * * * *")
        assert info.enabled is False
        # Enabling an enabled schedule leaves its next run as it is.
        await backend.set_schedule_enabled("tick", True)
        [before] = await backend.list_schedules()
        await backend.set_schedule_enabled("tick", True)
        [after] = await backend.list_schedules()
        assert after.next_run_at == before.next_run_at

    async def test_run_schedule_now_enqueues_one_job_and_leaves_the_next_run(
        self, backend: Backend, clock: object
    ) -> None:
        await backend.set_schedule("report", Q, "0 3 * * *", {"r": 1}, priority=2, max_attempts=4)
        await backend.set_schedule_enabled("report", False)  # by hand, disabled or not
        [before] = await backend.list_schedules()
        first = await backend.run_schedule_now("report")
        second = await backend.run_schedule_now("report")
        assert first is not None
        assert second is not None
        assert second > first
        info = await backend.get_job(first)
        assert (info.queue, info.payload, info.priority, info.max_attempts) == (Q, {"r": 1}, 2, 4)
        assert info.status == "ready"
        [after] = await backend.list_schedules()
        assert after.next_run_at == before.next_run_at
        assert after.last_run_at is not None
        assert await backend.run_schedule_now("nope") is None

    # -- the audit log -------------------------------------------------------------------

    async def test_audit_entries_are_listed_newest_first(
        self, backend: Backend, clock: object
    ) -> None:
        assert await backend.list_audit() == []
        first = await backend.record_audit("job.cancel", "7", "s1", {"ok": True})
        second = await backend.record_audit(
            "jobs.retry_matching", "queue=q", "token", {"retried": 3, "filters": {"q": "é"}}
        )
        third = await backend.record_audit("job.cancel", "8", "s1", {})
        assert first < second < third
        entries = await backend.list_audit()
        assert [e.id for e in entries] == [third, second, first]
        middle = entries[1]
        assert (middle.action, middle.target, middle.session) == (
            "jobs.retry_matching",
            "queue=q",
            "token",
        )
        assert middle.detail == {"retried": 3, "filters": {"q": "é"}}
        assert isinstance(middle.at, datetime)
        assert middle.at.tzinfo is not None
        cancels = await backend.list_audit(action="job.cancel")
        assert [e.id for e in cancels] == [third, first]
        assert [e.id for e in await backend.list_audit(limit=1, offset=1)] == [second]

    @pytest.mark.parametrize(("overrides", "kind", "named"), BAD_AUDIT)
    async def test_bad_audit_entries_are_refused_and_nothing_is_written(
        self,
        backend: Backend,
        clock: object,
        overrides: dict[str, Any],
        kind: type[Exception],
        named: str,
    ) -> None:
        arguments: dict[str, Any] = {
            "action": "a",
            "target": "t",
            "session": "s",
            "detail": {},
        } | overrides
        with pytest.raises(kind, match=named):
            await backend.record_audit(**arguments)
        assert await backend.list_audit() == []

    @pytest.mark.parametrize(
        "arguments",
        [
            pytest.param({"limit": 0}, id="limit-0"),
            pytest.param({"limit": 10_001}, id="limit-10001"),
            pytest.param({"offset": -1}, id="offset"),
            pytest.param({"action": ""}, id="empty-action"),
        ],
    )
    async def test_list_audit_refuses_bad_arguments(
        self, backend: Backend, clock: object, arguments: dict[str, Any]
    ) -> None:
        [name] = arguments
        with pytest.raises(ValueError, match=name):
            await backend.list_audit(**arguments)

    # -- table health --------------------------------------------------------------------

    async def test_table_health_names_the_tables_and_the_oldest_work(
        self, backend: Backend, clock: object
    ) -> None:
        health = await backend.table_health()
        names = {t.name for t in health.tables}
        assert {"jobs", "audit_log", "schedules", "queues", "workers"} <= names
        assert all(t.total_bytes >= 0 for t in (*health.tables, *health.indexes))
        assert all(i.live_rows is None for i in health.indexes)
        assert (health.oldest_running_id, health.oldest_ready_id) == (None, None)
        running = await backend.enqueue(Q, "first")
        ready = await backend.enqueue(Q, "second")
        await backend.enqueue(Q, "later", delay=self.long_timeout)  # scheduled: not ready
        await backend.claim(Q, limit=1, worker_id=WORKER, visibility_timeout=self.long_timeout)
        health = await backend.table_health()
        assert health.oldest_running_id == running
        assert health.oldest_ready_id == ready
        assert health.oldest_running_since is not None
        assert health.oldest_ready_since is not None
