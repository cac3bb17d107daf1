"""The Retention page in a real browser (docs/dashboard.rst, "Retention"): a queue's policy
set through its form and the confirmation, shown on the page, on the queue's page and in
the audit log; and a page without forms in read-only mode. Waits on the page are
Playwright's ``expect``."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

if not os.environ.get("CI"):  # under CI a missing playwright is an error, not a skip
    pytest.importorskip("playwright")
from playwright.sync_api import Page, expect

from ._server import DashboardServer

pytestmark = [pytest.mark.postgres, pytest.mark.browser]

Shot = Callable[[str], Path]
Serve = Callable[..., DashboardServer]


def test_set_a_queues_retention_through_the_confirmation(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    server = serve_dashboard()
    page.goto(f"{server.url}/")
    page.locator("#nav-retention").click()
    expect(page.get_by_test_id("retention-default")).to_contain_text("7d")
    expect(page.get_by_test_id("no-maintainer")).to_be_visible()
    form = page.get_by_test_id("retention-queue-form")
    form.get_by_test_id("retention-queue-name").fill("mail")
    form.get_by_test_id("queue-succeeded").fill("36")
    form.get_by_test_id("queue-succeeded-unit").select_option("h")
    form.get_by_test_id("queue-failed").fill("")
    screenshot("retention-page")
    form.get_by_test_id("retention-queue-save").click()
    expect(page.get_by_test_id("confirm-question")).to_contain_text(
        "Keep the succeeded jobs of queue mail 1d 12h and its failed jobs forever?"
    )
    page.get_by_test_id("confirm-button").click()
    expect(page).to_have_url(re.compile(r"/retention$"))
    row = page.locator('[data-testid="retention-queue"][data-queue="mail"]')
    expect(row.get_by_test_id("keep-succeeded")).to_have_text("1d 12h")
    expect(row.get_by_test_id("keep-failed")).to_have_text("forever")
    page.goto(f"{server.url}/queues/mail")
    expect(page.get_by_test_id("queue-retention")).to_contain_text(
        "succeeded kept 1d 12h, failed forever"
    )
    page.goto(f"{server.url}/audit")
    expect(page.get_by_test_id("audit-row").first).to_have_attribute("data-action", "retention.set")


def test_read_only_shows_the_policies_without_forms(serve_dashboard: Serve, page: Page) -> None:
    server = serve_dashboard(read_only=True)
    page.goto(f"{server.url}/retention")
    expect(page.get_by_test_id("keep-audit")).to_have_text("90d")
    expect(page.get_by_test_id("retention-controls")).to_have_count(0)
    expect(page.get_by_test_id("retention-clear")).to_have_count(0)
