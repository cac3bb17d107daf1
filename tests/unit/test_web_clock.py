"""The dashboard counts leases down on the database's clock (docs/dashboard.rst, "Clocks"):
with this machine's clock ten minutes ahead of the database's, a lease taken for an hour
still shows an hour left, on the job page and for the maintainer on the retention page,
and the page hands the browser the database's now (``data-db-now``) to tick from.

The skew is made on the memory backend as its docs say (its ``wall_clock``, this process's
reading of the rows' clock), with the web's own reading of this machine's clock moved by
the same ten minutes."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
import trio

import trioqueue
from tests._web_harness import client
from trioqueue.web import clock, create_app

AHEAD = timedelta(minutes=10)
HOUR = 3600.0


@pytest.fixture
def machine_ahead(backend: trioqueue.MemoryBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine's clock ten minutes ahead of the database's."""
    backend.wall_clock = lambda: trio.current_time() + AHEAD.total_seconds()
    monkeypatch.setattr(clock, "local_now", lambda: datetime.now(UTC) + AHEAD)


async def test_a_lease_counts_down_on_the_databases_clock(
    backend: trioqueue.MemoryBackend, machine_ahead: None
) -> None:
    job_id = await backend.enqueue("q", "x")
    await backend.claim("q", limit=1, worker_id="w", visibility_timeout=HOUR)
    async with client(create_app(backend)) as c:
        page = (await c.get(f"/jobs/{job_id}")).text
    [left] = re.findall(r'data-testid="lease-countdown"[^>]*>([^<]*)<', page)
    assert left in ("59m 59s", "1h 0m")  # by this machine's clock: 49m 59s
    [db_now] = re.findall(r'data-testid="lease-countdown"[^>]*data-db-now="([^"]+)"', page)
    assert abs(datetime.fromisoformat(db_now) - datetime.now(UTC)) < AHEAD / 2


async def test_the_maintainer_lease_counts_down_on_the_databases_clock(
    backend: trioqueue.MemoryBackend, machine_ahead: None
) -> None:
    await backend.claim_maintainer("host:1:ab", HOUR)
    async with client(create_app(backend)) as c:
        page = (await c.get("/retention")).text
    [until] = re.findall(r'data-testid="maintainer-until".*?\(in ([^)]*)\)', page, re.S)
    assert until in ("59m 59s", "1h 0m")
