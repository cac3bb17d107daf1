"""A job's snooze count where operators look (docs/protocol.rst §17): ``trioqueue show``,
the dashboard's job page and ``GET /api/jobs/{id}``."""

from __future__ import annotations

import trioqueue
from tests._web_harness import client
from trioqueue._types import SnoozeWrite
from trioqueue.cli._commands import show as show_cmd
from trioqueue.web import create_app


async def _snoozed(backend: trioqueue.MemoryBackend, times: int) -> int:
    job_id = await backend.enqueue("q", "x")
    for _ in range(times):
        [claimed] = await backend.claim("q", limit=1, worker_id="w", visibility_timeout=60)
        write = SnoozeWrite(job_id, claimed.job.claim_seq, 0.0)
        await backend.snooze([write], max_snoozes=100)
    return job_id


async def test_the_job_page_and_the_api_show_the_snoozes(
    backend: trioqueue.MemoryBackend,
) -> None:
    job_id = await _snoozed(backend, 3)
    fresh = await backend.enqueue("q", "y")
    async with client(create_app(backend)) as c:
        page = await c.get(f"/jobs/{job_id}")
        none = await c.get(f"/jobs/{fresh}")
        api = await c.get(f"/api/jobs/{job_id}")
    assert '<dd data-testid="job-snoozes">3</dd>' in page.text
    assert '<dd data-testid="job-snoozes">0</dd>' in none.text
    assert api.json()["snoozes"] == 3


async def test_show_prints_the_snoozes_once_there_was_one(
    backend: trioqueue.MemoryBackend,
) -> None:
    snoozed = await backend.get_job(await _snoozed(backend, 2))
    fresh = await backend.get_job(await backend.enqueue("q", "y"))
    assert "  snoozes   2" in show_cmd.job_report(snoozed)
    assert not any(line.startswith("  snoozes") for line in show_cmd.job_report(fresh))
