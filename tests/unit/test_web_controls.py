"""The dashboard's controls, audit log and table health (docs/dashboard.rst, "Controls",
"Audit log", "Table health") over the memory backend: the JSON endpoints, the pages' form
posts with their confirmation step, what each action records, and the refusals."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

import trioqueue
from tests._web_harness import SAME_SITE, client
from trioqueue._types import Failure
from trioqueue.web import create_app
from trioqueue.web.pages import environment

TOKEN = "t" * 32
BEARER = {"Authorization": f"Bearer {TOKEN}"} | SAME_SITE
HIDDEN = re.compile(r'<input type="hidden" name="(\w+)" value="([^"]*)">')


async def failed(backend: trioqueue.MemoryBackend, queue: str = "mail", n: int = 1) -> list[int]:
    """``n`` jobs of ``queue`` that failed for good."""
    ids = await backend.enqueue_many(queue, list(range(n)), max_attempts=1)
    claimed = await backend.claim(queue, limit=n, worker_id="w", visibility_timeout=60)
    await backend.fail([Failure(c.job.id, c.job.claim_seq, "boom", None) for c in claimed])
    return ids


async def statuses(backend: trioqueue.MemoryBackend, ids: list[int]) -> list[str]:
    infos = await backend.get_jobs(ids)
    return [infos[i].status if i in infos else "deleted" for i in ids]


# -- bulk retry and delete ---------------------------------------------------------------


async def test_retry_all_matching_retries_and_records_it(
    backend: trioqueue.MemoryBackend, caplog: pytest.LogCaptureFixture
) -> None:
    mail = await failed(backend, "mail", 3)
    sms = await failed(backend, "sms")
    caplog.set_level(logging.INFO, "trioqueue.web")
    async with client(create_app(backend)) as c:
        r = await c.post("/api/jobs/retry?queue=mail", json={"expected": 3}, headers=SAME_SITE)
    assert (r.status_code, r.json()) == (200, {"ok": True, "matching": 3, "done": 3})
    assert await statuses(backend, mail) == ["ready"] * 3
    assert await statuses(backend, sms) == ["failed"]
    [entry] = await backend.list_audit()
    assert (entry.action, entry.target, entry.session) == (
        "jobs.retry_matching",
        "queue=mail",
        "open",
    )
    assert entry.detail == {"filters": {"queue": "mail"}, "expected": 3, "matching": 3, "done": 3}
    [line] = [r.getMessage() for r in caplog.records if "dashboard action" in r.getMessage()]
    assert line.startswith("dashboard action jobs.retry_matching on queue=mail by session open")


async def test_more_matching_than_confirmed_is_refused_and_nothing_is_done(
    backend: trioqueue.MemoryBackend,
) -> None:
    ids = await failed(backend, "mail", 3)
    async with client(create_app(backend)) as c:
        r = await c.post("/api/jobs/delete?status=failed", json={"expected": 2}, headers=SAME_SITE)
        fewer = await c.post("/api/jobs/delete?queue=mail", json={"expected": 5}, headers=SAME_SITE)
    assert r.status_code == 409
    assert r.json()["matching"] == 3
    assert "3 jobs match now, more than the 2 confirmed" in r.json()["error"]
    # Fewer than confirmed is fine: some went meanwhile.
    assert fewer.json() == {"ok": True, "matching": 3, "done": 3}
    assert await statuses(backend, ids) == ["deleted"] * 3
    assert [e.action for e in await backend.list_audit()] == ["jobs.delete_matching"]


async def test_delete_all_matching_leaves_a_running_job(backend: trioqueue.MemoryBackend) -> None:
    running = await backend.enqueue("mail", "r")
    await backend.claim("mail", limit=1, worker_id="w", visibility_timeout=60)
    ready = await backend.enqueue("mail", "x")
    async with client(create_app(backend)) as c:
        r = await c.post("/api/jobs/delete?queue=mail", json={"expected": 2}, headers=SAME_SITE)
    assert r.json() == {"ok": True, "matching": 2, "done": 1}
    assert await statuses(backend, [running, ready]) == ["running", "deleted"]


@pytest.mark.parametrize(
    ("path", "body", "named"),
    [
        pytest.param("/api/jobs/retry", {}, "expected", id="no-expected"),
        pytest.param("/api/jobs/retry", {"expected": -1}, "expected", id="negative"),
        pytest.param("/api/jobs/retry", {"expected": True}, "expected", id="bool"),
        pytest.param("/api/jobs/retry", {"expected": "3"}, "expected", id="text"),
        pytest.param("/api/jobs/retry", [3], "expected", id="list"),
        pytest.param("/api/jobs/retry?status=ready", {"expected": 9}, "failed", id="retry-ready"),
        pytest.param("/api/jobs/delete?status=bogus", {"expected": 9}, "status", id="bad-status"),
        pytest.param("/api/jobs/delete?q=" + "x" * 201, {"expected": 9}, "q", id="long-search"),
    ],
)
async def test_bad_bulk_requests_get_400_and_nothing_is_done(
    backend: trioqueue.MemoryBackend, path: str, body: Any, named: str
) -> None:
    ids = await failed(backend, "mail", 2)
    async with client(create_app(backend)) as c:
        r = await c.post(path, json=body, headers=SAME_SITE)
    assert r.status_code == 400
    assert named in r.json()["error"]
    assert await statuses(backend, ids) == ["failed", "failed"]
    assert await backend.list_audit() == []


async def test_the_jobs_list_confirms_the_count_before_retrying_all(
    backend: trioqueue.MemoryBackend,
) -> None:
    ids = await failed(backend, "mail", 2)
    await backend.enqueue("mail", "ready")
    async with client(create_app(backend)) as c:
        listing = await c.get("/jobs?queue=mail")
        form = {
            "action": "retry",
            "queue": "mail",
            "status": "",
            "q": "",
            "next": "/jobs?queue=mail",
        }
        asked = await c.post("/jobs/matching", data=form, headers=SAME_SITE)
        untouched = await statuses(backend, ids)
        fields = dict(HIDDEN.findall(asked.text))
        done = await c.post("/jobs/matching", data=fields, headers=SAME_SITE)
    assert 'data-testid="matching-form"' in listing.text
    assert "All 3 matching" in listing.text
    assert asked.status_code == 200
    # The question names the failed ones: those a retry acts on.
    assert "Retry all 2 failed jobs matching queue=mail?" in asked.text
    assert untouched == ["failed", "failed"]
    assert fields["expected"] == "2" and fields["confirmed"] == "yes"
    assert (done.status_code, done.headers["location"]) == (303, "/jobs?queue=mail")
    assert await statuses(backend, ids) == ["ready", "ready"]
    [entry] = await backend.list_audit()
    assert entry.action == "jobs.retry_matching"


async def test_a_confirmation_gone_stale_is_refused(backend: trioqueue.MemoryBackend) -> None:
    await failed(backend, "mail", 1)
    async with client(create_app(backend)) as c:
        asked = await c.post(
            "/jobs/matching",
            data={"action": "delete", "queue": "mail", "status": "failed"},
            headers=SAME_SITE,
        )
        fields = dict(HIDDEN.findall(asked.text))
        await failed(backend, "mail", 1)  # one more fails before the click
        done = await c.post("/jobs/matching", data=fields, headers=SAME_SITE)
    assert "This cannot be undone." in asked.text
    assert done.status_code == 409
    assert "2 jobs match now, more than the 1 confirmed" in done.text
    assert await backend.count_jobs("mail") == 2
    assert await backend.list_audit() == []


async def test_nothing_matching_says_so(backend: trioqueue.MemoryBackend) -> None:
    async with client(create_app(backend)) as c:
        r = await c.post(
            "/jobs/matching", data={"action": "delete", "queue": "x"}, headers=SAME_SITE
        )
    assert r.status_code == 409
    assert "No job matches queue=x now." in r.text


# -- schedules and limits ------------------------------------------------------------------


async def test_schedule_endpoints_disable_enable_and_run(backend: trioqueue.MemoryBackend) -> None:
    await backend.set_schedule("nightly", "reports", "0 3 * * *", {"kind": "daily"})
    async with client(create_app(backend)) as c:
        off = await c.post("/api/schedules/nightly/disable", headers=SAME_SITE)
        ran = await c.post("/api/schedules/nightly/run", headers=SAME_SITE)
        on = await c.post("/api/schedules/nightly/enable", headers=SAME_SITE)
        unknown = await c.post("/api/schedules/nope/run", headers=SAME_SITE)
        listed = await c.get("/api/schedules")
    assert off.status_code == 200
    assert off.json()["schedule"]["enabled"] is False
    assert on.json()["schedule"]["enabled"] is True
    job_id = ran.json()["job_id"]
    assert (await backend.get_job(job_id)).payload == {"kind": "daily"}
    assert (unknown.status_code, unknown.json()) == (404, {"error": "no schedule nope"})
    assert listed.json()[0]["enabled"] is True
    actions = [(e.action, e.target) for e in await backend.list_audit()]
    assert actions == [
        ("schedule.enable", "nightly"),
        ("schedule.run_now", "nightly"),
        ("schedule.disable", "nightly"),
    ]


async def test_the_schedules_page_asks_before_disabling_and_enables_at_once(
    backend: trioqueue.MemoryBackend,
) -> None:
    await backend.set_schedule("nightly", "reports", "0 3 * * *")
    async with client(create_app(backend)) as c:
        page = await c.get("/schedules")
        asked = await c.post(
            "/schedules/actions", data={"action": "disable", "name": "nightly"}, headers=SAME_SITE
        )
        before = (await backend.list_schedules())[0].enabled
        fields = dict(HIDDEN.findall(asked.text))
        done = await c.post("/schedules/actions", data=fields, headers=SAME_SITE)
        disabled_page = await c.get("/schedules")
        enabled = await c.post(
            "/schedules/actions", data={"action": "enable", "name": "nightly"}, headers=SAME_SITE
        )
    assert 'data-testid="schedule-disable"' in page.text
    assert "Disable schedule nightly?" in asked.text
    assert before is True
    assert (done.status_code, done.headers["location"]) == (303, "/schedules")
    assert 'data-enabled="false"' in disabled_page.text
    assert 'data-testid="schedule-enable"' in disabled_page.text
    assert enabled.status_code == 303
    assert (await backend.list_schedules())[0].enabled is True


async def test_limits_by_form_and_by_put(backend: trioqueue.MemoryBackend) -> None:
    await backend.enqueue("mail", 1)
    async with client(create_app(backend)) as c:
        form = {"queue": "mail", "max_running": "4", "max_per_second": "", "next": "/queues/mail"}
        posted = await c.post("/queues/limits", data=form, headers=SAME_SITE)
        after_form = (await backend.queue_stats())["mail"]
        put = await c.put(
            "/api/queues/mail/limits", json={"max_per_second": 2.5}, headers=SAME_SITE
        )
        bad = await c.post(
            "/queues/limits", data={"queue": "mail", "max_running": "four"}, headers=SAME_SITE
        )
    assert (posted.status_code, posted.headers["location"]) == (303, "/queues/mail")
    assert (after_form.max_running, after_form.max_per_second) == (4, None)
    assert put.status_code == 200
    assert (put.json()["max_running"], put.json()["max_per_second"]) == (4, 2.5)
    assert bad.status_code == 400 and "max_running" in bad.text
    assert [(e.action, e.detail) for e in await backend.list_audit()] == [
        ("queue.limits", {"max_per_second": 2.5}),
        ("queue.limits", {"max_running": 4, "max_per_second": None}),
    ]


def test_the_queue_controls_partial_shows_the_limits_form() -> None:
    html = (
        environment()
        .get_template("_queue_controls.html")
        .render(
            read_only=False,
            queue={"queue": "a/b", "paused": True, "max_running": 3, "max_per_second": None},
        )
    )
    assert 'data-testid="queue-resume"' in html
    assert 'value="3"' in html
    assert 'name="next" value="/queues/a/b"' in html
    hidden = (
        environment()
        .get_template("_queue_controls.html")
        .render(read_only=True, queue={"queue": "q", "paused": False})
    )
    assert "limits-form" not in hidden


# -- every action is recorded; read-only and other sites refuse them -------------------------


async def test_the_existing_actions_are_recorded_too(backend: trioqueue.MemoryBackend) -> None:
    first, second = await backend.enqueue_many("mail", [1, 2])
    async with client(create_app(backend)) as c:
        await c.post(f"/api/jobs/{first}/cancel", headers=SAME_SITE)
        await c.post(
            "/api/jobs/actions", json={"action": "retry", "ids": [first, second]}, headers=SAME_SITE
        )
        await c.post("/api/queues/mail/pause", headers=SAME_SITE)
        await c.post(
            "/queues/actions",
            data={"queue": "mail", "action": "resume"},
            headers=SAME_SITE,
        )
    entries = await backend.list_audit()
    assert [(e.action, e.target) for e in entries] == [
        ("queue.resume", "mail"),
        ("queue.pause", "mail"),
        ("jobs.retry", f"{first},{second}"),
        ("job.cancel", str(first)),
    ]
    assert entries[2].detail == {"done": [first], "refused": [second]}


CONTROLS = [
    pytest.param("POST", "/api/jobs/retry", {"json": {"expected": 9}}, id="api-retry"),
    pytest.param("POST", "/api/jobs/delete", {"json": {"expected": 9}}, id="api-delete"),
    pytest.param("POST", "/api/schedules/s/disable", {}, id="api-disable"),
    pytest.param("POST", "/api/schedules/s/enable", {}, id="api-enable"),
    pytest.param("POST", "/api/schedules/s/run", {}, id="api-run"),
    pytest.param("PUT", "/api/queues/mail/limits", {"json": {"max_running": 1}}, id="api-limits"),
    pytest.param(
        "POST",
        "/jobs/matching",
        {"data": {"action": "delete", "expected": "9", "confirmed": "yes"}},
        id="page-delete",
    ),
    pytest.param(
        "POST",
        "/schedules/actions",
        {"data": {"action": "run", "name": "s", "confirmed": "yes"}},
        id="page-run",
    ),
    pytest.param(
        "POST", "/queues/limits", {"data": {"queue": "mail", "max_running": "1"}}, id="page-limits"
    ),
]


@pytest.mark.parametrize(("method", "path", "body"), CONTROLS)
@pytest.mark.parametrize("refusal", ["read-only", "other-site"])
async def test_every_control_is_refused_read_only_and_from_another_site(
    backend: trioqueue.MemoryBackend, method: str, path: str, body: dict[str, Any], refusal: str
) -> None:
    ids = await failed(backend, "mail", 2)
    await backend.set_schedule("s", "mail", "0 3 * * *")
    app = create_app(backend, read_only=refusal == "read-only")
    headers = SAME_SITE if refusal == "read-only" else {"Origin": "https://attacker.test"}
    async with client(app) as c:
        r = await c.request(method, path, headers=headers, **body)
    assert r.status_code == 403
    assert await statuses(backend, ids) == ["failed", "failed"]
    [schedule] = await backend.list_schedules()
    assert schedule.enabled is True
    assert (await backend.queue_stats())["mail"].max_running is None
    assert await backend.count_jobs() == 2  # no job run from the schedule
    assert await backend.list_audit() == []


async def test_the_audit_names_a_token_and_a_logged_in_session(
    backend: trioqueue.MemoryBackend,
) -> None:
    await backend.enqueue("mail", 1)
    app = create_app(backend, token=TOKEN)
    async with client(app) as c:
        await c.post("/api/queues/mail/pause", headers=BEARER)
    async with client(app) as browser:
        await browser.post("/login", data={"token": TOKEN}, headers=SAME_SITE)
        cookie = browser.cookies["trioqueue_session"]
        await browser.post("/api/queues/mail/resume", headers=SAME_SITE)
        await browser.post("/api/queues/mail/pause", headers=SAME_SITE)
    second, first, by_token = await backend.list_audit()
    assert by_token.session == "token"
    assert re.fullmatch(r"[0-9a-f]{8}", first.session)
    assert first.session == second.session  # one session, one short id
    assert first.session not in cookie  # no part of the credential is shown


# -- the audit page and table health ---------------------------------------------------------


async def test_the_audit_page_and_api_list_entries_escaped(
    backend: trioqueue.MemoryBackend,
) -> None:
    await backend.record_audit("queue.pause", "\u202eliam<b>", "open", {"note": "<script>"})
    await backend.record_audit("job.cancel", "7", "open", {})
    async with client(create_app(backend)) as c:
        page = await c.get("/audit")
        only = await c.get("/audit?action=job.cancel")
        api = await c.get("/api/audit?limit=1")
        bad = await c.get("/api/audit?limit=0")
    assert page.status_code == 200
    assert "\\u202eliam&lt;b&gt;" in page.text  # the override shown as its escape
    assert "<script>" not in page.text
    assert "<b>" not in page.text
    assert only.text.count('data-testid="audit-row"') == 1
    assert [e["action"] for e in api.json()["entries"]] == ["job.cancel"]
    assert set(api.json()["entries"][0]) == {"id", "at", "action", "target", "session", "detail"}
    assert bad.status_code == 400
    assert 'href="/audit"' in page.text  # the nav link


async def test_the_table_health_page_and_api(backend: trioqueue.MemoryBackend) -> None:
    ready = await backend.enqueue("mail", 1)
    async with client(create_app(backend)) as c:
        page = await c.get("/tables")
        api = await c.get("/api/tables")
    assert page.status_code == 200
    assert 'data-table="jobs"' in page.text
    assert f'href="/jobs/{ready}"' in page.text
    body = api.json()
    assert body["oldest_ready"]["id"] == ready
    assert body["oldest_running"] == {"id": None, "since": None}
    jobs = next(t for t in body["tables"] if t["name"] == "jobs")
    assert (jobs["live_rows"], jobs["total_bytes"]) == (1, 0)
