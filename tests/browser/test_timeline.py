"""The dashboard's attempt history in a real browser: the job timeline with a traceback
unfolded, the queue page's charts, and the job list's cancelled filter.

Attempts are written through the backend's own calls on a queue no pool works on
(``claim``, then ``fail`` or ``ack`` with the timing and traceback a worker would send),
so each test knows exactly what the page must show.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

if not os.environ.get("CI"):  # under CI a missing playwright is an error, not a skip
    pytest.importorskip("playwright")
from playwright.sync_api import Page, expect

import trioqueue
from trioqueue._types import Ack, AttemptTiming, Failure

from ._server import DashboardServer

pytestmark = [pytest.mark.postgres, pytest.mark.browser]

Shot = Callable[[str], Path]
Serve = Callable[..., DashboardServer]
QUEUE = "mail"  # not the pool's: the test writes each attempt itself
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "app.py", line 7, in send\n'
    "    raise ConnectionError(host)\n"
    "ConnectionError: <smtp> \u202erefused"
)


def claim(server: DashboardServer) -> trioqueue.Job:
    [claimed] = server.call(
        server.backend.claim, QUEUE, limit=1, worker_id="w-browser", visibility_timeout=60
    )
    return claimed.job


def fail(server: DashboardServer, job: trioqueue.Job, retry: float | None) -> None:
    failure = Failure(
        job.id,
        job.claim_seq,
        "ConnectionError: <smtp> \u202erefused",
        retry,
        timing=AttemptTiming(started_after=0.01, run_seconds=1.0),
        error_type="ConnectionError",
        traceback=TRACEBACK,
    )
    server.call(server.backend.fail, [failure])


def ack(server: DashboardServer, job: trioqueue.Job, run: float) -> None:
    server.call(server.backend.ack, [Ack(job.id, job.claim_seq, timing=AttemptTiming(0.01, run))])


def test_the_timeline_unfolds_a_traceback(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    server = serve_dashboard()
    job_id = server.enqueue(QUEUE, {"to": "a"}, max_attempts=2)
    fail(server, claim(server), retry=0.0)
    ack(server, claim(server), run=0.5)
    page.goto(f"{server.url}/jobs/{job_id}")
    attempts = page.get_by_test_id("attempt")
    expect(attempts).to_have_count(2)
    expect(attempts.get_by_test_id("attempt-outcome")).to_have_text(
        ["failed, retried", "succeeded"]
    )
    first = attempts.first
    expect(first.get_by_test_id("attempt-worker")).to_contain_text("w-browser")
    expect(first.get_by_test_id("attempt-run")).to_have_text("1s")
    expect(first.get_by_test_id("attempt-error")).to_have_text(
        "ConnectionError: <smtp> \\u202erefused"
    )
    expect(page.get_by_test_id("job-last-error-title")).to_have_text("Error of attempt 1")

    details = first.get_by_test_id("attempt-traceback")
    body = details.locator("pre")
    expect(body).not_to_be_visible()  # folded until asked
    details.locator("summary").click()
    expect(body).to_be_visible()
    expect(body).to_contain_text('File "app.py", line 7, in send')
    expect(body).to_contain_text("ConnectionError: <smtp> \\u202erefused")
    screenshot("job-timeline-traceback")


def test_the_queue_page_draws_its_charts(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    server = serve_dashboard()
    for run in (1.0, 1.0, 3.0):
        server.enqueue(QUEUE, {"run": run})
        ack(server, claim(server), run)
    server.enqueue(QUEUE, {"fails": True}, max_attempts=1)
    fail(server, claim(server), retry=None)
    page.goto(server.url)
    page.locator('[data-testid=queue-row][data-queue="mail"]').get_by_test_id("queue-link").click()
    expect(page).to_have_url(f"{server.url}/queues/mail")
    expect(page.get_by_test_id("queue-name")).to_have_text(QUEUE)
    expect(page.get_by_test_id("timings-attempts")).to_have_text("4 attempts finished")
    expect(page.get_by_test_id("timings-run").locator("td").first).to_have_text("1s")
    for chart in ("throughput-chart", "failures-chart", "run-time-chart", "wait-chart"):
        svg = page.get_by_test_id(chart)
        expect(svg).to_be_visible()
        expect(svg.get_by_test_id("chart-bucket")).to_have_count(60)
        expect(svg.get_by_test_id("chart-x-label")).to_have_count(3)
    throughput = page.get_by_test_id("throughput-chart")
    expect(throughput.locator("title").first).to_have_text(
        re.compile(r"^Attempts of mail that succeeded .*: 3 in all$")
    )
    # 3 in one minute (top 5), or 2 and 1 across a minute's turn (top 2)
    expect(throughput.get_by_test_id("chart-y-top")).to_have_text(re.compile(r"^[25]$"))
    expect(page.get_by_test_id("failures-chart").locator("rect.failed")).to_have_count(1)
    # the busiest minute's p95 of runs of 1, 1, 1 and 3 s is 2.7 s or more: the top is 5 s
    run_top = page.get_by_test_id("run-time-chart").get_by_test_id("chart-y-top")
    expect(run_top).to_have_text("5s")
    screenshot("queue-page")


def test_the_job_list_filters_cancellations(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    server = serve_dashboard()
    failed = server.enqueue(QUEUE, {"n": 1}, max_attempts=1)
    fail(server, claim(server), retry=None)
    cancelled = server.enqueue(QUEUE, {"n": 2})
    assert server.call(server.backend.cancel, cancelled)
    page.goto(f"{server.url}/jobs?status=failed")
    rows = page.get_by_test_id("job-row")
    expect(rows).to_have_count(2)

    page.get_by_test_id("filter-cancelled").select_option("true")
    page.get_by_test_id("filter-apply").click()
    expect(page).to_have_url(re.compile(r"[?&]cancelled=true"))
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-job-id", str(cancelled))
    expect(rows.first.get_by_test_id("job-cancelled")).to_have_text("cancelled")
    screenshot("jobs-cancelled-only")

    page.get_by_test_id("filter-cancelled").select_option("false")
    page.get_by_test_id("filter-apply").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-job-id", str(failed))
    expect(rows.first.get_by_test_id("job-took")).not_to_have_text("–")


@pytest.mark.parametrize("width", [1280, 1024])
def test_the_new_pages_fit_the_window(
    serve_dashboard: Serve, page: Page, screenshot: Shot, width: int
) -> None:
    """A long queue name, a long error and a traceback with long lines: neither the
    queue page nor the job's timeline is wider than the window (their long lines wrap,
    or scroll inside their own box)."""
    server = serve_dashboard()
    long_queue = "q-" + "x" * 126
    job_id = server.enqueue(long_queue, {"n": 1}, max_attempts=1)
    [claimed] = server.call(
        server.backend.claim, long_queue, limit=1, worker_id="w-" + "y" * 200, visibility_timeout=60
    )
    failure = Failure(
        job_id,
        claimed.job.claim_seq,
        "RuntimeError: " + "z" * 600,
        None,
        error_type="RuntimeError",
        traceback="Traceback (most recent call last):\n  " + "frame " * 300 + "\nRuntimeError",
    )
    server.call(server.backend.fail, [failure])
    page.set_viewport_size({"width": width, "height": 800})
    for path, name in ((f"/jobs/{job_id}", "job"), (f"/queues/{long_queue}", "queue")):
        page.goto(server.url + path)
        expect(page.get_by_role("heading", level=1)).to_be_visible()
        if name == "job":
            page.locator("details.traceback summary").click()  # unfolded, it must fit too
            # The card would scroll rather than widen the page: its heading must wrap.
            head = page.evaluate(
                "(e => [e.scrollWidth, e.clientWidth])(document.querySelector('.attempt-head'))"
            )
            assert head[0] <= head[1], f"the attempt's heading at {width} px: {head}"
        widths = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        screenshot(f"width-{width}-timeline-{name}")
        assert widths[0] <= widths[1], f"{path} at {width} px: {widths[0]} px wide"


def test_an_open_job_page_shows_the_attempt_its_pool_ran(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    """A pool runs the job while its page is open: the page reloads itself when the job
    finishes, and the timeline has the attempt, run by that pool on its host."""
    server = serve_dashboard(pool=True, events_interval=0.25)
    job_id = server.start_job(steps=1)
    [pool] = server.wait_workers(lambda pools: len(pools) == 1)
    page.goto(f"{server.url}/jobs/{job_id}")
    expect(page.get_by_test_id("attempt")).to_have_attribute("data-outcome", "running")
    server.release(job_id)
    server.wait_finished(job_id)
    attempt = page.get_by_test_id("attempt")
    expect(attempt).to_have_attribute("data-outcome", "succeeded")
    expect(attempt.get_by_test_id("attempt-worker")).to_have_text(
        f"on {pool.worker_id} ({pool.host})"
    )
    expect(page.get_by_test_id("job-finished-by")).to_have_text(pool.worker_id)
    screenshot("job-timeline-pool")
