"""The dashboard's pages in a real browser: overview, job list, job detail, workers, login.

Each test keeps a full-page screenshot of every page it visits (see conftest.py). Waits on
the page are Playwright's ``expect`` (it retries until the page shows the state, or fails
after ``EXPECT_TIMEOUT_MS``); waits on the server are events on its loop (``_server.py``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

if not os.environ.get("CI"):  # under CI a missing playwright is an error, not a skip
    pytest.importorskip("playwright")
from playwright.sync_api import Dialog, Page, Route, expect

import trioqueue

from .._postgres_harness import jobs_table
from ._server import WORK_QUEUE, DashboardServer

pytestmark = [pytest.mark.postgres, pytest.mark.browser]

Shot = Callable[[str], Path]
Serve = Callable[..., DashboardServer]
#: Live updates every quarter second: the default second would only slow the tests.
FAST_EVENTS = {"events_interval": 0.25}


def percent(value: float) -> re.Pattern[str]:
    """A progress bar's ``aria-valuenow`` for ``value`` %, as the server renders it
    (``25.0``) or the live update sets it (``25``)."""
    return re.compile(rf"^{value:g}(\.0)?$")


def mark_page(page: Page) -> None:
    """Tag the loaded document, so :func:`same_page` can tell a reload happened."""
    page.evaluate("window.__notReloaded = true")


def same_page(page: Page) -> bool:
    return bool(page.evaluate("window.__notReloaded === true"))


def test_overview_shows_counts_per_queue(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    server = serve_dashboard(**FAST_EVENTS)
    for n in range(3):
        server.enqueue("mail", {"n": n})
    server.enqueue("sms", {"n": 0})
    page.goto(server.url)
    mail = page.locator('[data-testid=queue-row][data-queue="mail"]')
    sms = page.locator('[data-testid=queue-row][data-queue="sms"]')
    expect(mail.locator("[data-testid=queue-count][data-status=ready]")).to_have_text("3")
    expect(mail.locator("[data-testid=queue-count][data-status=failed]")).to_have_text("0")
    expect(sms.locator("[data-testid=queue-count][data-status=ready]")).to_have_text("1")
    expect(page.get_by_test_id("live-status")).to_have_text("live")
    screenshot("overview")

    mark_page(page)
    server.enqueue("mail", {"n": 3})  # the count follows without a reload
    expect(mail.locator("[data-testid=queue-count][data-status=ready]")).to_have_text("4")
    assert same_page(page)


def test_running_job_moves_then_is_cancelled(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    """Progress bar and lease countdown move on the open page; cancel ends it failed."""
    server = serve_dashboard(pool=True, **FAST_EVENTS)
    job_id = server.start_job(steps=4)
    page.goto(f"{server.url}/jobs/{job_id}")
    expect(page.get_by_test_id("job-status")).to_have_text("running")
    expect(page.get_by_test_id("job-worker")).not_to_have_text("–")
    bar = page.locator("#job-progress").get_by_test_id("progress-bar")
    expect(bar).to_have_attribute("aria-valuenow", percent(0))
    countdown = page.get_by_test_id("lease-countdown")
    expect(countdown).to_have_text(re.compile(r"^\d+s$"))  # time left on a live lease
    rendered = countdown.get_attribute("data-countdown")
    assert rendered
    # The pool renews every 0.5 s, each renewal moving the expiry on (the countdown's text
    # may well stay "2s" with V = 3 s): the page learns of it from the job's events.
    expect(countdown).not_to_have_attribute("data-countdown", rendered)
    expect(countdown).to_have_text(re.compile(r"^\d+s$"))
    screenshot("job-detail")

    mark_page(page)
    server.release(job_id)  # step 2 reports 25 %, sent with the next heartbeat
    server.wait_reached(job_id, 2)
    expect(bar).to_have_attribute("aria-valuenow", percent(25))
    server.release(job_id)
    server.wait_reached(job_id, 3)
    expect(bar).to_have_attribute("aria-valuenow", percent(50))
    expect(bar.get_by_test_id("progress-value")).to_have_text("50%")
    assert same_page(page), "the progress moved by reloading the page, not live"
    screenshot("job-detail-progress")

    dialogs: list[str] = []

    def accept(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.accept()

    page.on("dialog", accept)
    page.get_by_test_id("cancel-button").click()
    expect(page.get_by_test_id("job-status")).to_have_text("failed")
    expect(page.get_by_test_id("job-last-error")).to_contain_text("cancelled")
    expect(page.get_by_test_id("cancel-requested")).to_have_attribute("data-value", "true")
    expect(page.get_by_test_id("cancel-button")).to_have_count(0)
    assert dialogs == [f"Cancel job {job_id}?"]
    screenshot("job-detail-cancelled")
    finished = server.job(job_id)
    assert finished.status == "failed"
    assert finished.last_error is not None and finished.last_error.startswith("cancelled")


def test_cancel_dismissed_leaves_the_job_running(serve_dashboard: Serve, page: Page) -> None:
    server = serve_dashboard(pool=True, **FAST_EVENTS)
    job_id = server.start_job(steps=1)
    page.goto(f"{server.url}/jobs/{job_id}")
    dialogs: list[str] = []

    def dismiss(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    page.get_by_test_id("cancel-button").click()
    assert dialogs == [f"Cancel job {job_id}?"]
    server.release(job_id)
    finished = server.wait_finished(job_id)
    assert (finished.status, finished.cancel_requested_at) == ("succeeded", None)
    expect(page.get_by_test_id("job-status")).to_have_text("succeeded")


def test_job_list_filters_and_pages(serve_dashboard: Serve, page: Page, screenshot: Shot) -> None:
    server = serve_dashboard(**FAST_EVENTS)
    mail = [server.enqueue("mail", {"to": f"user{n}@example.com"}) for n in range(30)]
    server.enqueue("sms", {"to": "+100"})
    for job_id in mail[:3]:
        server.call(server.backend.cancel, job_id)
    page.goto(f"{server.url}/jobs")
    rows = page.get_by_test_id("job-row")
    total = page.get_by_test_id("job-total")
    expect(total).to_have_attribute("data-total", "31")
    screenshot("jobs")

    page.get_by_test_id("filter-queue").select_option("sms")
    page.get_by_test_id("filter-apply").click()
    expect(total).to_have_attribute("data-total", "1")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("+100")

    page.get_by_test_id("filter-queue").select_option("mail")
    page.get_by_test_id("filter-status").select_option("failed")
    page.get_by_test_id("filter-apply").click()
    expect(total).to_have_attribute("data-total", "3")
    expect(rows.get_by_test_id("job-status")).to_have_text(["failed"] * 3)
    screenshot("jobs-filtered")

    page.get_by_test_id("filter-status").select_option("")
    page.get_by_test_id("filter-q").fill("user17@")
    page.get_by_test_id("filter-apply").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-job-id", str(mail[17]))
    expect(page).to_have_url(re.compile(r"[?&]q=user17%40"))


def test_job_list_pages_through_every_job(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    server = serve_dashboard(**FAST_EVENTS)
    ids = [server.enqueue("mail", {"n": n}) for n in range(23)]
    page.goto(f"{server.url}/jobs?queue=mail&limit=10")
    rows = page.get_by_test_id("job-row")
    seen: list[int] = []
    for expected_rows in (10, 10, 3):
        expect(rows).to_have_count(expected_rows)
        seen += [int(r.get_attribute("data-job-id") or 0) for r in rows.all()]
        if len(seen) < len(ids):
            page.get_by_test_id("page-next").click()
    screenshot("jobs-last-page")
    # A page reached by cursor knows its size and the total, not its position
    # (docs/dashboard.rst, "Big tables").
    expect(page.get_by_test_id("job-total")).to_contain_text("3 shown of 23")
    expect(page.get_by_test_id("page-next")).to_have_count(0)
    assert seen == sorted(ids, reverse=True)  # newest first, each job once
    page.get_by_test_id("page-prev").click()
    expect(rows.first).to_have_attribute("data-job-id", str(ids[12]))


def test_workers_page_shows_the_pool(serve_dashboard: Serve, page: Page, screenshot: Shot) -> None:
    server = serve_dashboard(pool=True, concurrency=3, **FAST_EVENTS)
    job_id = server.start_job(steps=1)
    server.wait_workers(lambda pools: [p.in_flight for p in pools] == [1])
    page.goto(f"{server.url}/workers")
    row = page.get_by_test_id("worker-row")
    expect(row).to_have_count(1)
    expect(row).to_contain_text(WORK_QUEUE)
    expect(row.get_by_test_id("worker-state")).to_have_text("live")
    cells = row.locator("td")
    expect(cells.nth(3)).to_have_text(str(os.getpid()))
    expect(cells.nth(5)).to_have_text("3")  # concurrency
    expect(row.get_by_test_id("worker-in-flight")).to_have_text("1")
    screenshot("workers")
    mark_page(page)
    server.release(job_id)
    server.wait_finished(job_id)
    expect(row.get_by_test_id("worker-in-flight")).to_have_text("0")  # read again live
    assert same_page(page)


def test_token_flow(serve_dashboard: Serve, page: Page, screenshot: Shot) -> None:
    """Bound publicly the dashboard needs its token: login form, refusal, cookie."""
    server = serve_dashboard(token="s3cret-token-s3cret-token", **FAST_EVENTS)
    server.enqueue("mail", {})
    page.goto(f"{server.url}/jobs?queue=mail")
    expect(page).to_have_url(re.compile(r"/login\?next=(/|%2F)jobs%3Fqueue%3Dmail$"))
    expect(page.get_by_test_id("login-error")).to_have_count(0)
    screenshot("login")

    page.get_by_test_id("login-token").fill("wrong-token")
    page.get_by_test_id("login-button").click()
    expect(page.get_by_test_id("login-error")).to_be_visible()
    assert page.context.cookies() == []
    screenshot("login-refused")

    page.get_by_test_id("login-token").fill("s3cret-token-s3cret-token")
    page.get_by_test_id("login-button").click()
    expect(page).to_have_url(f"{server.url}/jobs?queue=mail")
    expect(page.get_by_test_id("job-row")).to_have_count(1)
    [cookie] = page.context.cookies()
    # The cookie names a session, never the token itself.
    assert (cookie["name"], cookie["httpOnly"]) == ("trioqueue_session", True)
    assert "s3cret" not in cookie["value"]
    page.goto(server.url)  # the cookie opens every page now
    expect(page.locator('[data-testid=queue-row][data-queue="mail"]')).to_be_visible()
    screenshot("overview-logged-in")


def test_api_without_token_is_refused_in_the_browser(serve_dashboard: Serve, page: Page) -> None:
    server = serve_dashboard(token="s3cret-token-s3cret-token")
    response = page.goto(f"{server.url}/api/queues")
    assert response is not None and response.status == 401


def test_read_only_shows_no_actions(serve_dashboard: Serve, page: Page, screenshot: Shot) -> None:
    server = serve_dashboard(pool=True, read_only=True, **FAST_EVENTS)
    job_id = server.start_job(steps=1)
    server.enqueue("mail", {})
    page.goto(f"{server.url}/jobs/{job_id}")
    expect(page.get_by_test_id("job-status")).to_have_text("running")
    expect(page.get_by_test_id("read-only-badge")).to_be_visible()
    expect(page.get_by_role("button")).to_have_count(0)
    screenshot("job-detail-read-only")
    page.goto(f"{server.url}/jobs")
    expect(page.get_by_test_id("job-row")).to_have_count(2)
    expect(page.get_by_test_id("job-select")).to_have_count(0)
    expect(page.get_by_role("button", name=re.compile("Cancel|Retry|Delete"))).to_have_count(0)
    screenshot("jobs-read-only")
    server.release(job_id)


def test_each_page_loads_without_errors(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    """Every page renders (the page fixture fails on any JavaScript error)."""
    server = serve_dashboard(pool=True, **FAST_EVENTS)
    job_id = server.start_job(steps=1)
    server.release(job_id)
    server.wait_finished(job_id)
    for path, heading in (
        ("/", "Overview"),
        ("/jobs", "Jobs"),
        ("/workers", "Workers"),
        ("/schedules", "Schedules"),
    ):
        response = page.goto(server.url + path)
        assert response is not None and response.status == 200
        expect(page.get_by_role("heading", level=1)).to_have_text(heading)
    page.goto(f"{server.url}/jobs/{job_id}")
    expect(page.get_by_test_id("job-status")).to_have_text("succeeded")
    expect(page.locator("#job-progress").get_by_test_id("progress-bar")).to_have_attribute(
        "aria-valuenow", percent(100)
    )
    screenshot("job-detail-succeeded")
    response = page.goto(f"{server.url}/jobs/{job_id + 1000}")
    assert response is not None and response.status == 404
    screenshot("job-not-found")


def test_metrics_in_the_browser(serve_dashboard: Serve, page: Page, screenshot: Shot) -> None:
    """``/metrics`` is Prometheus text with the database's gauges of this schema."""
    server = serve_dashboard(**FAST_EVENTS)
    server.enqueue("mail", {"n": 1})
    response = page.goto(f"{server.url}/metrics")
    assert response is not None and response.status == 200
    assert response.headers["content-type"].startswith("text/plain")
    body = page.locator("body")
    expect(body).to_contain_text('trioqueue_jobs{queue="mail",status="ready"} 1.0')
    expect(body).to_contain_text('trioqueue_oldest_ready_age_seconds{queue="mail"}')
    screenshot("metrics")


def test_lease_countdown_follows_renewals(serve_dashboard: Serve, page: Page) -> None:
    """An open job page follows the lease: past the first lease's length (V = 3 s) a
    healthy job still shows time left, never "expired"."""
    server = serve_dashboard(pool=True, **FAST_EVENTS)
    job_id = server.start_job(steps=1)
    page.goto(f"{server.url}/jobs/{job_id}")
    countdown = page.get_by_test_id("lease-countdown")
    seen = countdown.get_attribute("data-countdown")
    assert seen
    # The pool renews every 0.5 s; eight renewals seen on the page span more than V.
    for _ in range(8):
        expect(countdown).not_to_have_attribute("data-countdown", seen, timeout=4000)
        now = countdown.get_attribute("data-countdown")
        assert now is not None and now > seen  # ISO times of one zone sort as text
        seen = now
    expect(countdown).to_have_text(re.compile(r"^\d+s$"))
    expect(page.get_by_test_id("heartbeat-age")).to_have_text(re.compile(r"^[0-2]s ago$"))
    server.release(job_id)


def test_schedules_page_lists_each_schedule_with_its_next_run(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    server = serve_dashboard(**FAST_EVENTS)
    server.call(
        server.backend.set_schedule, "nightly", "reports", "30 2 * * *", timezone="Europe/Berlin"
    )
    server.call(server.backend.set_schedule, "minutely", "pings", "* * * * *", {"ping": 1})
    page.goto(server.url)
    page.locator("#nav-schedules").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Schedules")
    expect(page.locator("#nav-schedules")).to_have_attribute("aria-current", "page")
    rows = page.get_by_test_id("schedule-row")
    expect(rows).to_have_count(2)
    nightly = page.locator('[data-testid=schedule-row][data-schedule="nightly"]')
    # 02:30 in Berlin (03:00 on a spring-forward night), with the zone's offset.
    expect(nightly.get_by_test_id("schedule-next")).to_have_text(
        re.compile(r"^\d{4}-\d\d-\d\d 0(2:30|3:00) \+0[12]00$")
    )
    expect(nightly.get_by_test_id("schedule-last")).to_have_text("never")
    minutely = page.locator('[data-testid=schedule-row][data-schedule="minutely"]')
    expect(minutely).to_contain_text('{"ping": 1}')
    expect(minutely.get_by_test_id("schedule-in")).to_have_text(re.compile(r"^\d+s$"))
    screenshot("schedules")


def test_pause_and_resume_a_queue_from_the_overview(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    """The Pause button (after a confirmation) posts to the JSON API and the row says so;
    limits and a resume set elsewhere show up by themselves (a queue event reloads it)."""
    server = serve_dashboard(**FAST_EVENTS)
    backend = server.backend
    server.enqueue("mail", {"n": 0})
    page.goto(server.url)
    mail = page.locator('[data-testid=queue-row][data-queue="mail"]')
    dialogs: list[str] = []

    def accept(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.accept()

    page.on("dialog", accept)
    mail.get_by_test_id("pause-button").click()
    expect(mail.get_by_test_id("queue-paused")).to_have_text("paused")
    expect(mail.get_by_test_id("resume-button")).to_be_visible()
    assert dialogs == [
        "Pause queue mail? No pool claims from it until it is resumed; running jobs go on."
    ]
    assert server.call(backend.queue_stats)["mail"].paused is True
    screenshot("overview-paused")

    server.call(backend.set_queue_limits, "mail", max_running=5, max_per_second=10.0)
    expect(mail.get_by_test_id("queue-limits")).to_have_text("max 5 running, max 10/s")
    server.call(backend.resume_queue, "mail")
    expect(mail.get_by_test_id("queue-paused")).to_have_text("no")
    mark_page(page)
    expect(mail.get_by_test_id("pause-button")).to_be_visible()
    server.enqueue("mail", {"n": 1})  # settled: a count moves without another reload
    expect(mail.locator("[data-testid=queue-count][data-status=ready]")).to_have_text("2")
    assert same_page(page)


async def _store_as_before(
    backend: trioqueue.PostgresBackend, job_id: int, queue: str, last_error: str | None = None
) -> None:
    """Give a job a queue name (and an error) the backends now refuse, as an earlier
    release could store them."""
    async with backend.acquire() as connection:
        await connection.execute(
            f"UPDATE {jobs_table(backend)} SET queue = $2, last_error = $3 WHERE id = $1",
            job_id,
            queue,
            last_error,
        )


def test_a_cr_in_a_queue_name_does_not_reload_the_overview(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    """HTML reads a CR in an attribute as a LF: the row's name never matched the queue
    event's, and every event reloaded the page (51 reloads in 6 s). The row is matched
    by its JSON name now, and the name shows as ``a\\rb``."""
    server = serve_dashboard(**FAST_EVENTS)
    server.call(_store_as_before, server.backend, server.enqueue("legacy", {}), "a\rb")
    server.enqueue("mail", {})
    page.goto(server.url)
    expect(page.get_by_test_id("live-status")).to_have_text("live")
    mark_page(page)
    server.enqueue("mail", {})  # a queue event after the first ones: the page stays
    mail = page.locator('[data-testid=queue-row][data-queue="mail"]')
    expect(mail.locator("[data-testid=queue-count][data-status=ready]")).to_have_text("2")
    server.enqueue("mail", {})
    expect(mail.locator("[data-testid=queue-count][data-status=ready]")).to_have_text("3")
    assert same_page(page), "the overview reloaded"
    crlf = page.get_by_test_id("queue-row").filter(has_text="a\\rb")
    expect(crlf.locator("[data-testid=queue-count][data-status=ready]")).to_have_text("1")
    screenshot("overview-cr-queue")


def test_a_bidi_override_shows_escaped_on_every_page(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    """``"\\u202eliam"`` would show as ``mail``: every page shows the override as an
    escape instead, in names, groups and errors alike (a traceback keeps its lines)."""
    server = serve_dashboard(**FAST_EVENTS)
    spoof = "\u202eliam"
    job_id = server.enqueue("legacy", {"to": spoof}, group=spoof)
    server.call(_store_as_before, server.backend, job_id, spoof, f"line 1\n{spoof}\x1b[2J")
    shown = "\\u202eliam"

    page.goto(server.url)
    row = page.get_by_test_id("queue-row")
    expect(row.locator("td").first).to_have_text(shown)
    assert spoof not in page.locator("main").inner_text()
    screenshot("overview-bidi")

    page.goto(f"{server.url}/jobs")
    job_row = page.get_by_test_id("job-row")
    expect(job_row.locator("td").nth(2)).to_have_text(shown)
    expect(job_row.locator("td.error-cell")).to_have_text(f"line 1\\n{shown}\\x1b[2J")
    expect(job_row.locator("td.payload")).to_have_text('{"to": "\\u202eliam"}')
    # The filter keeps the stored name itself, so that choosing it finds the job.
    option = page.get_by_test_id("filter-queue").locator("option").nth(1)
    expect(option).to_have_text(shown)
    assert option.get_attribute("value") == spoof
    assert spoof not in page.locator("main").inner_text()

    page.goto(f"{server.url}/jobs/{job_id}")
    expect(page.get_by_test_id("job-queue")).to_have_text(shown)
    expect(page.get_by_test_id("job-group")).to_have_text(shown)
    expect(page.get_by_test_id("job-last-error")).to_have_text(f"line 1\n{shown}\\x1b[2J")
    assert spoof not in page.locator("main").inner_text()
    screenshot("job-detail-bidi")


def test_the_live_badge_says_connecting_until_the_stream_opens(
    serve_dashboard: Serve, page: Page
) -> None:
    """It said "offline" until the event stream connected (issue 22, item 23)."""
    server = serve_dashboard(**FAST_EVENTS)
    held: list[Route] = []
    page.route("**/api/events*", lambda route: held.append(route))  # held unanswered
    with page.expect_request("**/api/events*"):
        page.goto(server.url)
    expect(page.get_by_test_id("live-status")).to_have_text("connecting")
    page.unroute("**/api/events*")  # lets the held request go on
    expect(page.get_by_test_id("live-status")).to_have_text("live")
    assert len(held) == 1


@pytest.mark.parametrize("width", [1280, 1024])
def test_no_page_overflows_the_window(
    serve_dashboard: Serve, page: Page, screenshot: Shot, width: int
) -> None:
    """At 1280 px the job list was 1452 px wide, its Last error column off-screen (issue
    22, item 19): no page may be wider than the window, with long names, payloads,
    errors and schedules in every table."""
    server = serve_dashboard(pool=True, **FAST_EVENTS)
    long_queue = "q-" + "x" * 126
    words = " ".join(["word"] * 60)
    job_id = server.enqueue(long_queue, {"text": words, "key": "y" * 300}, group="g" * 500)
    server.call(
        _store_as_before,
        server.backend,
        job_id,
        long_queue,
        "RuntimeError: " + "z" * 400 + "\n" + words,
    )
    server.call(server.backend.set_schedule, "s" * 128, long_queue, "*/5 * * * *", {"text": words})
    running = server.start_job(steps=1)  # a registered pool for the workers page
    page.set_viewport_size({"width": width, "height": 800})
    pages = {"/": "overview", "/jobs": "jobs", f"/jobs/{job_id}": "job"}
    for path, name in (pages | {"/workers": "workers", "/schedules": "schedules"}).items():
        page.goto(server.url + path)
        expect(page.get_by_role("heading", level=1)).to_be_visible()
        widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        screenshot(f"width-{width}-{name}")
        assert widths[0] <= widths[1], f"{path} at {width} px: {widths[0]} px wide"
    # The job list fits whole, its Last error column on screen without scrolling.
    page.goto(f"{server.url}/jobs")
    fits = page.evaluate(
        "(t => [t.scrollWidth, t.parentElement.clientWidth])(document.getElementById('job-table'))"
    )
    assert fits[0] <= fits[1], f"the job list at {width} px scrolls: {fits}"
    server.release(running)
