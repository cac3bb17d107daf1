"""The Dead letters page in a real browser (docs/dashboard.rst, "Dead letters"): the count
and breakdown, a filter by error type from the breakdown's link, and a redrive confirmed by
its count, audited. Waits on the page are Playwright's ``expect``."""

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


async def _fail(
    backend: trioqueue.PostgresBackend, queue: str, n: int, error_type: str
) -> list[int]:
    """``n`` jobs of ``queue`` whose one attempt raised ``error_type``."""
    ids = await backend.enqueue_many(queue, [{"n": i} for i in range(n)], max_attempts=1)
    claimed = await backend.claim(queue, limit=n, worker_id="test", visibility_timeout=60)
    failures = [
        Failure(c.job.id, c.job.claim_seq, f"{error_type}: boom", None, error_type=error_type)
        for c in claimed
    ]
    await backend.fail(failures)
    return ids


def test_filter_by_error_type_and_redrive_after_confirming_the_count(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    server = serve_dashboard()
    slow = server.call(_fail, server.backend, "mail", 2, "TimeoutError")
    bad = server.call(_fail, server.backend, "mail", 1, "KeyError")
    page.goto(f"{server.url}/")
    page.locator("#nav-dead").click()
    expect(page.get_by_test_id("dead-total")).to_have_attribute("data-total", "3")
    expect(page.get_by_test_id("dead-row")).to_have_count(3)
    screenshot("dead-letters")
    page.get_by_test_id("dead-by-type").get_by_role("link", name="TimeoutError").click()
    expect(page).to_have_url(re.compile(r"/dead\?error_type=TimeoutError$"))
    expect(page.get_by_test_id("dead-total")).to_have_attribute("data-total", "2")
    page.get_by_test_id("redrive-button").click()
    expect(page.get_by_test_id("confirm-question")).to_contain_text(
        "Redrive all 2 dead letters matching error_type=TimeoutError?"
    )
    page.get_by_test_id("confirm-button").click()
    expect(page).to_have_url(re.compile(r"/dead\?error_type=TimeoutError$"))
    expect(page.get_by_test_id("dead-total")).to_have_attribute("data-total", "0")
    assert [server.job(i).status for i in slow] == ["ready", "ready"]
    assert [server.job(i).status for i in bad] == ["failed"]
    page.locator("#nav-audit").click()
    row = page.get_by_test_id("audit-row")
    expect(row.get_by_test_id("audit-row-action")).to_have_text("dead.redrive")
    expect(row.get_by_test_id("audit-row-target")).to_have_text("error_type=TimeoutError")
