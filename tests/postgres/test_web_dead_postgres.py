"""The dashboard's dead letters on a real server (docs/dashboard.rst, "Dead letters"):
``GET /api/dead`` with a time filter and its summary, ``POST /api/dead/redrive`` with its
confirmed count and audit entry, and the job page's lease on the database's clock."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from tests._web_harness import SAME_SITE, client
from trioqueue._backends.postgres import PostgresBackend
from trioqueue._types import Failure
from trioqueue.web import clock, create_app

pytestmark = pytest.mark.postgres


async def test_dead_letters_are_read_and_redriven_through_the_api(
    backend: PostgresBackend,
) -> None:
    ids = await backend.enqueue_many("mail", [1, 2, 3], max_attempts=1)
    claimed = await backend.claim("mail", limit=3, worker_id="w", visibility_timeout=60)
    await backend.fail(
        [Failure(c.job.id, c.job.claim_seq, "TimeoutError: slow", None, error_type="TimeoutError")
         for c in claimed]
    )  # fmt: skip
    [first] = await backend.list_dead_letters(limit=1)
    since = first.finished_at.isoformat()
    async with client(create_app(backend)) as c:
        listed = (await c.get("/api/dead", params={"error_type": "TimeoutError"})).json()
        later = (await c.get("/api/dead", params={"since": since})).json()
        done = await c.post(
            "/api/dead/redrive?error=slow&queue=mail", json={"expected": 3}, headers=SAME_SITE
        )
        after = (await c.get("/api/dead")).json()
    assert [d["id"] for d in listed["dead"]] == ids[::-1]
    assert listed["summary"]["by_error_type"] == [{"error_type": "TimeoutError", "count": 3}]
    assert first.id in [d["id"] for d in later["dead"]]
    assert done.json() == {"ok": True, "matching": 3, "done": 3}
    assert after["summary"]["total"] == 0
    [entry] = await backend.list_audit()
    assert (entry.action, entry.detail["done"]) == ("dead.redrive", 3)


async def test_the_job_page_counts_the_lease_down_on_the_databases_clock(
    backend: PostgresBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = await backend.enqueue("mail", "x")
    await backend.claim("mail", limit=1, worker_id="w", visibility_timeout=3600)
    # This machine's clock ten minutes ahead of the server's: both of this process's
    # readings of it (the backend's test seam, docs/protocol.rst §8, and the web's).
    real = backend.wall_clock
    backend.wall_clock = lambda: real() + 600
    monkeypatch.setattr(clock, "local_now", lambda: datetime.now(UTC) + timedelta(minutes=10))
    async with client(create_app(backend)) as c:
        page = (await c.get(f"/jobs/{job_id}")).text
    [left] = re.findall(r'data-testid="lease-countdown"[^>]*>([^<]*)<', page)
    assert left.startswith("59m") or left == "1h 0m"  # by this machine's clock: 49m
