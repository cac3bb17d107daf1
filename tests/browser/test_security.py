"""The dashboard's HTTP defences in a real browser (docs/dashboard.rst, "Safety rules").

A page of another site framing the dashboard (sandboxed, so the page's scripts and with them
its confirmation dialogs are off) gets no dashboard at all; a browser without JavaScript
must confirm a delete on a page of its own before the job goes; and no page breaks its own
Content-Security-Policy (chromium reports every refused inline script or style on the
console).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

if not os.environ.get("CI"):  # under CI a missing playwright is an error, not a skip
    pytest.importorskip("playwright")
from playwright.sync_api import Page, expect

import trioqueue

from ._server import CSP_REFUSAL, TOKEN, DashboardServer

pytestmark = [pytest.mark.postgres, pytest.mark.browser]

Shot = Callable[[str], Path]
Serve = Callable[..., DashboardServer]


def test_a_sandboxed_frame_on_another_site_gets_no_dashboard(
    dashboard: DashboardServer, page: Page, screenshot: Shot
) -> None:
    """The issue's frame: scripts off, forms and same-origin on; one click would delete."""
    job_id = dashboard.enqueue("mail", {})
    target = f"{dashboard.url}/jobs/{job_id}"
    with page.expect_response(target) as framed:
        page.set_content(
            f'<iframe id="f" sandbox="allow-forms allow-same-origin" src="{target}"'
            ' width="900" height="400"></iframe>'
        )
    assert framed.value.headers["x-frame-options"] == "DENY"
    page.wait_for_load_state("load")  # the frame's document (or the browser's refusal)
    [frame] = [f for f in page.frames if f is not page.main_frame]
    assert not frame.url.startswith(dashboard.url)  # chromium's error page instead
    assert frame.locator("[data-testid=delete-button]").count() == 0
    screenshot("security-framed")
    dashboard.job(job_id)  # still there


def test_a_delete_without_javascript_asks_on_a_page_first(
    dashboard: DashboardServer, browser: Any, artifacts: Path
) -> None:
    job_id = dashboard.enqueue("mail", {})
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(f"{dashboard.url}/jobs/{job_id}")
        page.get_by_test_id("delete-button").click()
        expect(page.get_by_test_id("confirm-question")).to_contain_text(f"Delete job {job_id}?")
        # (The screenshot fixture shoots its own page, which has JavaScript.)
        page.screenshot(path=str(artifacts / "security-confirm-delete.png"), full_page=True)
        dashboard.job(job_id)  # one click deleted nothing
        page.get_by_test_id("confirm-button").click()
        expect(page).to_have_url(f"{dashboard.url}/jobs")
        with pytest.raises(trioqueue.UnknownJobError):
            dashboard.job(job_id)
    finally:
        context.close()


def test_no_page_breaks_its_content_security_policy(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    server = serve_dashboard(pool=True, token=TOKEN, events_interval=0.25)
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if CSP_REFUSAL.search(m.text) else None)
    login = page.goto(f"{server.url}/login")
    assert login is not None and "script-src 'self'" in login.headers["content-security-policy"]
    page.get_by_test_id("login-token").fill(TOKEN)
    page.get_by_test_id("login-button").click()
    expect(page.get_by_test_id("logout-button")).to_be_visible()
    job_id = server.start_job(steps=2)
    server.release(job_id)
    server.wait_reached(job_id, 2)  # progress 50 %
    server.call(server.backend.set_schedule, "nightly", "reports", "30 2 * * *")
    for path in ("/", "/jobs", f"/jobs/{job_id}", "/workers", "/schedules"):
        response = page.goto(f"{server.url}{path}")
        assert response is not None and "content-security-policy" in response.headers
        expect(page.get_by_test_id("live-status")).not_to_have_text("offline")
    assert refused == []
    # The page is rendered once here: wait until the renewal has stored the 50 %.
    server.wait_progress(job_id, 0.5)
    page.goto(f"{server.url}/jobs/{job_id}")
    # The bar's width comes from dashboard.js now (no style attribute): 50 % of the bar.
    fill = page.locator("#job-progress .fill")
    expect(fill).to_have_attribute("data-fill", "50.0")
    expect(fill).to_have_attribute("style", re.compile(r"width: 50(\.0)?%"))
    screenshot("security-csp-job")
    server.release(job_id)
