"""Dead letters on the dashboard (docs/dashboard.rst, "Dead letters") over the memory
backend: ``GET /api/dead`` with its summary, filters and pages; ``POST /api/dead/redrive``
with its confirmed count and audit entry; the ``/dead`` page, hostile text escaped, and its
redrive form confirmed before it acts; and the refusals (read-only, another site)."""

from __future__ import annotations

import html
import re

import trioqueue
from tests._web_harness import SAME_SITE, client
from trioqueue._types import Failure
from trioqueue.web import create_app

HIDDEN = re.compile(r'<input type="hidden" name="(\w+)" value="([^"]*)">')
VALUE_ERROR = "builtins.ValueError"


async def dead(
    backend: trioqueue.MemoryBackend,
    queue: str = "mail",
    n: int = 1,
    error: str = "ValueError: boom",
    error_type: str | None = VALUE_ERROR,
) -> list[int]:
    """``n`` jobs of ``queue`` that failed for good with ``error``."""
    ids = await backend.enqueue_many(queue, list(range(n)), max_attempts=1)
    claimed = await backend.claim(queue, limit=n, worker_id="w", visibility_timeout=60)
    failures = [
        Failure(c.job.id, c.job.claim_seq, error, None, error_type=error_type) for c in claimed
    ]
    await backend.fail(failures)
    return ids


async def statuses(backend: trioqueue.MemoryBackend, ids: list[int]) -> list[str]:
    infos = await backend.get_jobs(ids)
    return [infos[i].status for i in ids]


async def test_api_dead_lists_counts_and_pages(backend: trioqueue.MemoryBackend) -> None:
    mail = await dead(backend, "mail", 3)
    sms = await dead(backend, "sms", 1, "KeyError: 'n'", "builtins.KeyError")
    await backend.enqueue("mail", "ready")
    async with client(create_app(backend)) as c:
        every = await c.get("/api/dead")
        page = await c.get("/api/dead?limit=2")
        older = await c.get(f"/api/dead?limit=2&after={page.json()['next_after']}")
        keyed = await c.get("/api/dead?error_type=builtins.KeyError")
        sampled = await c.get("/api/dead?sample=1")
    body = every.json()
    assert [d["id"] for d in body["dead"]] == [*sms, *mail[::-1]]
    assert body["next_after"] is None
    assert body["summary"] == {
        "total": 4,
        "capped": False,
        "by_queue": [{"queue": "mail", "count": 3}, {"queue": "sms", "count": 1}],
        "by_error_type": [
            {"error_type": VALUE_ERROR, "count": 3},
            {"error_type": "builtins.KeyError", "count": 1},
        ],
    }
    first = body["dead"][0]
    assert (first["queue"], first["error_type"], first["cancelled"]) == (
        "sms",
        "builtins.KeyError",
        False,
    )
    assert first["finished_at"].endswith("+00:00")
    assert [d["id"] for d in page.json()["dead"]] == [sms[0], mail[2]]
    assert [d["id"] for d in older.json()["dead"]] == [mail[1], mail[0]]
    assert [d["id"] for d in keyed.json()["dead"]] == sms
    assert sampled.json()["summary"]["capped"] is True


async def test_api_dead_filters_by_time_and_refuses_bad_parameters_at_once(
    backend: trioqueue.MemoryBackend,
) -> None:
    [job_id] = await dead(backend)
    finished = (await backend.get_job(job_id)).finished_at
    assert finished is not None
    since = finished.isoformat()
    async with client(create_app(backend)) as c:
        kept = await c.get("/api/dead", params={"since": since})
        left = await c.get("/api/dead", params={"before": since})
        bad = await c.get("/api/dead?since=soon&limit=0")
        both = await c.get(
            "/api/dead", params={"since": "2030-01-02T00:00Z", "before": "2030-01-01T00:00Z"}
        )
    assert [d["id"] for d in kept.json()["dead"]] == [job_id]
    assert left.json()["dead"] == []
    assert bad.status_code == 400
    assert "since must be an ISO 8601 time" in bad.json()["error"]
    assert both.status_code == 400
    assert "failed_since must not be after failed_before" in both.json()["error"]


async def test_api_redrive_acts_on_the_confirmed_count_and_records_it(
    backend: trioqueue.MemoryBackend,
) -> None:
    mail = await dead(backend, "mail", 3)
    sms = await dead(backend, "sms", 1, "KeyError: 'n'", "builtins.KeyError")
    async with client(create_app(backend)) as c:
        refused = await c.post(
            f"/api/dead/redrive?error_type={VALUE_ERROR}", json={"expected": 2}, headers=SAME_SITE
        )
        done = await c.post(
            f"/api/dead/redrive?error_type={VALUE_ERROR}", json={"expected": 3}, headers=SAME_SITE
        )
    assert refused.status_code == 409
    assert "3 dead letters match now, more than the 2 confirmed" in refused.json()["error"]
    assert done.json() == {"ok": True, "matching": 3, "done": 3}
    assert await statuses(backend, mail) == ["ready"] * 3
    assert await statuses(backend, sms) == ["failed"]
    [entry] = await backend.list_audit()
    assert (entry.action, entry.target) == ("dead.redrive", f"error_type={VALUE_ERROR}")
    assert entry.detail == {
        "filters": {"error_type": VALUE_ERROR},
        "expected": 3,
        "matching": 3,
        "done": 3,
    }


async def test_redrive_is_refused_read_only_and_from_another_site(
    backend: trioqueue.MemoryBackend,
) -> None:
    ids = await dead(backend)
    async with client(create_app(backend, read_only=True)) as c:
        read_only = await c.post("/api/dead/redrive", json={"expected": 1}, headers=SAME_SITE)
        page = await c.get("/dead")
    async with client(create_app(backend)) as c:
        other = await c.post(
            "/api/dead/redrive", json={"expected": 1}, headers={"Origin": "https://evil.example"}
        )
        form = await c.post(
            "/dead/redrive", data={"expected": "1", "confirmed": "yes"},
            headers={"Origin": "https://evil.example"},
        )  # fmt: skip
    assert (read_only.status_code, other.status_code, form.status_code) == (403, 403, 403)
    assert 'data-testid="redrive-form"' not in page.text
    assert await statuses(backend, ids) == ["failed"]
    assert await backend.list_audit() == []


async def test_the_page_shows_the_breakdown_escaped_and_confirms_the_redrive(
    backend: trioqueue.MemoryBackend,
) -> None:
    hostile = await dead(backend, "mail", 1, "ValueError: \u202eliam <script>", "<b>T</b>")
    other = await dead(backend, "sms", 2)
    async with client(create_app(backend)) as c:
        page = await c.get("/dead")
        asked = await c.post("/dead/redrive", data={"queue": "sms"}, headers=SAME_SITE)
        fields = {k: html.unescape(v) for k, v in HIDDEN.findall(asked.text)}
        done = await c.post("/dead/redrive", data=fields, headers=SAME_SITE)
        after = await c.get("/dead")
    assert page.status_code == 200
    assert "\\u202eliam" in page.text  # the override shown as its escape
    assert "<script>" not in page.text
    assert "&lt;b&gt;T&lt;/b&gt;" in page.text  # the error type, escaped
    assert 'data-testid="dead-total" data-total="3"' in page.text
    assert 'id="nav-dead" aria-current="page"' in page.text
    assert "Redrive all 2 dead letters matching queue=sms?" in asked.text
    assert (fields["queue"], fields["expected"], fields["confirmed"]) == ("sms", "2", "yes")
    assert await statuses(backend, hostile) == ["failed"]
    assert (done.status_code, done.headers["location"]) == (303, "/dead?queue=sms")
    assert await statuses(backend, other) == ["ready", "ready"]
    assert 'data-total="1"' in after.text
    assert [e.action for e in await backend.list_audit()] == ["dead.redrive"]


async def test_a_confirmation_gone_stale_is_refused(backend: trioqueue.MemoryBackend) -> None:
    ids = await dead(backend, "mail", 1)
    async with client(create_app(backend)) as c:
        asked = await c.post("/dead/redrive", data={"queue": "mail"}, headers=SAME_SITE)
        fields = dict(HIDDEN.findall(asked.text))
        ids += await dead(backend, "mail", 1)
        done = await c.post("/dead/redrive", data=fields, headers=SAME_SITE)
        nothing = await c.post("/dead/redrive", data={"queue": "none"}, headers=SAME_SITE)
    assert done.status_code == 409
    assert "2 dead letters match now, more than the 1 confirmed" in done.text
    assert await statuses(backend, ids) == ["failed", "failed"]
    assert nothing.status_code == 409


async def test_error_type_dash_selects_the_dead_letters_with_none_recorded(
    backend: trioqueue.MemoryBackend,
) -> None:
    """``error_type=-`` (docs/dashboard.rst): no error type recorded; the breakdown's
    "none recorded" links there, and the page's redrive form keeps the filter."""
    await dead(backend, "mail", 2)
    untyped = await dead(backend, "sms", 1, "stopped", None)
    async with client(create_app(backend)) as c:
        api = await c.get("/api/dead?error_type=-")
        page = await c.get("/dead")
        filtered = await c.get("/dead?error_type=-")
        asked = await c.post("/dead/redrive", data={"error_type": "-"}, headers=SAME_SITE)
        fields = {k: html.unescape(v) for k, v in HIDDEN.findall(asked.text)}
        done = await c.post("/dead/redrive", data=fields, headers=SAME_SITE)
        redriven = await c.post(
            "/api/dead/redrive?error_type=-", json={"expected": 0}, headers=SAME_SITE
        )
    assert [d["id"] for d in api.json()["dead"]] == untyped
    assert api.json()["summary"]["by_error_type"] == [{"error_type": None, "count": 1}]
    assert 'href="/dead?error_type=-" data-testid="dead-type-none"' in page.text
    assert 'data-total="1"' in filtered.text
    assert 'name="error_type" id="dead-error-type" data-testid="dead-error-type" value="-"' in (
        filtered.text
    )
    assert "Redrive all 1 dead letter matching error_type=-?" in asked.text
    assert fields["error_type"] == "-"
    assert (done.status_code, done.headers["location"]) == (303, "/dead?error_type=-")
    assert await statuses(backend, untyped) == ["ready"]
    assert redriven.json() == {"ok": True, "matching": 0, "done": 0}
    assert [e.target for e in await backend.list_audit()] == ["error_type=-"] * 2
