"""The dead-letter surface against an attacker (docs/dashboard.rst, "Safety rules", "Dead
letters"): ``/dead``, ``GET /api/dead``, ``POST /api/dead/redrive`` and the page's
``POST /dead/redrive``, each tried from a foreign Host (DNS rebinding), from another
origin, in a frame, with hostile queue names, error texts and error types, with a body
past the limit, and without logging in. A refused request reads nothing and writes
nothing: no job is redriven and no audit entry is written.
"""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from markupsafe import escape

import trioqueue
from trioqueue.web import create_app

from .._web_harness import BASE, SAME_SITE, client, dead_letter

TOKEN = "k9Vf2L0sQe7XbT4wZpR1mA8nY3cD6hJ"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
#: Each route of the surface: (method, path, what a same-site caller would send).
ROUTES: list[tuple[str, str, dict[str, Any]]] = [
    ("GET", "/dead", {}),
    ("GET", "/api/dead", {}),
    ("POST", "/api/dead/redrive", {"json": {"expected": 1}}),
    ("POST", "/dead/redrive", {"data": {"expected": "1", "confirmed": "yes"}}),
]
ROUTE_IDS = [f"{method} {path}" for method, path, _ in ROUTES]
#: Strings an attacker could get stored (a queue name, an error, an exception's class).
HOSTILE_QUEUE = '"><img src=x onerror=alert(1)>'
HOSTILE_ERROR = "ValueError: </code><script>alert(2)</script>\u202eliam\x1b[2J"
HOSTILE_TYPE = "evil.<svg/onload=alert(3)>"


async def send(c: Any, method: str, path: str, body: dict[str, Any], **headers: str) -> Any:
    return await c.request(method, path, headers=headers, **body)


async def untouched(backend: trioqueue.MemoryBackend, job_id: int) -> bool:
    """Nothing was redriven and nothing audited."""
    status = (await backend.get_job(job_id)).status
    return status == "failed" and await backend.list_audit() == []


# -- a foreign Host (DNS rebinding) ---------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "body"), ROUTES, ids=ROUTE_IDS)
async def test_a_foreign_host_is_refused_before_the_backend_is_read(
    backend: trioqueue.MemoryBackend, method: str, path: str, body: dict[str, Any]
) -> None:
    job_id = await dead_letter(backend)
    rebound = {"Host": "attacker.test:8080", "Origin": "http://attacker.test:8080"}
    async with client(create_app(backend)) as c:
        before = dict(backend.statistics().calls)
        refused = await send(c, method, path, body, **rebound)
        reads = dict(backend.statistics().calls)
    assert refused.status_code == 400
    assert "secret" not in refused.text and "boom" not in refused.text
    assert reads == before  # not even a read
    assert await untouched(backend, job_id)


# -- another origin -------------------------------------------------------------------------

CROSS_SITE_POSTS = [
    pytest.param({"Origin": "http://attacker.test"}, id="foreign-origin"),
    pytest.param({"Origin": "https://127.0.0.1"}, id="other-scheme"),
    pytest.param({"Origin": "null"}, id="null-origin"),
    pytest.param({"Sec-Fetch-Site": "cross-site"}, id="fetch-metadata"),
    pytest.param({"Sec-Fetch-Site": "same-site"}, id="sibling-subdomain"),
    pytest.param({}, id="no-origin"),
]


@pytest.mark.parametrize("headers", CROSS_SITE_POSTS)
@pytest.mark.parametrize(("method", "path", "body"), ROUTES[2:], ids=ROUTE_IDS[2:])
async def test_a_redrive_from_another_origin_is_refused(
    backend: trioqueue.MemoryBackend,
    method: str,
    path: str,
    body: dict[str, Any],
    headers: dict[str, str],
) -> None:
    job_id = await dead_letter(backend)
    async with client(create_app(backend)) as c:
        refused = await send(c, method, path, body, **headers)
        allowed = await send(c, method, path, body, **SAME_SITE)
    assert refused.status_code == 403
    assert "cross-site request refused" in refused.text
    assert allowed.status_code in (200, 303)  # the same request, same-site, acts
    assert (await backend.get_job(job_id)).status == "ready"
    assert len(await backend.list_audit()) == 1  # the allowed one only


@pytest.mark.parametrize(("method", "path", "body"), ROUTES[:2], ids=ROUTE_IDS[:2])
async def test_another_sites_reads_of_the_dead_letters_are_refused(
    backend: trioqueue.MemoryBackend, method: str, path: str, body: dict[str, Any]
) -> None:
    """A ``fetch`` or a frame from another site's page: 403 before any read."""
    await dead_letter(backend)
    fetch = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty"}
    frame = {
        "Sec-Fetch-Site": "cross-site",
        "Sec-Fetch-Mode": "navigate",
        "Sec-Fetch-Dest": "iframe",
    }
    async with client(create_app(backend)) as c:
        before = dict(backend.statistics().calls)
        answers = [
            await send(c, method, path, body, **fetch),
            await send(c, method, path, body, **frame),
            await send(c, method, path, body, Origin="http://attacker.test"),
        ]
        reads = dict(backend.statistics().calls)
    assert [a.status_code for a in answers] == [403, 403, 403]
    assert all("boom" not in a.text for a in answers)
    assert reads == before


# -- framing --------------------------------------------------------------------------------


async def test_no_dead_letter_answer_may_be_framed(backend: trioqueue.MemoryBackend) -> None:
    """Every answer of the surface, pages, JSON, confirmation and refusals alike."""
    await dead_letter(backend)
    async with client(create_app(backend)) as c:
        answers = [
            await c.get("/dead"),
            await c.get("/dead?error_type=builtins.ValueError"),
            await c.get("/dead?since=never"),  # the 400 page
            await c.get("/api/dead"),
            await c.post("/dead/redrive", data={"queue": "mail"}, headers=SAME_SITE),  # confirm
            await c.post("/api/dead/redrive", json={"expected": 0}, headers=SAME_SITE),  # 409
            await c.post("/api/dead/redrive", json={"expected": 1}),  # 403
        ]
    assert [a.status_code for a in answers] == [200, 200, 400, 200, 200, 409, 403]
    for answer in answers:
        assert answer.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["cache-control"] == "no-store"


# -- hostile strings ------------------------------------------------------------------------


def assert_inert(text: str) -> None:
    """No markup of the hostile strings survives, and their controls show as escapes."""
    for live in ("<script>", "<img src=x", "<svg/onload", "</code><script", '"><img'):
        assert live not in text
    assert "\u202e" not in text and "\x1b" not in text


async def test_hostile_queue_error_and_type_are_shown_escaped(
    backend: trioqueue.MemoryBackend,
) -> None:
    await dead_letter(backend, HOSTILE_QUEUE, HOSTILE_ERROR, HOSTILE_TYPE)
    async with client(create_app(backend)) as c:
        page = await c.get("/dead")
        api = await c.get("/api/dead")
    assert page.status_code == 200
    assert_inert(page.text)
    assert str(escape(HOSTILE_QUEUE)) in page.text  # the breakdown's queue, escaped
    assert "&lt;svg/onload=alert(3)&gt;" in page.text  # the error type, escaped
    assert "\\u202eliam" in page.text and "\\x1b[2J" in page.text
    # The breakdown's links carry the names URL-encoded, not as markup.
    links = re.findall(r'href="(/dead\?[^"]*)"', page.text)
    assert any(link.startswith("/dead?queue=%22%3E%3Cimg") for link in links)
    assert any(link.startswith("/dead?error_type=evil.%3Csvg") for link in links)
    [dead] = api.json()["dead"]  # JSON carries the stored text as it is
    assert (dead["queue"], dead["last_error"], dead["error_type"]) == (
        HOSTILE_QUEUE,
        HOSTILE_ERROR,
        HOSTILE_TYPE,
    )
    assert api.headers["content-type"] == "application/json"


async def test_hostile_filters_are_echoed_escaped(backend: trioqueue.MemoryBackend) -> None:
    """The filters come back in the form's fields, the confirmation's question and its
    hidden fields, the refusal of a bad one, and the audit entry: never as markup."""
    job_id = await dead_letter(backend, HOSTILE_QUEUE, HOSTILE_ERROR, HOSTILE_TYPE)
    hostile = {"queue": HOSTILE_QUEUE, "error": "</code><script>", "error_type": HOSTILE_TYPE}
    async with client(create_app(backend)) as c:
        page = await c.get("/dead", params=hostile)
        bad = await c.get("/dead", params={**hostile, "since": "<script>\u202e"})
        asked = await c.post("/dead/redrive", data=hostile, headers=SAME_SITE)
        fields = {k: html.unescape(v) for k, v in re.findall(
            r'<input type="hidden" name="(\w+)" value="([^"]*)">', asked.text
        )}  # fmt: skip
        done = await c.post("/dead/redrive", data=fields, headers=SAME_SITE)
        api_bad = await c.get("/api/dead", params={"since": "<script>"})
    for answer in (page, bad, asked):
        assert_inert(answer.text)
    assert 'data-total="1"' in page.text  # the filters matched the hostile job
    assert str(escape(HOSTILE_QUEUE)) in page.text
    assert bad.status_code == 400 and "\\u202e" in bad.text
    assert "Redrive all 1 dead letter matching" in asked.text
    assert {k: fields[k] for k in hostile} == hostile  # the hidden fields round-trip
    assert done.status_code == 303
    assert (await backend.get_job(job_id)).status == "ready"
    [entry] = await backend.list_audit()
    assert entry.detail["filters"] == hostile  # stored as given; shown escaped
    assert api_bad.status_code == 400
    assert api_bad.headers["content-type"] == "application/json"


# -- bodies past the limit ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "kind"),
    [
        ("/api/dead/redrive", b'{"expected": 1, "pad": "' + b"x" * 2000 + b'"}', "application/json"),
        ("/dead/redrive", b"expected=1&confirmed=yes&queue=" + b"x" * 2000,
         "application/x-www-form-urlencoded"),
    ],
    ids=["api", "form"],
)  # fmt: skip
async def test_a_body_past_the_limit_is_refused_before_anything_runs(
    backend: trioqueue.MemoryBackend, path: str, body: bytes, kind: str
) -> None:
    job_id = await dead_letter(backend)
    app = create_app(backend, max_body=1024)
    async with client(app) as c:
        before = dict(backend.statistics().calls)
        refused = await c.post(path, content=body, headers={**SAME_SITE, "Content-Type": kind})
        reads = dict(backend.statistics().calls)
    assert refused.status_code == 413
    assert "larger than 1024 bytes" in refused.text
    assert reads == before
    assert await untouched(backend, job_id)


async def test_a_filter_past_its_bound_is_refused_with_one_line(
    backend: trioqueue.MemoryBackend,
) -> None:
    """The query string is not a body: each filter is bounded by itself (400)."""
    job_id = await dead_letter(backend)
    huge = {"queue": "q" * 60_000, "error_type": "T" * 301}
    async with client(create_app(backend)) as c:
        page = await c.get("/dead", params=huge)
        api = await c.get("/api/dead", params=huge)
        redrive = await c.post(
            "/api/dead/redrive", params=huge, json={"expected": 1}, headers=SAME_SITE
        )
    assert [page.status_code, api.status_code, redrive.status_code] == [400, 400, 400]
    assert "queue must be at most" in api.json()["error"]
    assert len(page.text) < 20_000  # the refusal does not echo the huge value
    assert await untouched(backend, job_id)


# -- logging in -----------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "body"), ROUTES, ids=ROUTE_IDS)
async def test_every_route_needs_the_token(
    backend: trioqueue.MemoryBackend, method: str, path: str, body: dict[str, Any]
) -> None:
    job_id = await dead_letter(backend)
    async with client(create_app(backend, token=TOKEN)) as c:
        before = dict(backend.statistics().calls)
        anonymous = await send(c, method, path, body, **SAME_SITE)
        wrong = await send(c, method, path, body, **SAME_SITE, Authorization="Bearer guess")
        reads = dict(backend.statistics().calls)
        right = await send(c, method, path, body, **SAME_SITE, **BEARER)
    if method == "GET" and not path.startswith("/api/"):
        assert anonymous.status_code == 303  # a page: to the login form, then back
        assert anonymous.headers["location"] == "/login?next=/dead"
    else:
        assert anonymous.status_code == 401
    assert wrong.status_code == 401
    assert "boom" not in anonymous.text + wrong.text
    assert reads == before
    assert right.status_code in (200, 303)
    done = method == "POST"
    assert (await backend.get_job(job_id)).status == ("ready" if done else "failed")


async def test_a_login_session_opens_the_page_and_its_redrive(
    backend: trioqueue.MemoryBackend,
) -> None:
    job_id = await dead_letter(backend)
    async with client(create_app(backend, token=TOKEN)) as c:
        login = await c.post("/login", data={"token": TOKEN, "next": "/dead"}, headers=SAME_SITE)
        page = await c.get("/dead")
        done = await c.post(
            "/dead/redrive", data={"expected": "1", "confirmed": "yes"}, headers=SAME_SITE
        )
    assert (login.status_code, login.headers["location"]) == (303, "/dead")
    assert page.status_code == 200 and 'data-total="1"' in page.text
    assert done.status_code == 303
    assert (await backend.get_job(job_id)).status == "ready"
    assert BASE.startswith("http://")  # the cookie is not Secure here, so it was sent
