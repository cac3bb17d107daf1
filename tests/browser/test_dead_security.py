"""The dead-letter surface's defences in a real browser (docs/dashboard.rst, "Safety
rules", "Dead letters"): another site's page (a server of its own, reached as localhost)
can neither frame ``/dead`` nor redrive by a form or a ``fetch``; hostile queue names, errors
and error types stored in the jobs run no script and break no Content-Security-Policy;
and without the token ``/dead`` asks to log in, then comes back. The foreign Host header
and the body limit are HTTP-level checks: tests/unit/test_web_dead_security.py."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

if not os.environ.get("CI"):  # under CI a missing playwright is an error, not a skip
    pytest.importorskip("playwright")
from playwright.sync_api import Dialog, Page, expect

from .._web_harness import dead_letter
from ._server import CSP_REFUSAL, TOKEN, DashboardServer

pytestmark = [pytest.mark.postgres, pytest.mark.browser]

Shot = Callable[[str], Path]
Serve = Callable[..., DashboardServer]
HOSTILE_QUEUE = '"><img src=x onerror=alert(1)>'
HOSTILE_ERROR = "ValueError: </code><script>alert(2)</script>"
HOSTILE_TYPE = "evil.<svg/onload=alert(3)>"


@pytest.fixture
def attacker() -> Iterator[Callable[[str], str]]:
    """``attacker(body)``: the URL of a page of another site serving ``body``: a server
    of its own, reached as ``localhost`` (the dashboard is ``127.0.0.1``, another site
    to the browser). A real loopback server, since chromium's local network access
    checks stop a page it cannot place (one Playwright answers for) from reaching
    127.0.0.1 at all, and here it is the dashboard's own refusals that are tested."""
    pages: dict[str, bytes] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path, b"")
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def serve(body: str) -> str:
        path = f"/page{len(pages)}"
        pages[path] = body.encode()
        return f"http://localhost:{server.server_address[1]}{path}"

    try:
        yield serve
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


def test_another_site_can_neither_frame_the_page_nor_redrive(
    serve_dashboard: Serve, page: Page, screenshot: Shot, attacker: Callable[[str], str]
) -> None:
    server = serve_dashboard()
    job_id = server.call(dead_letter, server.backend)
    dead = f"{server.url}/dead"
    site = attacker(
        f'<iframe id="f" sandbox="allow-forms allow-same-origin" src="{dead}"></iframe>'
        f'<form id="form" method="post" action="{dead}/redrive">'
        '<input name="expected" value="1"><input name="confirmed" value="yes"></form>',
    )
    with page.expect_response(dead) as framed:
        page.goto(site)
    assert framed.value.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in framed.value.headers["content-security-policy"]
    page.wait_for_load_state("load")
    [frame] = [f for f in page.frames if f is not page.main_frame]
    assert not frame.url.startswith(server.url)  # chromium's error page instead
    assert frame.get_by_test_id("redrive-button").count() == 0
    # A fetch the browser sends with the visitor's cookies, no CORS preflight (text/plain).
    status = page.evaluate(
        """async (url) => {
            try {
                await fetch(url, {method: "POST", mode: "no-cors", credentials: "include",
                                  headers: {"Content-Type": "text/plain"},
                                  body: JSON.stringify({expected: 1})});
                return "sent";
            } catch (e) { return "failed: " + e; }
        }""",
        f"{server.url}/api/dead/redrive",
    )
    assert status == "sent"  # opaque: the page learns nothing; the server refused it
    with page.expect_response(f"{dead}/redrive") as posted:
        page.evaluate("document.getElementById('form').submit()")
    assert posted.value.status == 403
    expect(page.locator("body")).to_contain_text("cross-site request refused")
    screenshot("dead-security-cross-site-post")
    assert server.job(job_id).status == "failed"  # neither redrove it
    assert server.call(server.backend.list_audit) == []


def test_hostile_names_run_no_script_and_break_no_policy(
    serve_dashboard: Serve, page: Page, screenshot: Shot
) -> None:
    server = serve_dashboard()
    server.call(dead_letter, server.backend, HOSTILE_QUEUE, HOSTILE_ERROR, HOSTILE_TYPE)
    dialogs: list[str] = []
    refused: list[str] = []

    def dialog(opened: Dialog) -> None:
        dialogs.append(opened.message)
        opened.dismiss()

    page.on("dialog", dialog)
    page.on("console", lambda m: refused.append(m.text) if CSP_REFUSAL.search(m.text) else None)
    page.goto(f"{server.url}/dead")
    row = page.get_by_test_id("dead-row")
    expect(row).to_have_count(1)
    expect(row).to_contain_text(HOSTILE_QUEUE)  # shown as text
    expect(row).to_contain_text(HOSTILE_ERROR)
    expect(row).to_contain_text(HOSTILE_TYPE)
    assert page.locator("img[src=x], svg, #dead-table script").count() == 0
    # The breakdown's link carries the name into the filter, still as text.
    page.get_by_test_id("dead-by-queue").get_by_role("link", name=HOSTILE_QUEUE).click()
    expect(page.get_by_test_id("dead-queue")).to_have_value(HOSTILE_QUEUE)
    expect(page.get_by_test_id("dead-total")).to_have_attribute("data-total", "1")
    page.get_by_test_id("dead-by-type").get_by_role("link", name=HOSTILE_TYPE).click()
    expect(page.get_by_test_id("dead-error-type")).to_have_value(HOSTILE_TYPE)
    page.get_by_test_id("redrive-button").click()
    expect(page.get_by_test_id("confirm-question")).to_contain_text(HOSTILE_QUEUE)
    screenshot("dead-security-hostile-confirm")
    assert dialogs == [] and refused == []


def test_without_the_token_the_page_asks_to_log_in_then_comes_back(
    serve_dashboard: Serve, page: Page
) -> None:
    server = serve_dashboard(token=TOKEN)
    server.call(dead_letter, server.backend)
    page.goto(f"{server.url}/dead?error_type=builtins.ValueError")
    expect(page).to_have_url(re.compile(r"/login\?next="))
    assert page.get_by_test_id("dead-row").count() == 0
    answer: Any = page.request.get(f"{server.url}/api/dead")
    assert answer.status == 401 and "boom" not in answer.text()
    page.get_by_test_id("login-token").fill(TOKEN)
    page.get_by_test_id("login-button").click()
    expect(page).to_have_url(f"{server.url}/dead?error_type=builtins.ValueError")
    expect(page.get_by_test_id("dead-row")).to_have_count(1)
