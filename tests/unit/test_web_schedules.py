"""The dashboard's schedules: the ``/schedules`` page (linked from the nav) and
``GET /api/schedules`` (docs/dashboard.rst), over the memory backend."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import trio

import trioqueue
from tests._web_harness import client
from trioqueue.web import create_app

#: The memory backend's clock starts here (a Saturday, the night before Berlin's DST change).
START = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)


async def test_schedules_page_and_api_show_each_next_run(autojump_clock: object) -> None:
    async with trioqueue.open_memory(now=START) as backend:
        await backend.set_schedule(
            "nightly", "reports", "30 2 * * *", {"kind": "daily"}, timezone="Europe/Berlin"
        )
        await backend.set_schedule("minutely", "pings", "* * * * *", priority=2)
        await trio.sleep(60)
        await backend.enqueue_due()  # the minutely one ran once
        async with client(create_app(backend)) as c:
            page = await c.get("/schedules")
            api = await c.get("/api/schedules")
    assert page.status_code == 200
    assert 'href="/schedules" id="nav-schedules" aria-current="page"' in page.text
    rows = dict(re.findall(r'data-schedule="([^"]+)">(.*?)</tr>', page.text, re.S))
    assert list(rows) == ["minutely", "nightly"]
    # 02:30 does not exist on that night in Berlin: the run is at 03:00 CEST.
    assert "2026-03-29 03:00 +0200" in rows["nightly"]
    assert "never" in rows["nightly"]
    assert "2026-03-28 12:02 +0000" in rows["minutely"]
    assert "2026-03-28 12:01 +0000" in rows["minutely"]  # its last run
    assert "<code>{&#34;kind&#34;: &#34;daily&#34;}</code>" in rows["nightly"]
    assert api.status_code == 200
    assert api.json() == [
        {
            "name": "minutely",
            "queue": "pings",
            "cron": "* * * * *",
            "timezone": "UTC",
            "payload": None,
            "priority": 2,
            "max_attempts": 10,
            "next_run_at": "2026-03-28T12:02:00+00:00",
            "last_run_at": "2026-03-28T12:01:00+00:00",
            "enabled": True,
        },
        {
            "name": "nightly",
            "queue": "reports",
            "cron": "30 2 * * *",
            "timezone": "Europe/Berlin",
            "payload": {"kind": "daily"},
            "priority": 0,
            "max_attempts": 10,
            "next_run_at": "2026-03-29T01:00:00+00:00",
            "last_run_at": None,
            "enabled": True,
        },
    ]


async def test_no_schedules(backend: trioqueue.MemoryBackend) -> None:
    async with client(create_app(backend)) as c:
        page = await c.get("/schedules")
        api = await c.get("/api/schedules")
    assert 'data-testid="no-schedules"' in page.text
    assert api.json() == []


async def test_every_page_links_the_schedules(backend: trioqueue.MemoryBackend) -> None:
    async with client(create_app(backend)) as c:
        for path in ("/", "/jobs", "/workers"):
            assert 'href="/schedules" id="nav-schedules"' in (await c.get(path)).text


async def test_schedules_need_the_token(backend: trioqueue.MemoryBackend) -> None:
    async with client(create_app(backend, token="secret-secret-secret-secret")) as c:
        assert (await c.get("/api/schedules")).status_code == 401
        assert (await c.get("/schedules")).status_code in (302, 303, 307)
        authorised = await c.get(
            "/api/schedules", headers={"Authorization": "Bearer secret-secret-secret-secret"}
        )
    assert authorised.status_code == 200
