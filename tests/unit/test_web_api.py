"""The dashboard's JSON API (docs/dashboard.rst) over the memory backend.

httpx's ASGITransport drives the app in-process under trio: Starlette runs on anyio, which
runs on trio, so no thread and no second event loop are involved.
"""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
import trio

import trioqueue
from tests._web_harness import BASE, SAME_SITE, client
from trioqueue._types import Ack, Failure, PoolBeat, PoolRegistration
from trioqueue.web import check_bind, create_app, job_json
from trioqueue.web.api import LIST_PREVIEW


async def test_queues_lists_counts_per_queue(backend: trioqueue.MemoryBackend) -> None:
    await backend.enqueue("mail", {"to": "a"})
    await backend.enqueue("mail", {"to": "b"})
    await backend.enqueue("sms", 1)
    async with client(create_app(backend)) as c:
        r = await c.get("/api/queues")
    assert r.status_code == 200
    body = r.json()
    assert [q["queue"] for q in body] == ["mail", "sms"]
    assert body[0]["counts"] == {"ready": 2}
    assert body[1]["counts"] == {"ready": 1}
    for q in body:
        assert set(q) == {
            "queue", "counts", "oldest_ready_age", "paused", "max_running", "max_per_second",
            "estimated",
        }  # fmt: skip
        assert (q["paused"], q["max_running"], q["max_per_second"]) == (False, None, None)
        assert q["estimated"] is False  # the memory backend counts exactly
        assert isinstance(q["oldest_ready_age"], float)


async def test_queues_empty(backend: trioqueue.MemoryBackend) -> None:
    async with client(create_app(backend)) as c:
        r = await c.get("/api/queues")
    assert (r.status_code, r.json()) == (200, [])


JOB_KEYS = {
    "id",
    "queue",
    "payload",
    "status",
    "attempts",
    "max_attempts",
    "priority",
    "progress",
    "last_error",
    "created_at",
    "finished_at",
    "result",
    "group",
    "cancelled",  # the attempt history (docs/dashboard.rst, "Job page")
    "next_attempt_at",
    "finished_by",
}


async def test_jobs_filters_pages_and_totals(backend: trioqueue.MemoryBackend) -> None:
    ids = [await backend.enqueue("mail", {"n": n}) for n in range(5)]
    await backend.enqueue("sms", "x")
    await backend.cancel(ids[0])
    async with client(create_app(backend)) as c:
        everything = (await c.get("/api/jobs")).json()
        mail_ready = (await c.get("/api/jobs?queue=mail&status=ready&limit=2&offset=1")).json()
        failed = (await c.get("/api/jobs", params={"status": "failed"})).json()
    assert everything["total"] == 6
    assert len(everything["jobs"]) == 6
    assert all(set(j) == JOB_KEYS for j in everything["jobs"])
    assert mail_ready["total"] == 4
    assert len(mail_ready["jobs"]) == 2
    assert all(j["queue"] == "mail" and j["status"] == "ready" for j in mail_ready["jobs"])
    assert failed["total"] == 1
    assert [j["id"] for j in failed["jobs"]] == [ids[0]]


@pytest.mark.parametrize(
    "query",
    [
        "status=done",
        "limit=0",
        "limit=many",
        "limit=100000",
        "offset=-1",
        "offset=x",
        "sort=name",
        "sort=-name",
        "q=" + "x" * 201,
    ],
)
async def test_jobs_bad_params_are_400(backend: trioqueue.MemoryBackend, query: str) -> None:
    async with client(create_app(backend)) as c:
        r = await c.get(f"/api/jobs?{query}")
    assert r.status_code == 400
    assert list(r.json()) == ["error"]
    assert "\n" not in r.json()["error"]


async def test_jobs_search_and_sort(backend: trioqueue.MemoryBackend) -> None:
    low = await backend.enqueue("mail", {"to": "alice"}, priority=1)
    high = await backend.enqueue("mail", {"to": "ALICE"}, priority=9)
    await backend.enqueue("mail", {"to": "bob"})
    async with client(create_app(backend)) as c:
        found = (await c.get("/api/jobs", params={"q": "alice", "sort": "-priority"})).json()
        by_id = (await c.get("/api/jobs", params={"q": "alice", "sort": "-id", "limit": 1})).json()
    assert [j["id"] for j in found["jobs"]] == [high, low]
    assert found["total"] == 2
    assert [j["id"] for j in by_id["jobs"]] == [high]
    assert by_id["total"] == 2  # every match, not just this page


async def test_job_detail(backend: trioqueue.MemoryBackend) -> None:
    job_id = await backend.enqueue("mail", {"to": ["a", "b"]}, priority=3, max_attempts=4)
    async with client(create_app(backend)) as c:
        r = await c.get(f"/api/jobs/{job_id}")
    assert r.status_code == 200
    body = r.json()
    created = body.pop("created_at")
    assert datetime.fromisoformat(created).tzinfo is not None
    assert body == {
        "id": job_id,
        "queue": "mail",
        "payload": {"to": ["a", "b"]},
        "status": "ready",
        "attempts": 0,
        "max_attempts": 4,
        "priority": 3,
        "progress": None,
        "last_error": None,
        "finished_at": None,
        "result": None,
        "group": None,
        "cancelled": False,
        "next_attempt_at": None,
        "finished_by": None,
        "lease_expires_at": None,
        "last_renewed_at": None,
        "cancel_requested": False,
        "cancel_requested_at": None,
        "cancel_acknowledged_at": None,
        "worker": None,
        "checkpoint": None,
        "checkpointed_at": None,
        "snoozes": 0,
    }


def test_undecodable_payload_is_its_raw_text_marked() -> None:
    info = trioqueue.JobInfo(
        id=7,
        queue="q",
        payload=trioqueue.UndecodablePayload("[[[1]]]", "too deep"),
        status="failed",
        attempts=1,
        max_attempts=1,
        priority=0,
        progress=None,
        last_error="undecodable",
        created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        finished_at=datetime(2026, 1, 2, 3, 4, 6, tzinfo=UTC),
    )
    out = job_json(info)
    assert out["payload"] == "[[[1]]]"
    assert type(out["payload"]) is str
    assert out["undecodable"] is True
    assert out["created_at"] == "2026-01-02T03:04:05+00:00"
    assert out["finished_at"] == "2026-01-02T03:04:06+00:00"


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/api/jobs/999", 404),
        ("/api/jobs/abc", 400),
        ("/api/jobs/0", 400),
        ("/api/jobs/-1", 400),
        (f"/api/jobs/{2**63}", 400),
    ],
)
async def test_job_bad_ids(backend: trioqueue.MemoryBackend, path: str, status: int) -> None:
    async with client(create_app(backend)) as c:
        got = await c.get(path)
        cancel = await c.post(path + "/cancel", headers=SAME_SITE)
        retry = await c.post(path + "/retry", headers=SAME_SITE)
    for r in (got, cancel, retry):
        assert r.status_code == status
        assert list(r.json()) == ["error"]


async def test_cancel_then_409_once_finished(backend: trioqueue.MemoryBackend) -> None:
    job_id = await backend.enqueue("mail", 1)
    async with client(create_app(backend)) as c:
        first = await c.post(f"/api/jobs/{job_id}/cancel", headers=SAME_SITE)
        second = await c.post(f"/api/jobs/{job_id}/cancel", headers=SAME_SITE)
    assert (first.status_code, first.json()) == (200, {"ok": True})
    assert (await backend.get_job(job_id)).status == "failed"
    assert second.status_code == 409
    assert list(second.json()) == ["error"]


async def test_retry_409_unless_failed(backend: trioqueue.MemoryBackend) -> None:
    job_id = await backend.enqueue("mail", 1)
    async with client(create_app(backend)) as c:
        early = await c.post(f"/api/jobs/{job_id}/retry", headers=SAME_SITE)
        await backend.cancel(job_id)
        retried = await c.post(f"/api/jobs/{job_id}/retry", headers=SAME_SITE)
    assert early.status_code == 409
    assert (retried.status_code, retried.json()) == (200, {"ok": True})
    assert (await backend.get_job(job_id)).status == "ready"


async def test_delete_then_404(backend: trioqueue.MemoryBackend) -> None:
    job_id = await backend.enqueue("mail", 1)
    async with client(create_app(backend)) as c:
        r = await c.delete(f"/api/jobs/{job_id}", headers=SAME_SITE)
        again = await c.delete(f"/api/jobs/{job_id}", headers=SAME_SITE)
    assert (r.status_code, r.json()) == (200, {"ok": True})
    assert again.status_code == 404
    with pytest.raises(trioqueue.UnknownJobError):
        await backend.get_job(job_id)


async def test_read_only_refuses_changes(backend: trioqueue.MemoryBackend) -> None:
    job_id = await backend.enqueue("mail", 1)
    async with client(create_app(backend, read_only=True)) as c:
        reads = [await c.get("/api/queues"), await c.get(f"/api/jobs/{job_id}")]
        writes = [
            await c.post(f"/api/jobs/{job_id}/cancel", headers=SAME_SITE),
            await c.post(f"/api/jobs/{job_id}/retry", headers=SAME_SITE),
            await c.delete(f"/api/jobs/{job_id}", headers=SAME_SITE),
        ]
    assert [r.status_code for r in reads] == [200, 200]
    for r in writes:
        assert r.status_code == 403
        assert r.json() == {"error": "the dashboard is read-only"}
    assert (await backend.get_job(job_id)).status == "ready"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Origin": "http://evil.example"},
        {"Origin": "http://127.0.0.1:9999"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Origin": "null"},
    ],
)
async def test_cross_site_changes_are_403(
    backend: trioqueue.MemoryBackend, headers: dict[str, str]
) -> None:
    job_id = await backend.enqueue("mail", 1)
    async with client(create_app(backend)) as c:
        r = await c.post(f"/api/jobs/{job_id}/cancel", headers=headers)
    assert r.status_code == 403
    assert "cross-site" in r.json()["error"]
    assert (await backend.get_job(job_id)).status == "ready"


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "same-origin"},
        {"Origin": "http://dash.example:8080"},
        {"Origin": BASE},
    ],
)
async def test_same_site_and_allowed_origins_pass(
    backend: trioqueue.MemoryBackend, headers: dict[str, str]
) -> None:
    job_id = await backend.enqueue("mail", 1)
    app = create_app(backend, allowed_origins=["http://dash.example:8080/"])
    async with client(app) as c:
        r = await c.post(f"/api/jobs/{job_id}/cancel", headers=headers)
    assert (r.status_code, r.json()) == (200, {"ok": True})


TOKEN = "s3cret-s3cret-s3cret-s3cret"


async def test_token_required_everywhere(backend: trioqueue.MemoryBackend) -> None:
    job_id = await backend.enqueue("mail", 1)
    app = create_app(backend, token="s3cret-s3cret-s3cret-s3cret")
    paths = ["/api/queues", "/api/jobs", f"/api/jobs/{job_id}", "/metrics"]
    async with client(app) as c:
        for path in paths:
            assert (await c.get(path)).status_code == 401
            wrong = await c.get(path, headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
            assert list(wrong.json()) == ["error"]
            ok = await c.get(path, headers={"Authorization": "Bearer s3cret-s3cret-s3cret-s3cret"})
            assert ok.status_code == 200
        basic = await c.get(
            "/api/queues", headers={"Authorization": "Basic s3cret-s3cret-s3cret-s3cret"}
        )
        assert basic.status_code == 401
        refused = await c.post(f"/api/jobs/{job_id}/cancel", headers=SAME_SITE)
        assert refused.status_code == 401
    assert (await backend.get_job(job_id)).status == "ready"


async def test_session_cookie_works(backend: trioqueue.MemoryBackend) -> None:
    job_id = await backend.enqueue("mail", 1)
    app = create_app(backend, token=TOKEN)
    async with client(app) as c:
        login = await c.post("/login", data={"token": TOKEN}, headers=SAME_SITE)
        assert login.status_code == 303
        assert (await c.get("/api/queues")).status_code == 200
        r = await c.post(f"/api/jobs/{job_id}/cancel", headers=SAME_SITE)
    assert (r.status_code, r.json()) == (200, {"ok": True})
    # The token itself in a cookie (what older versions set) opens nothing.
    async with client(app, cookies={"trioqueue_token": TOKEN}) as c:
        assert (await c.get("/api/queues")).status_code == 401
    async with client(app, cookies={"trioqueue_session": "forged.0000"}) as c:
        assert (await c.get("/api/queues")).status_code == 401


async def test_metrics_samples_the_backend_on_scrape(backend: trioqueue.MemoryBackend) -> None:
    app = create_app(backend)
    async with client(app) as c:
        before = await c.get("/metrics")
        await backend.enqueue("mail", 1)
        await backend.enqueue("mail", 2)
        after = await c.get("/metrics")
    assert before.status_code == 200
    assert before.headers["content-type"].startswith("text/plain")
    assert 'trioqueue_jobs{queue="mail",status="ready"}' not in before.text
    assert 'trioqueue_jobs{queue="mail",status="ready"} 2.0' in after.text
    assert "trioqueue_connections_in_use" in after.text


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_check_bind_loopback_needs_no_token(host: str) -> None:
    check_bind(host, None)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1", "example.org"])
def test_check_bind_refuses_public_without_token(host: str) -> None:
    with pytest.raises(ValueError, match="without a token"):
        check_bind(host, None)
    with pytest.raises(ValueError):
        check_bind(host, "")
    check_bind(host, "s3cret-s3cret-s3cret-s3cret")


async def test_served_by_hypercorn_over_tcp(backend: trioqueue.MemoryBackend) -> None:
    from hypercorn.config import Config
    from hypercorn.trio import serve

    await backend.enqueue("mail", 1)
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(serve, create_app(backend), config)
            async with httpx.AsyncClient() as c:
                r = await c.get(f"{binds[0]}/api/queues")
            nursery.cancel_scope.cancel()
    assert r.status_code == 200
    assert r.json()[0]["queue"] == "mail"


async def test_a_succeeded_jobs_json_carries_its_result(backend: trioqueue.MemoryBackend) -> None:
    job_id = await backend.enqueue("mail", "x")
    [claimed] = await backend.claim("mail", limit=1, worker_id="w", visibility_timeout=60)
    await backend.ack([Ack(job_id, claimed.job.claim_seq, result='{"sent": 2}')])
    async with client(create_app(backend)) as c:
        detail = (await c.get(f"/api/jobs/{job_id}")).json()
        listed = (await c.get("/api/jobs")).json()["jobs"]
    assert detail["result"] == {"sent": 2}
    assert [j["result"] for j in listed] == [{"sent": 2}]


# -- bad input: one clear 400, never a 500 (issue 22, items 9 and 11) ---------------------


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("q=a%00b", "q must not contain"),
        ("queue=a%00b", "queue must not contain"),
        ("queue=" + "x" * 129, "queue must be at most 128 characters"),
    ],
)
async def test_jobs_filters_a_database_cannot_hold_are_400(
    backend: trioqueue.MemoryBackend, query: str, reason: str
) -> None:
    async with client(create_app(backend)) as c:
        r = await c.get(f"/api/jobs?{query}")
    assert r.status_code == 400
    assert r.json()["error"].startswith(reason)


# Deeper than json.loads can recurse, yet well under the body limit (a bigger body is 413).
NESTED = b"[" * 20_000 + b"]" * 20_000


async def test_deeply_nested_json_bodies_are_400_and_change_nothing(
    backend: trioqueue.MemoryBackend,
) -> None:
    job_id = await backend.enqueue("mail", 1)
    await backend.set_queue_limits("mail", max_running=4)
    async with client(create_app(backend)) as c:
        bulk = await c.post("/api/jobs/actions", content=NESTED, headers=SAME_SITE)
        limits = await c.post("/api/queues/mail/limits", content=NESTED, headers=SAME_SITE)
        nested_ids = b'{"action": "delete", "ids": ' + NESTED + b"}"
        inner = await c.post("/api/jobs/actions", content=nested_ids, headers=SAME_SITE)
    for r in (bulk, limits, inner):
        assert r.status_code == 400
        assert r.json() == {"error": "the body must be JSON, not nested this deep"}
    assert (await backend.get_job(job_id)).status == "ready"
    assert (await backend.queue_stats())["mail"].max_running == 4


@pytest.mark.parametrize("raw", ["+1", "%20" + "1", "1%20", "1_0", "%D9%A1", "0x1", "%EF%BC%91"])
async def test_job_ids_are_ascii_digits_only(backend: trioqueue.MemoryBackend, raw: str) -> None:
    """int() reads all of these as a number; a job id in a URL is ASCII digits only."""
    first = await backend.enqueue("mail", 1)
    assert first == 1  # "+1", an Arabic-Indic or a fullwidth "1" would name it
    for _ in range(9):
        await backend.enqueue("mail", 1)  # "1_0" would name job 10
    async with client(create_app(backend)) as c:
        got = await c.get(f"/api/jobs/{raw}")
        cancel = await c.post(f"/api/jobs/{raw}/cancel", headers=SAME_SITE)
        delete = await c.delete(f"/api/jobs/{raw}", headers=SAME_SITE)
    for r in (got, cancel, delete):
        assert r.status_code == 400, r.text
        assert r.json()["error"].startswith("job id must be ASCII digits")
    assert [j.status for j in await backend.list_jobs()] == ["ready"] * 10


@pytest.mark.parametrize("name", ["limit", "offset"])
@pytest.mark.parametrize("raw", ["+1", "%201", "1_0", "%D9%A1"])
async def test_limits_and_offsets_are_ascii_digits_only(
    backend: trioqueue.MemoryBackend, name: str, raw: str
) -> None:
    async with client(create_app(backend)) as c:
        r = await c.get(f"/api/jobs?{name}={raw}")
    assert r.status_code == 400
    assert r.json()["error"].startswith(f"{name} must be ASCII digits")


# -- lists carry a bounded prefix of big texts (issue 22, item 10) ------------------------


async def test_the_job_list_carries_a_prefix_of_a_big_payload_the_job_all_of_it(
    backend: trioqueue.MemoryBackend,
) -> None:
    big = await backend.enqueue("mail", {"blob": "x" * 100_000})
    small = await backend.enqueue("mail", {"to": "a"})
    async with client(create_app(backend)) as c:
        listed = (await c.get("/api/jobs", params={"limit": 20})).json()["jobs"]
        detail = (await c.get(f"/api/jobs/{big}")).json()
    entries = {j["id"]: j for j in listed}
    assert entries[big]["payload"] == '{"blob": "' + "x" * (LIST_PREVIEW - 10)
    assert entries[big]["truncated"] == {"payload": 100_012}
    assert entries[small]["payload"] == {"to": "a"}
    assert "truncated" not in entries[small]
    assert detail["payload"] == {"blob": "x" * 100_000}
    assert "truncated" not in detail


async def test_the_job_list_cuts_a_long_error_and_result_too(
    backend: trioqueue.MemoryBackend,
) -> None:
    failed, done = await backend.enqueue_many("mail", [1, 2])
    claimed = {
        c.job.id: c.job.claim_seq
        for c in await backend.claim("mail", limit=2, worker_id="w", visibility_timeout=60)
    }
    await backend.fail([Failure(failed, claimed[failed], "E" * 5000, None)])
    await backend.ack([Ack(done, claimed[done], result='"' + "r" * 5000 + '"')])
    async with client(create_app(backend)) as c:
        listed = {j["id"]: j for j in (await c.get("/api/jobs")).json()["jobs"]}
        whole = (await c.get(f"/api/jobs/{failed}")).json()
    assert listed[failed]["last_error"] == "E" * LIST_PREVIEW
    assert listed[failed]["truncated"] == {"last_error": 5000}
    assert listed[done]["result"] == '"' + "r" * (LIST_PREVIEW - 1)
    assert listed[done]["truncated"] == {"result": 5002}
    assert whole["last_error"] == "E" * 5000


async def test_workers_json_carries_each_pools_clock(backend: trioqueue.MemoryBackend) -> None:
    """The workers page's Clock column, in the API too (docs/protocol.rst §8): null until a
    claim measured it, then the seconds ahead and the verdict of the pool's last beat."""

    def beat(worker_id: str, skew: float | None = None, verdict: str | None = None) -> PoolBeat:
        return PoolBeat(PoolRegistration(worker_id, "host-1", 1, "q", 1, 1.0), 0, 0, skew, verdict)

    for b in (beat("w-never"), beat("w-ahead", 5.25, "ahead"), beat("w-stop", 60.0, "stopped")):
        await backend.renew([], visibility_timeout=10, beat=b)
    async with client(create_app(backend)) as c:
        workers = (await c.get("/api/workers")).json()
    clocks = {w["worker_id"]: (w["clock_skew"], w["clock_verdict"]) for w in workers}
    assert clocks == {
        "w-never": (None, None),
        "w-ahead": (5.25, "ahead"),
        "w-stop": (60.0, "stopped"),
    }
