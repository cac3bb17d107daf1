"""Dead letters and redrive (docs/protocol.rst §19, I21): the jobs that failed for good,
listed newest first with their filters, paged by id, summarised per queue and error type in
a bounded sample, and redriven (``retry_matching`` with the same filters) in batches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from trioqueue._backends.interface import Backend
from trioqueue._types import Ack, Failure
from trioqueue.testing._conformance._base import ConformanceBase, Q

__all__ = ["DeadLetterConformance"]

VALUE_ERROR = "builtins.ValueError"
KEY_ERROR = "builtins.KeyError"


class DeadLetterConformance(ConformanceBase):
    """Dead letters: the list, its filters and pages, the summary, the redrive."""

    async def _dead(
        self,
        backend: Backend,
        queue: str = Q,
        error: str = "ValueError: disk full",
        error_type: str | None = VALUE_ERROR,
        **options: Any,
    ) -> int:
        """A job of ``queue`` that failed for good: its one attempt failed with ``error``."""
        job_id = await backend.enqueue(queue, {"n": queue}, max_attempts=1, **options)
        [claimed] = await self._claim(backend, limit=1, queue=queue)
        assert claimed.job.id == job_id
        failure = Failure(job_id, claimed.job.claim_seq, error, None, error_type=error_type)
        await backend.fail([failure])
        return job_id

    async def _cancelled(self, backend: Backend) -> int:
        """A job cancelled before it ran: failed for good, ``cancelled``, no attempt."""
        job_id = await backend.enqueue(Q, "cancel me")
        assert await backend.cancel(job_id)
        return job_id

    async def test_dead_letters_are_the_failed_jobs_newest_first_cancellations_marked(
        self, backend: Backend, clock: object
    ) -> None:
        failed = await self._dead(backend)
        succeeded = await backend.enqueue(Q, "fine")
        [claimed] = await self._claim(backend, limit=1)
        await backend.ack([Ack(claimed.job.id, claimed.job.claim_seq)])
        retrying = await backend.enqueue(Q, "again", max_attempts=3)
        [claimed] = await self._claim(backend, limit=1)
        await backend.fail([Failure(retrying, claimed.job.claim_seq, "KeyError: k", 60.0)])
        await backend.enqueue(Q, "ready")
        cancelled = await self._cancelled(backend)
        dead = await backend.list_dead_letters()
        assert [d.id for d in dead] == [cancelled, failed]
        assert succeeded not in [d.id for d in dead]
        first, second = dead
        assert (first.cancelled, first.error_type) == (True, None)  # no attempt ran
        assert first.last_error is not None
        assert first.last_error.startswith("cancelled")
        assert (second.cancelled, second.error_type) == (False, VALUE_ERROR)
        assert (second.attempts, second.max_attempts, second.queue) == (1, 1, Q)
        assert second.last_error == "ValueError: disk full"
        assert second.finished_at >= second.created_at

    async def test_dead_letters_filter_by_queue_error_text_type_time_and_cancellation(
        self, backend: Backend, clock: object
    ) -> None:
        disk = await self._dead(backend)
        key = await self._dead(backend, error="KeyError: 'user'", error_type=KEY_ERROR)
        await self._wait_out()  # the jobs below fail later than those above
        other = await self._dead(backend, "other", error="TimeoutError: upstream", error_type=None)
        cancelled = await self._cancelled(backend)

        async def ids(**filters: Any) -> list[int]:
            return [d.id for d in await backend.list_dead_letters(**filters)]

        assert await ids(queue="other") == [other]
        assert await ids(error="DISK") == [disk]  # any case, last_error only
        assert await ids(error='{"n"') == []  # the payload's text is not searched
        assert await ids(error_type=KEY_ERROR) == [key]
        assert await ids(cancelled=True) == [cancelled]
        assert await ids(cancelled=False, queue=Q) == [key, disk]
        times = {d.id: d.finished_at for d in await backend.list_dead_letters()}
        cut = times[other]
        assert cut > times[key]
        assert await ids(failed_since=cut) == [i for i in (cancelled, other) if times[i] >= cut]
        assert await ids(failed_before=cut) == [key, disk]  # before: strictly
        assert await ids(failed_since=times[disk], failed_before=cut) == [key, disk]

    async def test_dead_letters_page_by_the_last_id_shown(
        self, backend: Backend, clock: object
    ) -> None:
        jobs = [await self._dead(backend) for _ in range(5)]
        first = await backend.list_dead_letters(limit=2)
        assert [d.id for d in first] == jobs[:2:-1]
        second = await backend.list_dead_letters(limit=2, after=first[-1].id)
        assert [d.id for d in second] == [jobs[2], jobs[1]]
        last = await backend.list_dead_letters(limit=2, after=second[-1].id)
        assert [d.id for d in last] == [jobs[0]]
        assert await backend.list_dead_letters(after=jobs[0]) == []

    async def test_summary_counts_per_queue_and_error_type_in_a_bounded_sample(
        self, backend: Backend, clock: object
    ) -> None:
        await self._dead(backend, "a")
        await self._dead(backend, "b", error="KeyError: k", error_type=KEY_ERROR)
        await self._dead(backend, "b")
        await self._cancelled(backend)
        exact = await backend.dead_letter_summary(sample=None)
        assert (exact.total, exact.capped) == (4, False)
        assert exact.by_queue == (("b", 2), ("a", 1), (Q, 1))
        assert exact.by_error_type == ((VALUE_ERROR, 2), (None, 1), (KEY_ERROR, 1))
        assert await backend.dead_letter_summary() == exact  # fewer than the sample
        # The newest two only (the cancellation, then b's ValueError): more matched.
        capped = await backend.dead_letter_summary(sample=2)
        assert (capped.total, capped.capped) == (2, True)
        assert capped.by_queue == (("b", 1), (Q, 1))
        assert capped.by_error_type == ((None, 1), (VALUE_ERROR, 1))
        assert (await backend.dead_letter_summary(sample=4)).capped is False
        only = await backend.dead_letter_summary(queue="b", error_type=VALUE_ERROR)
        assert (only.total, only.by_queue) == (1, (("b", 1),))

    async def test_redrive_retries_exactly_the_matching_dead_letters_in_batches(
        self, backend: Backend, clock: object
    ) -> None:
        disk = [await self._dead(backend) for _ in range(3)]
        key = await self._dead(backend, error="KeyError: k", error_type=KEY_ERROR)
        cancelled = await self._cancelled(backend)
        before = backend.statistics().calls["retry_matching"]
        done = await backend.retry_matching(error_type=VALUE_ERROR, error="disk", batch_size=2)
        assert done == 3
        # Three matching jobs two at a time (batches of 2 and 1), one statement each.
        assert backend.statistics().calls["retry_matching"] - before == 2
        infos = await backend.get_jobs([*disk, key, cancelled])
        for job_id in disk:  # as retry: attempts and last_error kept, one more attempt
            info = infos[job_id]
            assert (info.status, info.attempts, info.max_attempts) == ("ready", 1, 2)
            assert info.last_error == "ValueError: disk full"
        assert infos[key].status == "failed"
        assert infos[cancelled].status == "failed"
        assert [d.id for d in await backend.list_dead_letters()] == [cancelled, key]
        assert await backend.retry_matching(error_type=VALUE_ERROR) == 0  # none left
        assert await backend.retry_matching(cancelled=True) == 1
        assert (await backend.get_job(cancelled)).cancelled is False  # cleared, as retry

    async def test_an_empty_error_type_selects_the_dead_letters_with_none_recorded(
        self, backend: Backend, clock: object
    ) -> None:
        """``error_type=""``: the last attempt recorded no error type, or no attempt ran;
        in the list, the summary and the redrive alike."""
        await self._dead(backend)
        untyped = await self._dead(backend, "other", error="stopped", error_type=None)
        cancelled = await self._cancelled(backend)
        dead = await backend.list_dead_letters(error_type="")
        assert [d.id for d in dead] == [cancelled, untyped]
        assert [d.error_type for d in dead] == [None, None]
        summary = await backend.dead_letter_summary(error_type="", sample=None)
        assert (summary.total, summary.by_error_type) == (2, ((None, 2),))
        assert dict(summary.by_queue) == {"other": 1, Q: 1}
        assert await backend.retry_matching("other", error_type="") == 1
        assert (await backend.get_job(untyped)).status == "ready"
        assert [d.id for d in await backend.list_dead_letters(error_type="")] == [cancelled]

    async def test_redrive_skips_jobs_no_longer_dead(self, backend: Backend, clock: object) -> None:
        redriven = await self._dead(backend)
        deleted = await self._dead(backend)
        kept = await self._dead(backend)
        assert await backend.retry(redriven)  # running again: not dead any more
        [claimed] = await self._claim(backend, limit=1)
        assert claimed.job.id == redriven
        assert await backend.delete_job(deleted)
        cut = (await backend.get_job(kept)).finished_at
        assert cut is not None
        assert await backend.retry_matching(failed_since=cut) == 1
        info = await backend.get_job(redriven)
        assert (info.status, info.attempts) == ("running", 2)  # untouched
        assert (await backend.get_job(kept)).status == "ready"

    @pytest.mark.parametrize(
        ("call", "arguments", "names"),
        [
            pytest.param(
                "list_dead_letters",
                {"error_type": "E" * 301, "failed_since": "yesterday", "limit": 0},
                ("error_type", "failed_since", "limit"),
                id="list",
            ),
            pytest.param(
                "list_dead_letters",
                {"failed_since": datetime(2030, 1, 1)},
                ("timezone-aware",),
                id="naive-time",
            ),
            pytest.param(
                "dead_letter_summary",
                {"cancelled": "yes", "sample": 0, "queue": 5},
                ("cancelled", "sample", "queue"),
                id="summary",
            ),
            pytest.param(
                "retry_matching",
                {"error": "x" * 1001, "batch_size": 0, "failed_before": 3},
                ("error", "batch_size", "failed_before"),
                id="redrive",
            ),
            pytest.param(
                "retry_matching",
                {
                    "failed_since": datetime(2030, 1, 2, tzinfo=UTC),
                    "failed_before": datetime(2030, 1, 1, tzinfo=UTC),
                },
                ("failed_since must not be after failed_before",),
                id="since-after-before",
            ),
        ],
    )
    async def test_bad_arguments_are_refused_together_and_nothing_is_written(
        self,
        backend: Backend,
        clock: object,
        call: str,
        arguments: dict[str, Any],
        names: tuple[str, ...],
    ) -> None:
        job_id = await self._dead(backend)
        with pytest.raises((TypeError, ValueError)) as raised:
            await getattr(backend, call)(**arguments)
        for name in names:
            assert name in str(raised.value)
        assert (await backend.get_job(job_id)).status == "failed"

    async def test_a_time_filter_matches_by_the_moment_whatever_the_zone(
        self, backend: Backend, clock: object
    ) -> None:
        job_id = await self._dead(backend)
        [dead] = await backend.list_dead_letters()
        east = dead.finished_at.astimezone(timezone(timedelta(hours=5)))
        assert [d.id for d in await backend.list_dead_letters(failed_since=east)] == [job_id]
        assert await backend.list_dead_letters(failed_before=east) == []
