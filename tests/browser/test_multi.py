"""One dashboard over several databases in a real browser (docs/dashboard.rst, "Several
databases"): a database's pages under ``/db/NAME/`` work as at the root, their script
included: the Pause button posts to that database's JSON API, and the live events under
the prefix reload the row.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

if not os.environ.get("CI"):  # under CI a missing playwright is an error, not a skip
    pytest.importorskip("playwright")
from playwright.sync_api import Page, expect

from ._server import DashboardServer

pytestmark = [pytest.mark.postgres, pytest.mark.browser]

Serve = Callable[..., DashboardServer]


def test_pause_a_queue_under_a_databases_prefix(serve_dashboard: Serve, page: Page) -> None:
    server = serve_dashboard(database="main", events_interval=0.25)
    backend = server.backend
    server.enqueue("mail", {"n": 0})
    page.goto(server.url)
    expect(page.get_by_test_id("database-banner")).to_contain_text("database main")
    assert page.url.endswith("/db/main/")
    mail = page.locator('[data-testid=queue-row][data-queue="mail"]')
    page.on("dialog", lambda dialog: dialog.accept())
    with page.expect_response(lambda r: "/api/queues/" in r.url) as posted:
        mail.get_by_test_id("pause-button").click()
    assert posted.value.url.endswith("/db/main/api/queues/mail/pause")
    assert posted.value.status == 200
    expect(mail.get_by_test_id("queue-paused")).to_have_text("paused")
    assert server.call(backend.queue_stats)["mail"].paused is True
    server.call(backend.resume_queue, "mail")  # the event stream under the prefix says so
    expect(mail.get_by_test_id("queue-paused")).to_have_text("no")
    page.get_by_test_id("database-banner").get_by_role("link").click()
    expect(page.get_by_test_id("database-link")).to_have_text("main")
