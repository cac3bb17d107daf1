"""One dashboard over several databases (``trioqueue.web.create_multi_app``; docs/dashboard.rst,
"Several databases"): two memory backends, each under ``/db/NAME``.

Links, redirects, forms and static files under a prefix; each page naming its database; one
login for both; the Host and same-origin rules under the prefix; hostile names refused,
and queue names shown escaped.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

import trioqueue
from trioqueue.web import create_multi_app

from .._web_harness import SAME_SITE, client

TOKEN = "a-token-long-enough-for-the-check"


@pytest.fixture
async def two() -> AsyncIterator[tuple[trioqueue.MemoryBackend, trioqueue.MemoryBackend]]:
    async with trioqueue.open_memory() as a, trioqueue.open_memory() as b:
        yield a, b


def site_paths(page: str) -> list[str]:
    """Every path of the site a page links, posts or loads (attributes that hold a URL)."""
    pattern = r'\s(?:href|src|action|formaction|hx-get|hx-post|data-events)="(/[^"]*)"'
    return [path for path in re.findall(pattern, page) if not path.startswith("//")]


async def test_each_database_has_its_pages_under_its_prefix(two: Any) -> None:
    a, b = two
    await a.enqueue("emails", {"n": 1})
    await b.enqueue("reports", {"n": 2})
    app = create_multi_app({"main": a, "reporting": b})
    async with client(app) as http:
        for name, queue, other in (
            ("main", "emails", "reports"),
            ("reporting", "reports", "emails"),
        ):
            jobs = await http.get(f"/db/{name}/jobs")
            assert jobs.status_code == 200
            assert queue in jobs.text and other not in jobs.text  # its own database's jobs
            banner = f'data-database="{name}">database <strong>{name}</strong>'
            assert banner in jobs.text
            paths = site_paths(jobs.text)
            assert paths, "a page links somewhere"
            outside = [p for p in paths if not p.startswith(f"/db/{name}/") and p != "/"]
            assert outside == []  # every link stays on its database ("/": all databases)
            for path in {p for p in paths if "/static/" in p}:
                assert (await http.get(path)).status_code == 200


async def test_the_overview_lists_each_database_and_its_queues(two: Any) -> None:
    a, b = two
    await a.enqueue("emails", {})
    await b.enqueue("reports", {})
    await b.enqueue("reports", {})
    async with client(create_multi_app({"main": a, "reporting": b})) as http:
        page = (await http.get("/")).text
    assert '<a href="/db/main/" data-testid="database-link">main</a>' in page
    assert '<a href="/db/reporting/" data-testid="database-link">reporting</a>' in page
    assert '<a href="/db/reporting/queues/reports">reports</a></td><td>2</td>' in page
    assert page.index("main") < page.index("reporting")  # in the order given


async def test_a_redirect_stays_under_its_prefix(two: Any) -> None:
    """A plain form post that acts redirects to a page of the same database."""
    a, b = two
    job = await b.enqueue("reports", {})
    form = {"action": "cancel", "ids": str(job)}
    async with client(create_multi_app({"main": a, "reporting": b})) as http:
        asked = await http.post("/db/reporting/jobs/actions", data=form, headers=SAME_SITE)
        assert 'action="/db/reporting/jobs/actions" id="confirm-form"' in asked.text
        answer = await http.post(
            "/db/reporting/jobs/actions", data={**form, "confirmed": "yes"}, headers=SAME_SITE
        )
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/db/reporting/")
    assert (await b.get_job(job)).status != "ready"  # cancelled: a ready job ends at once


async def test_one_login_serves_every_database(two: Any) -> None:
    a, b = two
    async with client(create_multi_app({"main": a, "reporting": b}, token=TOKEN)) as http:
        away = await http.get("/db/reporting/jobs")
        assert away.status_code == 303
        assert away.headers["location"] == "/db/reporting/login?next=/db/reporting/jobs"
        assert (await http.get("/")).headers["location"] == "/login?next=/"
        login = await http.post("/login", data={"token": TOKEN, "next": "/"}, headers=SAME_SITE)
        assert login.status_code == 303
        for path in ("/", "/db/main/jobs", "/db/reporting/jobs"):
            assert (await http.get(path)).status_code == 200, path
        await http.post("/logout", headers=SAME_SITE)
        assert (await http.get("/db/main/jobs")).status_code == 303  # logged out of all
        assert (await http.get("/api/queues")).status_code == 404  # no API at the root


async def test_a_cross_site_post_under_a_prefix_is_refused(two: Any) -> None:
    a, b = two
    job = await b.enqueue("reports", {})
    async with client(create_multi_app({"main": a, "reporting": b})) as http:
        answer = await http.post(
            f"/db/reporting/api/jobs/{job}/cancel", headers={"Origin": "https://evil.test"}
        )
        assert answer.status_code == 403
        foreign = await http.get("/db/reporting/jobs", headers={"Host": "evil.test"})
        assert foreign.status_code == 400
    assert (await b.get_job(job)).status == "ready"


async def test_read_only_holds_under_every_prefix(two: Any) -> None:
    a, b = two
    job = await a.enqueue("emails", {})
    async with client(create_multi_app({"main": a, "reporting": b}, read_only=True)) as http:
        answer = await http.post(f"/db/main/api/jobs/{job}/cancel", headers=SAME_SITE)
    assert answer.status_code == 403
    assert (await a.get_job(job)).status == "ready"


async def test_healthz_answers_for_every_database(two: Any) -> None:
    a, b = two
    async with client(create_multi_app({"main": a, "reporting": b})) as http:
        answer = await http.get("/healthz")
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok", "databases": {"main": "ok", "reporting": "ok"}}


@pytest.mark.parametrize(
    "name", ["", "a b", "<script>", "../x", "a/b", "\u202eevil", "x" * 64, "1st"]
)
async def test_a_name_that_is_not_one_is_refused_shown_escaped(two: Any, name: str) -> None:
    a, b = two
    with pytest.raises(ValueError, match="database names must be") as caught:
        create_multi_app({"ok": a, name: b})
    assert "\u202e" not in str(caught.value)


async def test_hostile_queue_names_are_shown_escaped_on_the_overview(two: Any) -> None:
    a, b = two
    await a.enqueue("<img src=x onerror=alert(1)>", {})
    async with client(create_multi_app({"main": a, "reporting": b})) as http:
        page = (await http.get("/")).text
    assert "<img" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


async def test_no_backend_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one backend"):
        create_multi_app({})


async def test_a_database_that_fails_is_shown_on_the_overview_and_in_healthz(two: Any) -> None:
    a, b = two

    async def down() -> Any:
        raise trioqueue.BackendError("PostgreSQL: connection refused <b>")

    b.queue_stats = down
    b.database_clock = down
    async with client(create_multi_app({"main": a, "reporting": b})) as http:
        page = (await http.get("/")).text
        health = await http.get("/healthz")
    assert "unavailable: PostgreSQL: connection refused &lt;b&gt;" in page
    assert health.status_code == 503
    assert health.json()["databases"] == {"main": "ok", "reporting": "unavailable"}


async def test_no_link_of_the_root_login_page_is_dead(two: Any) -> None:
    """The root's login form is the first database's page served outside its prefix: its
    navigation names the overview and each database, not one database's pages (``/jobs``
    exists only under a prefix)."""
    a, b = two
    async with client(create_multi_app({"main": a, "reporting": b}, token=TOKEN)) as http:
        page = (await http.get("/login")).text
        paths = site_paths(page)
        answers = {path: (await http.get(path)).status_code for path in paths}
        wrong = await http.post("/login", data={"token": "wrong" * 8}, headers=SAME_SITE)
    assert {"/", "/db/main/", "/db/reporting/"} <= set(paths)
    assert "/jobs" not in paths
    assert 'data-testid="nav-databases"' in page
    assert all(status != 404 for status in answers.values()), answers
    # The page the wrong token gets back is the root's too.
    assert wrong.status_code == 401
    assert "/jobs" not in site_paths(wrong.text)
    assert "/db/main/" in site_paths(wrong.text)


async def test_a_login_page_under_a_prefix_keeps_its_databases_links(two: Any) -> None:
    a, b = two
    async with client(create_multi_app({"main": a, "reporting": b}, token=TOKEN)) as http:
        page = (await http.get("/db/main/login")).text
    assert "/db/main/jobs" in site_paths(page)
    assert 'data-testid="nav-databases"' not in page
