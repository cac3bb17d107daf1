"""A job's checkpoint on the dashboard's job page and in the JSON API (docs/protocol.rst
§16): shown whole (it is at most 64 KiB), escaped; none when no attempt stored one."""

from __future__ import annotations

import trioqueue
from tests._web_harness import client
from trioqueue._core import RenewItem
from trioqueue.web import create_app

HOSTILE = '{"at": "<script>alert(1)</script>\\u202e"}'


async def _checkpointed(backend: trioqueue.MemoryBackend, text: str) -> int:
    job_id = await backend.enqueue("q", "x")
    [claimed] = await backend.claim("q", limit=1, worker_id="w", visibility_timeout=60)
    item = RenewItem(job_id, claimed.job.claim_seq, None, text)
    await backend.renew([item], visibility_timeout=60)
    return job_id


async def test_job_page_shows_the_checkpoint_escaped(backend: trioqueue.MemoryBackend) -> None:
    job_id = await _checkpointed(backend, HOSTILE)
    plain = await backend.enqueue("q", "y")
    async with client(create_app(backend)) as c:
        page = await c.get(f"/jobs/{job_id}")
        none = await c.get(f"/jobs/{plain}")
        api = await c.get(f"/api/jobs/{job_id}")
    assert '<pre id="job-checkpoint" data-testid="job-checkpoint">' in page.text
    assert "<script>alert" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert "\u202e" not in page.text  # a bidirectional control shows as an escape
    assert '<p class="muted" data-testid="job-checkpoint">none</p>' in none.text
    body = api.json()
    assert body["checkpoint"] == {"at": "<script>alert(1)</script>\u202e"}
    assert body["checkpointed_at"] is not None


async def test_a_stored_null_checkpoint_shows_as_null(backend: trioqueue.MemoryBackend) -> None:
    job_id = await _checkpointed(backend, "null")
    async with client(create_app(backend)) as c:
        page = await c.get(f"/jobs/{job_id}")
    assert '<pre id="job-checkpoint" data-testid="job-checkpoint">null</pre>' in page.text
