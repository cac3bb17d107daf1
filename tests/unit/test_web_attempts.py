"""The dashboard's attempt history (docs/dashboard.rst, "Job page", "Queue page"): the job
timeline, the queue's timings and charts, the job list's columns and cancelled filter, and
their JSON, over the memory backend (trio's MockClock stands for the database's clock)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import trio

import trioqueue
from tests._web_harness import client
from trioqueue._operator_types import AttemptInfo
from trioqueue._types import Ack, AttemptTiming, Failure, PoolRegistration
from trioqueue.web import create_app
from trioqueue.web.charts import seconds_text
from trioqueue.web.pages import MAX_SHOWN_ATTEMPTS
from trioqueue.web.timeline import Step, error_attempt, steps

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "app.py", line 3, in handler\n'
    "    raise ValueError(text)\n"
    "ValueError: <b>boom</b> \u202eliam"
)


def pool(worker_id: str) -> PoolRegistration:
    return PoolRegistration(
        worker_id=worker_id,
        host="host-<1>",
        pid=4321,
        queue="mail",
        concurrency=1,
        heartbeat_interval=1.0,
    )


async def claim(backend: trioqueue.MemoryBackend, worker_id: str = "w-1") -> trioqueue.Job:
    [claimed] = await backend.claim("mail", limit=1, worker_id=worker_id, visibility_timeout=60)
    return claimed.job


async def fail_once(
    backend: trioqueue.MemoryBackend, job: trioqueue.Job, retry: float | None
) -> None:
    await backend.fail(
        [
            Failure(
                job.id,
                job.claim_seq,
                "ValueError: <b>boom</b> \u202eliam",
                retry,
                timing=AttemptTiming(started_after=0.5, run_seconds=2.0),
                error_type="ValueError",
                traceback=TRACEBACK,
            )
        ]
    )


async def retried_then_succeeded(backend: trioqueue.MemoryBackend) -> int:
    """A job whose first attempt failed (waiting 3 s for its claim) and whose second
    succeeded after its 30 s backoff."""
    await backend.register_pool(pool("w-1"))
    job_id = await backend.enqueue("mail", {"to": "a"}, max_attempts=3)
    await trio.sleep(3)
    await fail_once(backend, await claim(backend), retry=30)
    await trio.sleep(30)
    job = await claim(backend)
    await backend.ack([Ack(job.id, job.claim_seq, timing=AttemptTiming(0.25, 1.5))])
    return job_id


def attempts_of(html: str) -> list[tuple[str, str]]:
    """Each attempt on a job page: its number and outcome."""
    return re.findall(r'data-testid="attempt" data-attempt="(\d+)" data-outcome="(\w+)"', html)


# -- the job page ---------------------------------------------------------------------------


async def test_job_page_shows_each_attempt_with_its_moments(
    backend: trioqueue.MemoryBackend, autojump_clock: trio.testing.MockClock
) -> None:
    job_id = await retried_then_succeeded(backend)
    async with client(create_app(backend)) as c:
        r = await c.get(f"/jobs/{job_id}")
    assert r.status_code == 200
    assert attempts_of(r.text) == [("1", "retry"), ("2", "succeeded")]
    first, second = r.text.split('data-testid="attempt" ')[1:3]
    steps = re.findall(r'data-step="(\w+)"', first)
    assert steps == ["visible", "claimed", "started", "finished"]
    assert '<span data-testid="attempt-wait">3s</span>' in first
    assert '<span data-testid="attempt-run">2s</span>' in first
    assert "on w-1 (host-&lt;1&gt;)" in first
    assert "failed, retried" in first and "succeeded" in second
    assert '<span data-testid="attempt-run">1.5s</span>' in second
    assert 'data-testid="attempt-traceback"' not in second


async def test_job_page_shows_the_traceback_folded_and_escaped(
    backend: trioqueue.MemoryBackend, autojump_clock: trio.testing.MockClock
) -> None:
    job_id = await retried_then_succeeded(backend)
    async with client(create_app(backend)) as c:
        r = await c.get(f"/jobs/{job_id}")
    [details] = re.findall(r'<details class="traceback".*?</details>', r.text, re.S)
    assert "<summary>Traceback (ValueError)</summary>" in details
    assert "<b>" not in details and "\u202e" not in details
    assert "ValueError: &lt;b&gt;boom&lt;/b&gt; \\u202eliam</pre>" in details
    assert "  File &#34;app.py&#34;, line 3, in handler\n" in details  # line breaks kept
    assert " open" not in details.split(">", 1)[0]  # folded until asked


async def test_a_succeeded_job_labels_an_old_error_with_its_attempt(
    backend: trioqueue.MemoryBackend, autojump_clock: trio.testing.MockClock
) -> None:
    job_id = await retried_then_succeeded(backend)
    async with client(create_app(backend)) as c:
        r = await c.get(f"/jobs/{job_id}")
    assert '<h2 data-testid="job-last-error-title">Error of attempt 1</h2>' in r.text
    assert "Last error" not in r.text


async def test_a_retrying_job_says_when_it_runs_next(
    backend: trioqueue.MemoryBackend, autojump_clock: trio.testing.MockClock
) -> None:
    await backend.register_pool(pool("w-1"))
    job_id = await backend.enqueue("mail", {"to": "a"}, max_attempts=3)
    await fail_once(backend, await claim(backend), retry=90)
    info = await backend.get_job(job_id)
    assert info.status == "scheduled" and info.next_attempt_at is not None
    async with client(create_app(backend)) as c:
        r = await c.get(f"/jobs/{job_id}")
        api = (await c.get(f"/api/jobs/{job_id}")).json()
    assert re.search(
        r'<dt>Next attempt</dt>\s*<dd data-testid="job-next-attempt"><time datetime="'
        + re.escape(info.next_attempt_at.isoformat())
        + r'">[^<]+</time>\s*<span class="muted">\(in 1m (29|30)s\)</span>',
        r.text,
    )
    assert 'data-testid="attempt-next"' in r.text
    assert api["next_attempt_at"] == info.next_attempt_at.isoformat()
    assert api["cancelled"] is False


async def test_a_cancelled_failure_is_labelled_cancelled(
    backend: trioqueue.MemoryBackend,
) -> None:
    job_id = await backend.enqueue("mail", {"to": "a"})
    assert await backend.cancel(job_id)
    async with client(create_app(backend)) as c:
        r = await c.get(f"/jobs/{job_id}")
        api = (await c.get(f"/api/jobs/{job_id}")).json()
    assert f'data-testid="job-status" data-job-id="{job_id}">failed</span>' in r.text
    assert 'id="job-cancelled" data-testid="job-cancelled"' in r.text
    assert '<h2 data-testid="job-last-error-title">Cancelled</h2>' in r.text
    assert (api["status"], api["cancelled"], api["finished_by"]) == ("failed", True, None)


async def test_a_running_job_shows_its_attempt_under_way(backend: trioqueue.MemoryBackend) -> None:
    job_id = await backend.enqueue("mail", {"to": "a"})
    await claim(backend, "w-9")
    async with client(create_app(backend)) as c:
        r = await c.get(f"/jobs/{job_id}")
    assert attempts_of(r.text) == [("1", "running")]
    assert "on w-9" in r.text


# -- the JSON API ---------------------------------------------------------------------------


async def test_api_lists_a_jobs_attempts(
    backend: trioqueue.MemoryBackend, autojump_clock: trio.testing.MockClock
) -> None:
    job_id = await retried_then_succeeded(backend)
    async with client(create_app(backend)) as c:
        body = (await c.get(f"/api/jobs/{job_id}/attempts")).json()
        detail = (await c.get(f"/api/jobs/{job_id}")).json()
        unknown = await c.get("/api/jobs/999/attempts")
        bad = await c.get("/api/jobs/+1/attempts")
    first, second = body["attempts"]
    assert body["id"] == job_id
    assert first | {"claimed_at": None, "started_at": None, "finished_at": None} == {
        "attempt": 1,
        "claim_seq": first["claim_seq"],
        "outcome": "retry",
        "worker_id": "w-1",
        "host": "host-<1>",
        "claimed_at": None,
        "started_at": None,
        "finished_at": None,
        "run_seconds": 2.0,
        "wait_seconds": 3.0,
        "error_type": "ValueError",
        "error": "ValueError: <b>boom</b> \u202eliam",
        "traceback": TRACEBACK,
    }
    assert (second["outcome"], second["run_seconds"], second["error"]) == ("succeeded", 1.5, None)
    assert second["wait_seconds"] == 0.0  # claimed the moment its backoff ended
    assert detail["finished_by"] == "w-1" and detail["cancelled"] is False
    assert unknown.status_code == 404 and unknown.json() == {"error": "no job 999"}
    assert bad.status_code == 400


async def succeeded_with(backend: trioqueue.MemoryBackend, runs: list[float]) -> None:
    for run in runs:
        await backend.enqueue("mail", {"run": run})
        job = await claim(backend)
        await backend.ack([Ack(job.id, job.claim_seq, timing=AttemptTiming(0.0, run))])


async def test_api_gives_a_queues_timings_and_history(
    backend: trioqueue.MemoryBackend, autojump_clock: trio.testing.MockClock
) -> None:
    await succeeded_with(backend, [1.0, 2.0, 3.0, 4.0])
    async with client(create_app(backend)) as c:
        timings = (await c.get("/api/queues/mail/timings")).json()
        history = (await c.get("/api/queues/mail/history?window=600&buckets=10")).json()
        none = (await c.get("/api/queues/sms/timings")).json()
    assert timings["queue"] == "mail" and timings["window"] == 3600
    assert timings["attempts"] == 4
    assert timings["run_p50"] == pytest.approx(2.5)  # percentile_cont: halfway from 2 to 3
    assert timings["run_p99"] == pytest.approx(3.97)
    assert timings["wait_p50"] == pytest.approx(0.0)
    assert len(history["buckets"]) == 10
    assert sum(b["succeeded"] for b in history["buckets"]) == 4
    assert history["buckets"][-1]["run_p50"] == pytest.approx(2.5)
    assert set(history["buckets"][0]) == {
        "start", "succeeded", "failed", "cancelled", "run_p50", "run_p95", "wait_p50", "wait_p95"
    }  # fmt: skip
    assert none == {
        "queue": "sms", "window": 3600, "attempts": 0, "run_p50": None, "run_p95": None,
        "run_p99": None, "wait_p50": None, "wait_p95": None, "wait_p99": None,
    }  # fmt: skip


@pytest.mark.parametrize(
    "path",
    [
        "/api/queues/mail/timings?window=0",
        "/api/queues/mail/timings?window=-5",
        "/api/queues/mail/timings?window=604801",
        "/api/queues/mail/history?buckets=0",
        "/api/queues/mail/history?buckets=1001",
        "/api/queues/mail/history?window=1.5",
        "/api/queues/%00/history",
        "/api/queues/" + "q" * 129 + "/timings",
        "/api/jobs?cancelled=yes",
        "/api/jobs?status=ready&cancelled=true",
    ],
)
async def test_bad_parameters_answer_400_with_one_line(
    backend: trioqueue.MemoryBackend, path: str
) -> None:
    async with client(create_app(backend)) as c:
        r = await c.get(path)
    assert r.status_code == 400
    assert set(r.json()) == {"error"} and "\n" not in r.json()["error"]


# -- the job list ---------------------------------------------------------------------------


async def failed_and_cancelled(backend: trioqueue.MemoryBackend) -> tuple[int, int, int]:
    """A job that failed for good, one cancelled, one still ready."""
    failed = await backend.enqueue("mail", {"n": 1}, max_attempts=1)
    await fail_once(backend, await claim(backend), retry=None)
    cancelled = await backend.enqueue("mail", {"n": 2})
    await backend.cancel(cancelled)
    ready = await backend.enqueue("mail", {"n": 3})
    return failed, cancelled, ready


def listed(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'data-testid="job-row" data-job-id="(\d+)"', html)]


async def test_the_job_list_filters_cancellations(backend: trioqueue.MemoryBackend) -> None:
    failed, cancelled, ready = await failed_and_cancelled(backend)
    async with client(create_app(backend)) as c:
        only = await c.get("/jobs?status=failed&cancelled=true")
        without = await c.get("/jobs?status=failed&cancelled=false")
        every = await c.get("/jobs?cancelled=false")
        api = (await c.get("/api/jobs?cancelled=true")).json()
        bad = await c.get("/jobs?status=running&cancelled=true")
    assert listed(only.text) == [cancelled]
    assert listed(without.text) == [failed]
    assert listed(every.text) == [ready, failed]
    assert [j["id"] for j in api["jobs"]] == [cancelled] and api["total"] == 1
    assert bad.status_code == 400 and "cancelled goes with status failed" in bad.text
    assert re.search(r'<option value="true" selected>only</option>', only.text)
    assert 'data-testid="job-cancelled">cancelled</span>' in only.text


async def test_the_job_list_pages_keep_the_cancelled_filter(
    backend: trioqueue.MemoryBackend,
) -> None:
    for _ in range(3):
        await backend.cancel(await backend.enqueue("mail", {}))
    async with client(create_app(backend)) as c:
        r = await c.get("/jobs?cancelled=true&limit=10&offset=1")
        # The previous page goes by cursor (docs/dashboard.rst, "Big tables"), filter kept.
        prev = re.search(
            r'href="(/jobs\?cancelled=true&amp;sort=-id&amp;limit=10&amp;before=[^"]+)"', r.text
        )
        assert prev is not None, r.text
        back = await c.get(prev.group(1).replace("&amp;", "&"))
    assert back.status_code == 200 and back.text.count('data-testid="job-cancelled"') == 1


async def test_the_job_list_shows_finished_at_and_duration(
    backend: trioqueue.MemoryBackend, autojump_clock: trio.testing.MockClock
) -> None:
    job_id = await backend.enqueue("mail", {"n": 1})
    await trio.sleep(4)
    job = await claim(backend)
    await trio.sleep(2.5)
    await backend.ack([Ack(job.id, job.claim_seq)])
    waiting = await backend.enqueue("mail", {"n": 2})
    info = await backend.get_job(job_id)
    assert info.finished_at is not None
    async with client(create_app(backend)) as c:
        r = await c.get("/jobs")
    rows: dict[int, Any] = {
        int(i): row for i, row in re.findall(r'data-job-id="(\d+)">(.*?)</tr>', r.text, re.S)
    }
    assert info.finished_at.isoformat() in rows[job_id]
    assert '<td class="num" data-testid="job-took">6.5s</td>' in rows[job_id]
    assert '<td data-testid="job-finished">–</td>' in rows[waiting]
    assert '<td class="num" data-testid="job-took">–</td>' in rows[waiting]


# -- the queue page ---------------------------------------------------------------------------


async def test_queue_page_shows_timings_and_four_charts(
    backend: trioqueue.MemoryBackend, autojump_clock: trio.testing.MockClock
) -> None:
    await succeeded_with(backend, [1.0, 2.0, 3.0, 4.0])
    async with client(create_app(backend)) as c:
        r = await c.get("/queues/mail")
        overview = await c.get("/")
        timings = (await c.get("/api/queues/mail/timings")).json()
    assert r.status_code == 200
    for chart in ("throughput-chart", "failures-chart", "run-time-chart", "wait-chart"):
        assert f'<svg id="{chart}" data-testid="{chart}" class="chart" role="img"' in r.text
    assert r.text.count('data-testid="chart-bucket"') == 4 * 60
    run = re.search(r'data-testid="timings-run">(.*?)</tr>', r.text, re.S)
    assert run is not None
    shown = [seconds_text(timings[f"run_p{p}"]) for p in (50, 95, 99)]
    assert re.findall(r'<td class="num">([^<]+)</td>', run.group(1)) == shown
    assert shown[0] == "2.5s"
    assert "4 attempts finished" in r.text
    assert (
        "Attempts of mail that succeeded per minute over the last hour, newest on the right: 4 in all"
        in r.text
    )
    assert 'href="/queues/mail" data-testid="queue-link"' in overview.text


async def test_queue_page_of_a_name_with_markup_and_slashes(
    backend: trioqueue.MemoryBackend,
) -> None:
    await backend.enqueue("a/<b>&", {})
    async with client(create_app(backend)) as c:
        r = await c.get("/queues/a/%3Cb%3E%26")
        overview = await c.get("/")
        empty = await c.get("/queues/nothing-here")
        bad = await c.get("/queues/" + "q" * 129)
    assert r.status_code == 200
    assert "<b>" not in r.text
    assert 'data-testid="queue-name">a/&lt;b&gt;&amp;</span>' in r.text
    assert 'href="/queues/a/%3Cb%3E%26"' in overview.text
    assert empty.status_code == 200 and "0 attempts finished" in empty.text
    assert bad.status_code == 400


# -- the timeline's moments (trioqueue/web/timeline.py) ---------------------------------------

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def attempt(**fields: Any) -> AttemptInfo:
    row: dict[str, Any] = {
        "job_id": 1, "attempt": 1, "claim_seq": 1, "outcome": "succeeded", "worker_id": "w",
        "host": "h", "claimed_at": T0, "started_at": T0 + timedelta(seconds=0.25),
        "finished_at": T0 + timedelta(seconds=2.25), "run_seconds": 2.0, "wait_seconds": 4.0,
        "error_type": None, "error": None, "traceback": None,
    }  # fmt: skip
    return AttemptInfo(**(row | fields))


def test_an_attempts_moments_each_say_the_time_since_the_one_before() -> None:
    assert steps(attempt()) == [
        Step("visible", T0 - timedelta(seconds=4)),
        Step("claimed", T0, 4.0),
        Step("started", T0 + timedelta(seconds=0.25), 0.25),
        Step("finished", T0 + timedelta(seconds=2.25), 2.0),
    ]


def test_a_lost_attempt_has_no_start_and_ends_lost() -> None:
    lost = attempt(
        outcome="lost", started_at=None, run_seconds=None, wait_seconds=None,
        finished_at=T0 + timedelta(seconds=60),
    )  # fmt: skip
    assert steps(lost) == [Step("claimed", T0), Step("lost", T0 + timedelta(seconds=60), 60.0)]


def test_the_last_error_belongs_to_the_latest_attempt_with_one() -> None:
    rows = [
        attempt(attempt=1, outcome="retry", error="E: 1"),
        attempt(attempt=2, outcome="retry", error="E: 2"),
        attempt(attempt=3),
    ]
    assert error_attempt("E: 2", rows) == 2
    assert error_attempt(None, rows) is None
    assert error_attempt("E: old", [attempt()]) is None  # written before attempts were kept


# -- the same guards as every page and endpoint ---------------------------------------------

TOKEN = "a-token-long-enough-for-the-check"
NEW_PATHS = [
    "/queues/mail",
    "/api/jobs/1/attempts",
    "/api/queues/mail/timings",
    "/api/queues/mail/history",
]


@pytest.mark.parametrize("path", NEW_PATHS)
async def test_the_new_reads_need_the_token_and_refuse_other_sites(
    backend: trioqueue.MemoryBackend, path: str
) -> None:
    await backend.enqueue("mail", {})
    async with client(create_app(backend, token=TOKEN)) as c:
        before = dict(backend.statistics().calls)
        anonymous = await c.get(path)
        cross_site = await c.get(
            path, headers={"Authorization": f"Bearer {TOKEN}", "Sec-Fetch-Site": "cross-site"}
        )
        untouched = dict(backend.statistics().calls) == before
        allowed = await c.get(path, headers={"Authorization": f"Bearer {TOKEN}"})
    page = not path.startswith("/api/")
    assert anonymous.status_code == (303 if page else 401)
    assert cross_site.status_code == 403
    assert untouched  # refused before the backend is read
    assert allowed.status_code == 200
    assert allowed.headers["content-security-policy"].startswith("default-src 'none'")


async def test_the_job_page_shows_the_latest_attempts_only(
    backend: trioqueue.MemoryBackend,
) -> None:
    job_id = await backend.enqueue("mail", {}, max_attempts=MAX_SHOWN_ATTEMPTS + 5)
    for _ in range(MAX_SHOWN_ATTEMPTS + 3):
        await fail_once(backend, await claim(backend), retry=0)
    async with client(create_app(backend)) as c:
        r = await c.get(f"/jobs/{job_id}")
        api = (await c.get(f"/api/jobs/{job_id}/attempts")).json()
    shown = attempts_of(r.text)
    assert len(shown) == MAX_SHOWN_ATTEMPTS
    assert shown[0] == ("4", "retry") and shown[-1] == (str(MAX_SHOWN_ATTEMPTS + 3), "retry")
    assert "3 earlier attempts not shown" in r.text
    assert len(api["attempts"]) == MAX_SHOWN_ATTEMPTS + 3  # the API has them all
