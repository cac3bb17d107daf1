"""The browser test infrastructure itself: chromium, Playwright, a served dashboard."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ._server import DashboardServer

pytestmark = [pytest.mark.postgres, pytest.mark.browser]


def test_browser_reads_the_json_api(
    serve_dashboard: Callable[..., DashboardServer],
    page: Any,
    screenshot: Callable[[str], Path],
) -> None:
    """Chromium, driven by Playwright, gets the queue counts from a live dashboard."""
    server = serve_dashboard()
    server.enqueue("mail", {"to": "a"})
    server.enqueue("mail", {"to": "b"})
    response = page.goto(f"{server.url}/api/queues")
    assert response is not None and response.status == 200
    body = json.loads(page.inner_text("body"))
    assert [(q["queue"], q["counts"]) for q in body] == [("mail", {"ready": 2})]
    screenshot("api-queues")


#: True once the JSON API shows job ``id`` running with ``progress`` at least ``min``.
#: wait_for_function polls a predicate but does not await a promise, hence the synchronous
#: request.
PROGRESS_AT_LEAST = """
([id, min]) => {
    const request = new XMLHttpRequest();
    request.open("GET", `/api/jobs/${id}`, false);
    request.send();
    const job = JSON.parse(request.responseText);
    return job.status === "running" && job.progress !== null && job.progress >= min;
}
"""


def test_pool_progress_reaches_the_api(
    dashboard: DashboardServer, page: Any, screenshot: Callable[[str], Path]
) -> None:
    """The harness's pool runs a stepped job whose stored progress follows the steps."""
    job_id = dashboard.start_job(steps=4)
    page.goto(f"{dashboard.url}/api/queues")
    page.wait_for_function(PROGRESS_AT_LEAST, arg=[job_id, 0.0], polling=100)
    dashboard.release(job_id)
    dashboard.wait_reached(job_id, 2)
    page.wait_for_function(PROGRESS_AT_LEAST, arg=[job_id, 0.25], polling=100)
    response = page.goto(f"{dashboard.url}/api/jobs/{job_id}")
    assert response is not None and response.status == 200
    assert json.loads(page.inner_text("body"))["progress"] == 0.25
    screenshot("api-job-running")
    dashboard.release(job_id, 3)
    finished = dashboard.wait_finished(job_id)
    assert (finished.status, finished.progress) == ("succeeded", 1.0)


def test_cancel_from_the_page_stops_the_running_job(dashboard: DashboardServer, page: Any) -> None:
    """A same-origin POST from the page (chromium sets Origin) cancels a running job."""
    job_id = dashboard.start_job(steps=2)
    page.goto(f"{dashboard.url}/api/queues")
    answer = page.evaluate(
        """async (id) => {
            const response = await fetch(`/api/jobs/${id}/cancel`, {method: "POST"});
            return [response.status, await response.json()];
        }""",
        job_id,
    )
    assert answer == [200, {"ok": True}]
    finished = dashboard.wait_finished(job_id)
    assert finished.status == "failed"
    assert finished.last_error is not None
    assert finished.last_error.startswith("cancelled")
