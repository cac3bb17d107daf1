"""The dashboard over PostgreSQL: the app in-process, and ``trioqueue dashboard`` as a process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

import trioqueue
from tests.unit.test_web_events import events
from trioqueue._core.wire import RenewItem
from trioqueue._types import PoolBeat, PoolRegistration
from trioqueue.web import create_app

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
BASE = "http://127.0.0.1"
SAME_SITE = {"Origin": BASE}
POOL = PoolRegistration("pool-1", "host", 1234, "mail", 2, 30.0)


@pytest.fixture
async def backend(
    postgres_dsn: str, postgres_schema: str
) -> AsyncIterator[trioqueue.PostgresBackend]:
    async with trioqueue.open_postgres(postgres_dsn, schema=postgres_schema) as backend:
        await backend.migrate()
        yield backend


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)


async def running(backend: trioqueue.PostgresBackend) -> int:
    job_id = await backend.enqueue("mail", {"to": "running"})
    [claimed] = await backend.claim("mail", limit=1, worker_id="pool-1", visibility_timeout=60)
    await backend.renew(
        [RenewItem(job_id, claimed.job.claim_seq, 0.3)],
        visibility_timeout=60,
        beat=PoolBeat(POOL, 1, 0),
    )
    return job_id


async def test_api_and_pages(backend: trioqueue.PostgresBackend) -> None:
    job_id = await running(backend)
    alice = await backend.enqueue("mail", {"to": "Alice"})
    async with client(create_app(backend)) as c:
        detail = (await c.get(f"/api/jobs/{job_id}")).json()
        found = (await c.get("/api/jobs", params={"q": "alice", "sort": "-id"})).json()
        workers = (await c.get("/api/workers")).json()
        refused = await c.delete(f"/api/jobs/{job_id}", headers=SAME_SITE)
        bulk = await c.post(
            "/api/jobs/actions", json={"action": "delete", "ids": [alice]}, headers=SAME_SITE
        )
        pages = [await c.get(p) for p in ("/", "/jobs", f"/jobs/{job_id}", "/workers")]
    assert (detail["status"], detail["progress"], detail["worker"]) == ("running", 0.3, "pool-1")
    assert detail["lease_expires_at"] > detail["last_renewed_at"]
    assert ([j["id"] for j in found["jobs"]], found["total"]) == ([alice], 1)
    assert [w["worker_id"] for w in workers] == ["pool-1"]
    assert refused.status_code == 409
    assert bulk.json()["results"] == [{"id": alice, "ok": True}]
    assert [p.status_code for p in pages] == [200, 200, 200, 200]
    assert 'data-testid="lease-countdown"' in pages[2].text


async def test_events_follow_progress(backend: trioqueue.PostgresBackend) -> None:
    job_id = await backend.enqueue("mail", 1)
    [claimed] = await backend.claim("mail", limit=1, worker_id="pool-1", visibility_timeout=60)
    app = create_app(backend, events_interval=0.05)
    hang_up = trio.Event()
    chunks: list[bytes] = []
    progressed = trio.Event()

    async def receive() -> dict[str, Any]:
        await hang_up.wait()
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        body = message.get("body", b"")
        chunks.append(body)
        if b'"progress":0.75' in body:
            progressed.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/api/events",
        "raw_path": b"/api/events",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 80),
    }
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(app, scope, receive, send)
            await backend.renew(
                [RenewItem(job_id, claimed.job.claim_seq, 0.75)], visibility_timeout=60
            )
            await progressed.wait()
            hang_up.set()  # the stream ends, or the nursery (and fail_after) would not
    text = b"".join(chunks).decode()
    assert f'"id":{job_id},"status":"running","progress":0.75' in text
    assert 'event: queue\ndata: {"queue":"mail","counts":{"running":1}' in text


def test_dashboard_command_serves_until_ctrl_c(postgres_dsn: str, postgres_schema: str) -> None:
    async def prepare() -> None:
        async with trioqueue.open_postgres(postgres_dsn, schema=postgres_schema) as b:
            await b.migrate()
            await b.enqueue("mail", 1)

    trio.run(prepare)
    argv = [sys.executable, "-m", "trioqueue", "--dsn", postgres_dsn, "--schema", postgres_schema]
    argv += ["dashboard", "--port", "0", "--read-only"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("TRIOQUEUE_DASHBOARD_TOKEN", None)
    with subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as server:
        try:
            assert server.stdout is not None
            first = server.stdout.readline()
            assert first.startswith("dashboard: http://127.0.0.1:"), first
            address = first.split()[1]
            with urllib.request.urlopen(f"{address}/api/queues", timeout=10) as r:
                queues = json.load(r)
            with urllib.request.urlopen(f"{address}/jobs", timeout=10) as r:
                page = r.read().decode()
            server.send_signal(signal.SIGINT)
            out, err = server.communicate(timeout=20)
        finally:
            server.kill()
    assert server.returncode == 0, err
    assert queues[0]["counts"] == {"ready": 1}
    assert 'data-testid="read-only-badge"' in page
    assert out == "dashboard stopped\n"


async def test_ten_streams_following_200_jobs_share_one_read(
    backend: trioqueue.PostgresBackend,
) -> None:
    """Ten clients of ``/api/events`` following the same 200 jobs: one read serves them
    all (one queue_stats, one list_jobs, one get_jobs of the 200 ids), not ten reads of
    202 statements each. An hour between polls: only the first read happens."""
    ids = await backend.enqueue_many("mail", [{"n": n} for n in range(200)])
    query = "jobs=" + ",".join(map(str, ids))
    app = create_app(backend, events_interval=3600)
    before = dict(backend.statistics().calls)
    with trio.fail_after(20):
        async with AsyncExitStack() as stack:
            for _ in range(10):
                stream = await stack.enter_async_context(events(app, query))
                first = await stream.next_events()
                assert {d["id"] for n, d in first if n == "job"} <= set(ids)
    calls = backend.statistics().calls
    assert {op: calls[op] - before[op] for op in ("queue_stats", "list_jobs", "get_jobs")} == {
        "queue_stats": 1,
        "list_jobs": 1,
        "get_jobs": 1,
    }
    assert calls["get_job"] == before["get_job"]


async def test_job_lists_carry_a_prefix_cut_in_sql_the_job_all_of_it(
    backend: trioqueue.PostgresBackend,
) -> None:
    """Twenty jobs of 1 MB: ``/api/jobs`` carries 200 characters of each (PostgreSQL's
    jsonb text, cut by the query), ``GET /api/jobs/{id}`` the whole payload."""
    blob = "x" * 1_000_000
    ids = [await backend.enqueue("mail", {"n": n, "blob": blob}) for n in range(20)]
    async with client(create_app(backend)) as c:
        listed = await c.get("/api/jobs", params={"limit": 20})
        page = await c.get("/jobs", params={"limit": 20})
        detail = (await c.get(f"/api/jobs/{ids[0]}")).json()
    jobs = listed.json()["jobs"]
    assert len(jobs) == 20
    assert len(listed.content) < 20 * 1000  # not 20 MB
    for job in jobs:
        assert len(job["payload"]) == 200
        assert job["truncated"] == {
            "payload": len(json.dumps({"n": job["id"] - ids[0], "blob": blob}))
        }
    assert page.status_code == 200
    assert len(page.content) < 100_000
    assert detail["payload"] == {"n": 0, "blob": blob}
