"""The dashboard's pages, login, bulk actions and workers (docs/dashboard.rst) over the
memory backend, through httpx's ASGITransport under trio."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
import trio

import trioqueue
from tests._web_harness import BASE, SAME_SITE, client
from trioqueue._core import RenewItem
from trioqueue._types import Ack, Failure, PoolBeat, PoolRegistration
from trioqueue.web import create_app
from trioqueue.web.api import LIST_PREVIEW
from trioqueue.web.pages import CHART_HEIGHT, chart

HTMX = {"Origin": BASE, "HX-Request": "true"}


def pool(worker_id: str = "w-1", heartbeat: float = 1.0) -> PoolRegistration:
    return PoolRegistration(
        worker_id=worker_id,
        host="host-1",
        pid=4321,
        queue="mail",
        concurrency=3,
        heartbeat_interval=heartbeat,
    )


async def running(backend: trioqueue.MemoryBackend, worker_id: str = "w-1") -> int:
    job_id = await backend.enqueue("mail", {"to": "running"})
    [claimed] = await backend.claim("mail", limit=1, worker_id=worker_id, visibility_timeout=60)
    await backend.renew(
        [RenewItem(job_id, claimed.job.claim_seq, 0.42)],
        visibility_timeout=60,
        beat=PoolBeat(pool(worker_id), 1, 0),
    )
    return job_id


def data_testids(html: str) -> set[str]:
    return set(re.findall(r'data-testid="([^"]+)"', html))


# -- pages --------------------------------------------------------------------------------


async def test_overview_shows_counts_and_the_hour_chart(backend: trioqueue.MemoryBackend) -> None:
    await backend.enqueue("mail", 1)
    await backend.enqueue("mail", 2)
    done = await backend.enqueue("sms", 3)
    await backend.cancel(done)
    async with client(create_app(backend)) as c:
        r = await c.get("/")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    assert {
        "queue-table",
        "queue-row",
        "queue-count",
        "throughput-chart",
        "chart-bar",
    } <= data_testids(r.text)
    assert re.search(r'data-queue="mail".*?data-status="ready"[^>]*>2<', r.text, re.S)
    assert r.text.count('data-testid="chart-bar"') == 60
    assert '<strong data-testid="chart-failed">1</strong>' in r.text
    assert 'data-events="/api/events"' in r.text


async def test_jobs_page_filters_pages_and_sorts(backend: trioqueue.MemoryBackend) -> None:
    ids = [
        await backend.enqueue("mail", {"n": n, "who": "alice" if n % 2 else "bob"})
        for n in range(6)
    ]
    async with client(create_app(backend)) as c:
        page = await c.get("/jobs", params={"q": "alice", "sort": "id", "limit": 2})
        second = await c.get("/jobs", params={"q": "alice", "sort": "id", "limit": 2, "offset": 2})
        bad = await c.get("/jobs", params={"status": "nope"})
    assert page.status_code == 200
    rows = re.findall(r'data-testid="job-row" data-job-id="(\d+)"', page.text)
    assert rows == [str(ids[1]), str(ids[3])]
    assert 'data-total="3"' in page.text
    assert 'data-testid="page-next"' in page.text
    assert 'data-testid="page-prev"' not in page.text
    assert re.findall(r'data-testid="job-row" data-job-id="(\d+)"', second.text) == [str(ids[5])]
    assert 'data-testid="page-prev"' in second.text
    assert 'data-testid="page-next"' not in second.text
    assert {"bulk-cancel", "bulk-retry", "bulk-delete", "job-select", "select-all"} <= data_testids(
        page.text
    )
    assert 'hx-confirm="Delete the selected jobs?' in page.text
    assert bad.status_code == 400
    assert "status must be one of" in bad.text


async def test_job_page_shows_the_lease(backend: trioqueue.MemoryBackend) -> None:
    job_id = await running(backend)
    await backend.cancel(job_id)  # requested; the worker has not acknowledged it
    async with client(create_app(backend)) as c:
        r = await c.get(f"/jobs/{job_id}")
    assert r.status_code == 200
    ids = data_testids(r.text)
    for testid in ("job-status", "progress-bar", "lease-countdown", "heartbeat-age", "job-worker"):
        assert testid in ids
    assert 'aria-valuenow="42.0"' in r.text
    assert re.search(r'data-testid="lease-countdown" data-countdown="\d{4}-[^"]+"', r.text)
    assert re.search(r'data-testid="heartbeat-age" data-age="\d{4}-[^"]+"', r.text)
    assert 'href="/workers#worker-w-1"' in r.text
    assert 'data-testid="cancel-requested" data-value="true"' in r.text
    assert 'data-testid="cancel-acknowledged" data-value="false"' in r.text
    assert "cancel-button" not in ids  # already requested
    assert "delete-button" not in ids  # running
    assert "&#34;to&#34;: &#34;running&#34;" in r.text  # the payload, escaped


async def test_job_page_unknown_and_bad_ids(backend: trioqueue.MemoryBackend) -> None:
    async with client(create_app(backend)) as c:
        unknown = await c.get("/jobs/999")
        bad = await c.get("/jobs/abc")
    assert unknown.status_code == 404
    assert "There is no job 999." in unknown.text
    assert bad.status_code == 400


async def test_workers_page_shows_live_and_gone_pools(
    backend: trioqueue.MemoryBackend, autojump_clock: object
) -> None:
    await backend.register_pool(pool("w-old", heartbeat=1.0))
    await trio.sleep(10)  # more than three missed beats: stale
    await backend.register_pool(pool("w-new", heartbeat=1.0))
    async with client(create_app(backend)) as c:
        r = await c.get("/workers")
        api = (await c.get("/api/workers")).json()
    assert r.status_code == 200
    states = dict(
        re.findall(r'data-worker-id="([^"]+)".*?data-testid="worker-state">(\w+)<', r.text, re.S)
    )
    assert states == {"w-old": "stale", "w-new": "live"}
    assert {w["worker_id"]: w["stale"] for w in api} == {"w-old": True, "w-new": False}
    assert set(api[0]) == {
        "worker_id",
        "host",
        "pid",
        "queue",
        "concurrency",
        "in_flight",
        "abandoned_renewals",
        "last_beat_at",
        "started_at",
        "stale",
        "clock_skew",
        "clock_verdict",
    }


async def test_read_only_pages_have_no_action_buttons(backend: trioqueue.MemoryBackend) -> None:
    job_id = await backend.enqueue("mail", 1)
    async with client(create_app(backend, read_only=True)) as c:
        listing = await c.get("/jobs")
        detail = await c.get(f"/jobs/{job_id}")
        refused = await c.post(
            "/jobs/actions", data={"action": "cancel", "ids": str(job_id)}, headers=HTMX
        )
    for page in (listing, detail):
        assert page.status_code == 200
        assert "hx-post" not in page.text
        assert not data_testids(page.text) & {"bulk-cancel", "cancel-button", "delete-button"}
        assert 'data-testid="read-only-badge"' in page.text
    assert refused.status_code == 403
    assert (await backend.get_job(job_id)).status == "ready"


async def test_static_files_ship_with_the_package(backend: trioqueue.MemoryBackend) -> None:
    async with client(create_app(backend, token="s3cret-s3cret-s3cret-s3cret")) as c:
        htmx = await c.get("/static/htmx.min.js")
        css = await c.get("/static/dashboard.css")
        script = await c.get("/static/dashboard.js")
    assert htmx.status_code == css.status_code == script.status_code == 200
    assert "htmx" in htmx.text
    assert "EventSource" in script.text


# -- page actions -------------------------------------------------------------------------


async def test_page_actions_on_a_selection(backend: trioqueue.MemoryBackend) -> None:
    ready = [await backend.enqueue("mail", n) for n in range(3)]
    async with client(create_app(backend)) as c:
        r = await c.post(
            "/jobs/actions",
            data={"action": "cancel", "ids": [str(i) for i in ready[:2]], "next": "/jobs?q=x"},
            headers=HTMX,
        )
    assert r.status_code == 200
    assert r.headers["HX-Redirect"] == "/jobs?q=x"
    assert "cancel: 2 of 2 done." in r.text
    statuses = [(await backend.get_job(i)).status for i in ready]
    assert statuses == ["failed", "failed", "ready"]


async def test_page_actions_report_what_failed(backend: trioqueue.MemoryBackend) -> None:
    job_id = await backend.enqueue("mail", 1)
    async with client(create_app(backend)) as c:
        r = await c.post(
            "/jobs/actions", data={"action": "retry", "ids": [str(job_id), "999"]}, headers=HTMX
        )
    assert r.status_code == 200  # htmx swaps only 2xx answers
    assert "HX-Refresh" not in r.headers
    assert "retry: 0 of 2 done." in r.text
    assert f"job {job_id} has not failed" in r.text
    assert "no job 999" in r.text


async def test_page_actions_without_htmx_redirect(backend: trioqueue.MemoryBackend) -> None:
    job_id = await backend.enqueue("mail", 1)
    async with client(create_app(backend)) as c:
        r = await c.post(
            "/jobs/actions?next=/jobs",
            data={"action": "delete", "ids": str(job_id), "confirmed": "yes"},
            headers=SAME_SITE,
        )
    assert (r.status_code, r.headers["location"]) == (303, "/jobs")
    with pytest.raises(trioqueue.UnknownJobError):
        await backend.get_job(job_id)


@pytest.mark.parametrize(
    "data",
    [
        {"action": "explode", "ids": "1"},
        {"action": "cancel"},
        {"action": "cancel", "ids": "x"},
        {"action": ["cancel", "delete"], "ids": "1"},
    ],
)
async def test_page_actions_bad_input_is_400(
    backend: trioqueue.MemoryBackend, data: dict[str, Any]
) -> None:
    job_id = await backend.enqueue("mail", 1)
    async with client(create_app(backend)) as c:
        r = await c.post("/jobs/actions", data=data, headers=SAME_SITE)
    assert r.status_code == 400
    assert (await backend.get_job(job_id)).status == "ready"


async def test_page_actions_cross_site_refused(backend: trioqueue.MemoryBackend) -> None:
    job_id = await backend.enqueue("mail", 1)
    async with client(create_app(backend)) as c:
        r = await c.post(
            "/jobs/actions",
            data={"action": "cancel", "ids": str(job_id)},
            headers={"Origin": "http://evil.example"},
        )
    assert r.status_code == 403
    assert (await backend.get_job(job_id)).status == "ready"


# -- JSON: bulk actions, delete, detail ---------------------------------------------------


async def test_bulk_action_answers_per_id(backend: trioqueue.MemoryBackend) -> None:
    a = await backend.enqueue("mail", 1)
    b = await backend.enqueue("mail", 2)
    await backend.cancel(b)
    async with client(create_app(backend)) as c:
        r = await c.post(
            "/api/jobs/actions", json={"action": "retry", "ids": [a, b, 999]}, headers=SAME_SITE
        )
    assert r.status_code == 200
    assert r.json() == {
        "action": "retry",
        "results": [
            {"id": a, "ok": False, "status": 409, "error": f"job {a} has not failed"},
            {"id": b, "ok": True},
            {"id": 999, "ok": False, "status": 404, "error": "no job 999"},
        ],
    }
    assert (await backend.get_job(b)).status == "ready"


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b'{"action": "cancel"}',
        b'{"action": "nuke", "ids": [1]}',
        b'{"action": "cancel", "ids": []}',
        b'{"action": "cancel", "ids": [true]}',
        b'{"action": "cancel", "ids": ["1"]}',
        b'{"action": "cancel", "ids": [0]}',
        b'{"action": "cancel", "ids": [1], "extra": 1}',
    ],
)
async def test_bulk_bad_bodies_are_400(backend: trioqueue.MemoryBackend, body: bytes) -> None:
    job_id = await backend.enqueue("mail", 1)
    async with client(create_app(backend)) as c:
        r = await c.post("/api/jobs/actions", content=body, headers=SAME_SITE)
    assert r.status_code == 400
    assert list(r.json()) == ["error"]
    assert "\n" not in r.json()["error"]
    assert (await backend.get_job(job_id)).status == "ready"


async def test_bulk_refusals(backend: trioqueue.MemoryBackend) -> None:
    job_id = await backend.enqueue("mail", 1)
    body = {"action": "delete", "ids": [job_id]}
    async with client(
        create_app(backend, token="s3cret-s3cret-s3cret-s3cret", read_only=False)
    ) as c:
        no_token = await c.post("/api/jobs/actions", json=body, headers=SAME_SITE)
        cross = await c.post(
            "/api/jobs/actions",
            json=body,
            headers={
                "Origin": "http://evil.example",
                "Authorization": "Bearer s3cret-s3cret-s3cret-s3cret",
            },
        )
    async with client(create_app(backend, read_only=True)) as c:
        read_only = await c.post("/api/jobs/actions", json=body, headers=SAME_SITE)
    assert [no_token.status_code, cross.status_code, read_only.status_code] == [401, 403, 403]
    assert (await backend.get_job(job_id)).status == "ready"


async def test_delete_running_is_409(backend: trioqueue.MemoryBackend) -> None:
    job_id = await running(backend)
    async with client(create_app(backend)) as c:
        r = await c.delete(f"/api/jobs/{job_id}", headers=SAME_SITE)
        bad = await c.delete("/api/jobs/abc", headers=SAME_SITE)
    assert r.status_code == 409
    assert r.json() == {"error": f"job {job_id} is running"}
    assert bad.status_code == 400
    assert (await backend.get_job(job_id)).status == "running"


async def test_job_detail_has_the_lease(backend: trioqueue.MemoryBackend) -> None:
    job_id = await running(backend)
    await backend.cancel(job_id)
    async with client(create_app(backend)) as c:
        body = (await c.get(f"/api/jobs/{job_id}")).json()
    assert body["status"] == "running"
    assert body["progress"] == 0.42
    assert body["worker"] == "w-1"
    assert body["cancel_requested"] is True
    assert body["cancel_acknowledged_at"] is None
    assert body["lease_expires_at"] > body["last_renewed_at"]


# -- login --------------------------------------------------------------------------------


async def test_login_flow(backend: trioqueue.MemoryBackend) -> None:
    app = create_app(backend, token="s3cret-s3cret-s3cret-s3cret")
    async with client(app) as c:
        page = await c.get("/jobs?status=ready")
        assert (page.status_code, page.headers["location"]) == (
            303,
            "/login?next=/jobs%3Fstatus%3Dready",
        )
        api = await c.get("/api/jobs")
        assert api.status_code == 401
        form = await c.get("/login?next=/jobs%3Fstatus%3Dready")
        assert form.status_code == 200
        assert 'value="/jobs?status=ready"' in form.text
        wrong = await c.post("/login", data={"token": "nope", "next": "/jobs"}, headers=SAME_SITE)
        assert wrong.status_code == 401
        assert 'data-testid="login-error"' in wrong.text
        assert "set-cookie" not in wrong.headers
        ok = await c.post(
            "/login",
            data={"token": "s3cret-s3cret-s3cret-s3cret", "next": "/jobs?status=ready"},
            headers=SAME_SITE,
        )
        assert (ok.status_code, ok.headers["location"]) == (303, "/jobs?status=ready")
        cookie = ok.headers["set-cookie"]
        assert "trioqueue_session=" in cookie and "s3cret" not in cookie
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie
        assert (await c.get("/jobs")).status_code == 200
        assert (await c.get("/api/jobs")).status_code == 200
        out = await c.post("/logout", headers=SAME_SITE)
        assert (out.status_code, out.headers["location"]) == (303, "/login")
        assert (await c.get("/api/jobs")).status_code == 401


@pytest.mark.parametrize("target", ["//evil.example/x", "http://evil.example/", "jobs", "/\\evil"])
async def test_login_never_redirects_off_site(
    backend: trioqueue.MemoryBackend, target: str
) -> None:
    async with client(create_app(backend, token="s3cret-s3cret-s3cret-s3cret")) as c:
        r = await c.post(
            "/login",
            data={"token": "s3cret-s3cret-s3cret-s3cret", "next": target},
            headers=SAME_SITE,
        )
    assert (r.status_code, r.headers["location"]) == (303, "/")


async def test_login_cross_site_is_refused(backend: trioqueue.MemoryBackend) -> None:
    async with client(create_app(backend, token="s3cret-s3cret-s3cret-s3cret")) as c:
        r = await c.post(
            "/login",
            data={"token": "s3cret-s3cret-s3cret-s3cret"},
            headers={"Origin": "http://evil.example"},
        )
    assert r.status_code == 403
    assert "set-cookie" not in r.headers


async def test_login_without_a_token_goes_home(backend: trioqueue.MemoryBackend) -> None:
    async with client(create_app(backend)) as c:
        r = await c.get("/login")
        page = await c.get("/")
    assert (r.status_code, r.headers["location"]) == (303, "/")
    assert page.status_code == 200
    assert "logout-button" not in page.text


async def test_a_failing_database_is_503(backend: trioqueue.MemoryBackend) -> None:
    class Broken:
        async def queue_stats(self) -> Any:
            raise trioqueue.BackendError("connection refused")

    async with client(create_app(Broken())) as c:  # type: ignore[arg-type]
        api = await c.get("/api/queues")
        page = await c.get("/")
    assert api.status_code == 503
    assert api.json() == {"error": "the database failed: connection refused"}
    assert page.status_code == 503


def test_chart_stacks_failed_on_succeeded_scaled_to_the_busiest_bucket() -> None:
    start = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
    drawn = chart(
        [
            trioqueue.FinishedBucket(start, succeeded=0, failed=0),
            trioqueue.FinishedBucket(start, succeeded=6, failed=2),
            trioqueue.FinishedBucket(start, succeeded=2, failed=2),
        ]
    )
    empty, busiest, half = drawn["bars"]
    assert (drawn["peak"], drawn["succeeded"], drawn["failed"]) == (8, 8, 4)
    assert (empty.succeeded_height, empty.failed_height) == (0, 0)
    assert busiest.succeeded_height + busiest.failed_height == CHART_HEIGHT
    assert busiest.failed_y == 0  # the busiest bar reaches the top
    assert busiest.succeeded_height == 3 * busiest.failed_height
    assert half.succeeded_height + half.failed_height == CHART_HEIGHT / 2
    assert half.failed_y + half.failed_height == half.succeeded_y  # failed sits on succeeded


async def test_job_page_shows_the_result_as_pretty_json(backend: trioqueue.MemoryBackend) -> None:
    waiting = await backend.enqueue("q", "x")
    job_id = await backend.enqueue("q", "y")
    await backend.cancel(waiting)
    [claimed] = await backend.claim("q", limit=1, worker_id="w", visibility_timeout=60)
    await backend.ack([Ack(job_id, claimed.job.claim_seq, result='{"b": [1], "a": "<é>"}')])
    async with client(create_app(backend)) as c:
        done = await c.get(f"/jobs/{job_id}")
        none = await c.get(f"/jobs/{waiting}")
    assert (
        '<pre id="job-result" data-testid="job-result">{\n  &#34;a&#34;: &#34;&lt;é&gt;&#34;,\n'
        "  &#34;b&#34;: [\n    1\n  ]\n}</pre>" in done.text
    )
    assert '<p class="muted" data-testid="job-result">none</p>' in none.text


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("q=a%00b", "q must not contain"),
        ("queue=a%00b", "queue must not contain"),
        ("queue=" + "x" * 129, "queue must be at most 128 characters"),
        ("limit=%2B5", "limit must be ASCII digits"),
        ("offset=1_0", "offset must be ASCII digits"),
    ],
)
async def test_jobs_page_bad_filters_are_400(
    backend: trioqueue.MemoryBackend, query: str, reason: str
) -> None:
    async with client(create_app(backend)) as c:
        r = await c.get(f"/jobs?{query}")
    assert r.status_code == 400
    assert reason in r.text


@pytest.mark.parametrize("raw", ["+1", "%201", "%D9%A1"])
async def test_job_page_and_actions_take_ascii_digit_ids(
    backend: trioqueue.MemoryBackend, raw: str
) -> None:
    job_id = await backend.enqueue("mail", 1)
    assert job_id == 1
    async with client(create_app(backend)) as c:
        page = await c.get(f"/jobs/{raw}")
        action = await c.post(
            "/jobs/actions",
            content=f"action=cancel&ids={raw}",
            headers={**SAME_SITE, "Content-Type": "application/x-www-form-urlencoded"},
        )
    assert page.status_code == 400
    assert "job id must be ASCII digits" in page.text
    assert action.status_code == 400
    assert (await backend.get_job(job_id)).status == "ready"


async def test_jobs_page_reads_a_prefix_of_big_texts_the_job_page_all_of_them(
    backend: trioqueue.MemoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = await backend.enqueue("mail", {"blob": "x" * 100_000})
    [claimed] = await backend.claim("mail", limit=1, worker_id="w", visibility_timeout=60)
    await backend.fail([Failure(big, claimed.job.claim_seq, "E" * 5000, None)])
    asked: list[int | None] = []
    list_jobs = backend.list_jobs

    async def spy(*args: Any, **kwargs: Any) -> list[trioqueue.JobInfo]:
        asked.append(kwargs.get("preview"))
        return await list_jobs(*args, **kwargs)

    monkeypatch.setattr(backend, "list_jobs", spy)
    async with client(create_app(backend)) as c:
        listed = await c.get("/jobs")
        page = await c.get(f"/jobs/{big}")
    assert asked == [LIST_PREVIEW]  # the backend cuts the texts (in SQL on PostgreSQL)
    assert listed.status_code == 200
    assert "x" * 69 + "…" in listed.text  # the 80 characters on screen
    assert "E" * LIST_PREVIEW + "…" in listed.text  # the error, cut and marked
    assert "E" * (LIST_PREVIEW + 1) not in listed.text
    assert "x" * 100_000 in page.text
    assert "E" * 5000 in page.text


async def test_a_refused_htmx_actions_error_shows_hidden_characters_as_escapes(
    backend: trioqueue.MemoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The error fragment of a refused action is escaped as every template value is
    (trioqueue/web/visible.py), not with HTML escaping alone: an error text holding a
    right-to-left override or a CR shows them as escapes."""

    def refuse(raw: str) -> int:
        raise ValueError(f"no job \u202eliam\r<b>{raw}</b>")

    monkeypatch.setattr("trioqueue.web.pages.parse_job_id", refuse)
    async with client(create_app(backend)) as c:
        response = await c.post(
            "/jobs/actions", data={"action": "cancel", "ids": "7"}, headers=HTMX
        )
    assert response.status_code == 200
    assert response.text.strip() == (
        '<p class="error" data-testid="action-error">no job \\u202eliam\\r&lt;b&gt;7&lt;/b&gt;</p>'
    )


async def test_a_failing_databases_reason_shows_hidden_characters_as_escapes() -> None:
    """The 503's reason comes from the database's error, which may quote a stored string:
    its hidden characters show as escapes, as on every page (trioqueue/web/visible.py)."""

    class Broken:
        async def queue_stats(self) -> Any:
            raise trioqueue.BackendError("no queue \u202eliam\x1b[2J")

    async with client(create_app(Broken())) as c:  # type: ignore[arg-type]
        api = await c.get("/api/queues")
        page = await c.get("/")
    shown = "the database failed: no queue \\u202eliam\\x1b[2J"
    assert (api.status_code, api.json()) == (503, {"error": shown})
    assert (page.status_code, page.text) == (503, shown + "\n")
