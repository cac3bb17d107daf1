"""Batch handlers on PostgreSQL (docs/protocol.rst §20, invariant I22): one call per claimed
batch, one fenced outcome per job on real rows, a cancel of one job by NOTIFY while the call
runs. On trio's real clock."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import trio

import trioqueue
from trioqueue import BatchContext, Job, JobFailed, JobRetry, JobSucceeded
from trioqueue._backends.postgres import PostgresBackend

from .._postgres_harness import wait_until_finished

pytestmark = pytest.mark.postgres

Q = "batch"


def config(batch_handler: Any, **overrides: Any) -> trioqueue.WorkerConfig:
    base: dict[str, Any] = {
        "batch_handler": batch_handler,
        "queue": Q,
        "batch_size": 10,
        "visibility_timeout": 30,
        "heartbeat_interval": 10,
        "poll_interval": 5,  # long: only NOTIFY can make these tests fast
        "shutdown_grace": 1,
        "backoff": lambda attempt: 0.0,
    }
    return trioqueue.WorkerConfig(**{**base, **overrides})


async def test_each_job_gets_its_outcome_from_one_call(backend: PostgresBackend) -> None:
    calls: list[int] = []

    async def handler(jobs: Sequence[Job], ctx: BatchContext) -> Any:
        calls.append(len(jobs))
        answer: dict[int, Any] = {}
        for job in jobs:
            ctx.report_progress(job.id, 0.5)
            kind = job.payload["kind"]
            if kind == "ok" or job.attempt > 1:
                answer[job.id] = JobSucceeded({"n": job.payload["n"]})
            elif kind == "fail":
                answer[job.id] = JobFailed(KeyError("k"))
            elif kind == "retry":
                answer[job.id] = JobRetry(0, "again")
        return answer  # "missing" left out: a charged failure, retried

    kinds = ["ok", "fail", "retry", "missing"] * 5
    payloads = [{"kind": kind, "n": n} for n, kind in enumerate(kinds)]
    ids = await backend.enqueue_many(Q, payloads, max_attempts=2)
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, config(handler, concurrency=2))
        infos = await wait_until_finished(backend, ids)
        attempts = await backend.list_attempts(ids[1])
        missing = await backend.list_attempts(ids[3])
        nursery.cancel_scope.cancel()
    assert [(i.status, i.result, i.progress) for i in infos] == [
        ("succeeded", {"n": n}, 0.5) for n in range(len(kinds))
    ]
    assert [i.attempts for i in infos] == [1 if k == "ok" else 2 for k in kinds]
    assert sum(calls[:2]) == len(kinds) and max(calls) == 10  # whole batches per call
    assert (attempts[0].outcome, attempts[0].error_type, attempts[0].error) == (
        "retry",
        "KeyError",
        "KeyError: 'k'",
    )
    assert missing[0].error == f"the batch handler returned no outcome for job {ids[3]}"


async def test_a_cancel_of_one_job_reaches_the_call_and_decides_its_outcome(
    backend: PostgresBackend,
) -> None:
    """NOTIFY brings the cancel at once; the call goes on and answers success for every job;
    the cancelled job ends failed as a cancellation, its siblings succeed."""
    started = trio.Event()
    seen = trio.Event()

    async def handler(jobs: Sequence[Job], ctx: BatchContext) -> Any:
        started.set()
        with trio.fail_after(20):  # the cancel arrives by NOTIFY, far sooner
            while not ctx.stop_requested(jobs[0].id):  # the handler polls its context
                await trio.sleep(0.02)
        seen.set()
        assert not ctx.cancel_requested
        assert not any(ctx.stop_requested(job.id) for job in jobs[1:])
        return [JobSucceeded("done") for _ in jobs]

    ids = await backend.enqueue_many(Q, [{}, {}, {}])
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_worker_pool, backend, config(handler))
        await started.wait()
        assert await backend.cancel(ids[0])
        await seen.wait()
        infos = await wait_until_finished(backend, ids)
        nursery.cancel_scope.cancel()
    assert (infos[0].status, infos[0].cancelled, infos[0].result) == ("failed", True, None)
    assert (infos[0].last_error or "").startswith("cancelled: cancel requested")
    assert [(i.status, i.result) for i in infos[1:]] == [("succeeded", "done")] * 2
