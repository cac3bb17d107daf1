"""The dashboard's attempt history over PostgreSQL (docs/dashboard.rst, "Job page", "Queue
page"): the JSON of a job's attempts, a queue's timings and history, the cancelled filter,
and the pages that show them, from the attempts table itself."""

from __future__ import annotations

import re

import pytest

import trioqueue
from tests._web_harness import client
from trioqueue._types import Ack, AttemptTiming, Failure, PoolRegistration
from trioqueue.web import create_app

pytestmark = pytest.mark.postgres

POOL = PoolRegistration("pool-1", "host-<a>", 1234, "mail", 1, 30.0)


async def claim(backend: trioqueue.PostgresBackend) -> trioqueue.Job:
    [claimed] = await backend.claim("mail", limit=1, worker_id="pool-1", visibility_timeout=60)
    return claimed.job


async def failed_then_succeeded(backend: trioqueue.PostgresBackend) -> int:
    await backend.register_pool(POOL)
    job_id = await backend.enqueue("mail", {"to": "a"}, max_attempts=2)
    job = await claim(backend)
    failure = Failure(
        job.id,
        job.claim_seq,
        "KeyError: 'to'",
        0.0,
        timing=AttemptTiming(0.01, 1.0),
        error_type="KeyError",
        traceback="Traceback (most recent call last):\nKeyError: 'to'",
    )
    await backend.fail([failure])
    job = await claim(backend)
    await backend.ack([Ack(job.id, job.claim_seq, timing=AttemptTiming(0.01, 0.5))])
    return job_id


async def test_a_jobs_attempts_and_its_queues_timings(backend: trioqueue.PostgresBackend) -> None:
    job_id = await failed_then_succeeded(backend)
    async with client(create_app(backend)) as c:
        attempts = (await c.get(f"/api/jobs/{job_id}/attempts")).json()["attempts"]
        detail = (await c.get(f"/api/jobs/{job_id}")).json()
        timings = (await c.get("/api/queues/mail/timings")).json()
        history = (await c.get("/api/queues/mail/history?window=600&buckets=5")).json()
        page = await c.get(f"/jobs/{job_id}")
        queue_page = await c.get("/queues/mail")
    assert [(a["attempt"], a["outcome"]) for a in attempts] == [(1, "retry"), (2, "succeeded")]
    first = attempts[0]
    assert (first["worker_id"], first["host"], first["error_type"]) == (
        "pool-1",
        "host-<a>",
        "KeyError",
    )
    assert first["traceback"] == "Traceback (most recent call last):\nKeyError: 'to'"
    assert [a["run_seconds"] for a in attempts] == [pytest.approx(1.0), pytest.approx(0.5)]
    assert all(a["wait_seconds"] >= 0 for a in attempts)
    assert (detail["finished_by"], detail["cancelled"]) == ("pool-1", False)
    assert timings["attempts"] == 2
    assert timings["run_p50"] == pytest.approx(0.75)  # percentile_cont of 0.5 and 1.0
    assert len(history["buckets"]) == 5
    assert sum(b["succeeded"] for b in history["buckets"]) == 1
    assert sum(b["failed"] for b in history["buckets"]) == 1
    assert re.findall(r'data-attempt="(\d)" data-outcome="(\w+)"', page.text) == [
        ("1", "retry"),
        ("2", "succeeded"),
    ]
    assert "on pool-1 (host-&lt;a&gt;)" in page.text
    assert "Error of attempt 1" in page.text
    assert queue_page.text.count('data-testid="chart-bucket"') == 4 * 60


async def test_the_cancelled_filter(backend: trioqueue.PostgresBackend) -> None:
    failed = await backend.enqueue("mail", {"n": 1}, max_attempts=1)
    job = await claim(backend)
    await backend.fail([Failure(job.id, job.claim_seq, "Boom: no", None)])
    cancelled = await backend.enqueue("mail", {"n": 2})
    assert await backend.cancel(cancelled)
    async with client(create_app(backend)) as c:
        only = (await c.get("/api/jobs?cancelled=true")).json()
        without = (await c.get("/api/jobs?status=failed&cancelled=false")).json()
    assert ([j["id"] for j in only["jobs"]], only["total"]) == ([cancelled], 1)
    assert only["jobs"][0]["cancelled"] is True
    assert ([j["id"] for j in without["jobs"]], without["total"]) == ([failed], 1)
