"""The operator's controls in a real browser (docs/dashboard.rst, "Controls", "Audit log",
"Table health"): retry or delete all matching jobs after a confirmation naming the count,
a confirmation gone stale, the schedules' buttons, the audit page, the table-health page,
and read-only mode. Waits on the page are Playwright's ``expect``; on the server, events on
its loop (``_server.py``)."""

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
from trioqueue._types import Failure

from ._server import DashboardServer

pytestmark = [pytest.mark.postgres, pytest.mark.browser]

Shot = Callable[[str], Path]
Serve = Callable[..., DashboardServer]


async def _fail(backend: trioqueue.PostgresBackend, queue: str, n: int) -> list[int]:
    """``n`` jobs of ``queue`` that failed for good (no pool works on it)."""
    ids = await backend.enqueue_many(queue, [{"n": i} for i in range(n)], max_attempts=1)
    claimed = await backend.claim(queue, limit=n, worker_id="test", visibility_timeout=60)
    await backend.fail([Failure(c.job.id, c.job.claim_seq, "boom", None) for c in claimed])
    return ids


def failed(server: DashboardServer, queue: str, n: int) -> list[int]:
    return server.call(_fail, server.backend, queue, n)


def test_retry_all_failed_after_confirming_the_count_and_see_it_audited(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    server = serve_dashboard()
    ids = failed(server, "mail", 3)
    failed(server, "sms", 1)
    page.goto(f"{server.url}/jobs?queue=mail&status=failed")
    form = page.get_by_test_id("matching-form")
    expect(form).to_contain_text("All 3 matching")
    screenshot("controls-jobs-matching")
    page.get_by_test_id("matching-retry").click()
    expect(page.get_by_test_id("confirm-question")).to_have_text(
        "Retry all 3 failed jobs matching queue=mail status=failed?"
    )
    screenshot("controls-confirm-retry")
    page.get_by_test_id("confirm-button").click()
    expect(page).to_have_url(re.compile(r"/jobs\?queue=mail&status=failed"))
    expect(page.get_by_test_id("job-total")).to_contain_text("no jobs")
    assert [server.job(i).status for i in ids] == ["ready"] * 3
    page.locator("#nav-audit").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Audit log")
    row = page.get_by_test_id("audit-row")
    expect(row).to_have_count(1)
    expect(row.get_by_test_id("audit-row-action")).to_have_text("jobs.retry_matching")
    expect(row.get_by_test_id("audit-row-target")).to_have_text("queue=mail status=failed")
    expect(row.get_by_test_id("audit-row-session")).to_have_text("open")
    expect(row.get_by_test_id("audit-row-detail")).to_contain_text('"done": 3')
    screenshot("controls-audit")


def test_a_delete_confirmed_after_more_jobs_matched_does_nothing(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    server = serve_dashboard()
    failed(server, "mail", 2)
    page.goto(f"{server.url}/jobs?queue=mail")
    page.get_by_test_id("matching-delete").click()
    expect(page.get_by_test_id("confirm-question")).to_have_text(
        "Delete all 2 jobs matching queue=mail? This cannot be undone."
    )
    failed(server, "mail", 1)  # one more arrives before the click
    page.get_by_test_id("confirm-button").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("The count changed")
    expect(page.locator("main")).to_contain_text("3 jobs match now, more than the 2 confirmed")
    screenshot("controls-stale-confirmation")
    assert server.call(server.backend.count_jobs, "mail") == 3
    # Going back and confirming the new count deletes them.
    page.goto(f"{server.url}/jobs?queue=mail")
    page.get_by_test_id("matching-delete").click()
    expect(page.get_by_test_id("confirm-question")).to_contain_text("Delete all 3 jobs")
    page.get_by_test_id("confirm-button").click()
    expect(page.get_by_test_id("job-total")).to_contain_text("no jobs")
    assert server.call(server.backend.count_jobs, "mail") == 0


def test_disable_run_and_enable_a_schedule(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    server = serve_dashboard()
    server.call(server.backend.set_schedule, "nightly", "reports", "30 2 * * *", {"kind": "daily"})
    page.goto(f"{server.url}/schedules")
    row = page.locator('[data-testid=schedule-row][data-schedule="nightly"]')
    expect(row.get_by_test_id("schedule-enabled")).to_have_text("yes")
    row.get_by_test_id("schedule-disable").click()
    expect(page.get_by_test_id("confirm-question")).to_contain_text("Disable schedule nightly?")
    page.get_by_test_id("confirm-button").click()
    expect(page).to_have_url(re.compile(r"/schedules$"))
    expect(row.get_by_test_id("schedule-enabled")).to_have_text("disabled")
    screenshot("controls-schedule-disabled")
    row.get_by_test_id("schedule-run").click()
    expect(page.get_by_test_id("confirm-question")).to_contain_text("Run schedule nightly now?")
    page.get_by_test_id("confirm-button").click()
    expect(page).to_have_url(re.compile(r"/schedules$"))
    [job] = server.call(server.backend.list_jobs, "reports")
    assert job.payload == {"kind": "daily"}
    row.get_by_test_id("schedule-enable").click()  # no confirmation: it changes no job
    expect(row.get_by_test_id("schedule-enabled")).to_have_text("yes")
    [info] = server.call(server.backend.list_schedules)
    assert info.enabled is True
    entries = server.call(server.backend.list_audit)
    assert [e.action for e in entries] == [
        "schedule.enable",
        "schedule.run_now",
        "schedule.disable",
    ]


def test_table_health_shows_the_tables_and_the_oldest_ready_job(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    server = serve_dashboard()
    oldest = server.enqueue("mail", {"n": 0})
    server.enqueue("mail", {"n": 1})
    page.goto(server.url)
    page.locator("#nav-tables").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Table health")
    jobs = page.locator('[data-testid=table-row][data-table="jobs"]')
    expect(jobs.get_by_test_id("table-size")).to_have_text(re.compile(r"^\d+(\.\d)? (B|KiB|MiB)$"))
    expect(page.locator('[data-testid=index-row][data-index="jobs_pkey"]')).to_have_count(1)
    expect(page.get_by_test_id("oldest-ready")).to_contain_text(f"job {oldest}")
    expect(page.get_by_test_id("oldest-running")).to_have_text("none running")
    screenshot("controls-tables")


def test_read_only_shows_no_control_and_refuses_them(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    server = serve_dashboard(read_only=True)
    ids = failed(server, "mail", 2)
    server.call(server.backend.set_schedule, "nightly", "reports", "30 2 * * *")
    page.goto(f"{server.url}/jobs?queue=mail")
    expect(page.get_by_test_id("job-row")).to_have_count(2)
    expect(page.get_by_test_id("matching-form")).to_have_count(0)
    page.goto(f"{server.url}/schedules")
    expect(page.get_by_test_id("schedule-row")).to_have_count(1)
    expect(page.get_by_test_id("schedule-actions")).to_have_count(0)
    screenshot("controls-read-only-schedules")
    # Posted anyway, from the page's own origin: 403, nothing done, nothing recorded.
    for path, body in (
        ("/api/jobs/retry", '{"expected": 2}'),
        ("/api/jobs/delete", '{"expected": 2}'),
        ("/api/schedules/nightly/disable", ""),
        ("/api/schedules/nightly/run", ""),
    ):
        status = page.evaluate(
            "([path, body]) => fetch(path, {method: 'POST', body: body || undefined, "
            "headers: {'Content-Type': 'application/json'}}).then(r => r.status)",
            [path, body],
        )
        assert status == 403, path
    assert [server.job(i).status for i in ids] == ["failed", "failed"]
    assert server.call(server.backend.list_schedules)[0].enabled is True
    assert server.call(server.backend.list_audit) == []


def test_set_a_queues_limits_on_its_page(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    server = serve_dashboard()
    server.enqueue("mail", {"n": 0})
    response = page.goto(f"{server.url}/queues/mail")
    assert response is not None
    if response.status == 404 or page.get_by_test_id("limits-form").count() == 0:
        pytest.skip("the queue page (another change) does not include _queue_controls.html yet")
    page.get_by_test_id("limit-running").fill("3")
    page.get_by_test_id("limits-save").click()
    expect(page.get_by_test_id("limit-running")).to_have_value("3")
    stats = server.call(server.backend.queue_stats)["mail"]
    assert (stats.max_running, stats.max_per_second) == (3, None)
    screenshot("controls-queue-limits")
