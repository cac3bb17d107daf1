"""The dashboard's HTTP layer against an attacker (docs/dashboard.rst, "Safety rules").

Each test is one of the ways in that outside testing found (issue 22, the dashboard's HTTP
layer), driven through the ASGI app: a foreign ``Host`` (DNS rebinding), framing and
one-click posts, big and slow bodies, token guessing, the login cookie, the security
headers, and redirects off the site. The rules behind them, alone, are tested in
test_web_security_rules.py.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
import trio

import trioqueue
from trioqueue.web import check_bind, create_app

from .._web_harness import BASE, SAME_SITE, client

TOKEN = "k9Vf2L0sQe7XbT4wZpR1mA8nY3cD6hJ"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
HTMX = {**SAME_SITE, "HX-Request": "true"}


def from_address(app: Any, address: str, base: str = BASE) -> httpx.AsyncClient:
    """A client whose requests come from ``address`` (the throttle counts per client)."""
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url=base)


async def call(app: Any, scope: dict[str, Any], receive: Any) -> tuple[int, bytes]:
    """A raw ASGI request (bodies chunk by chunk); the status and the body sent back."""
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    await app(scope, receive, send)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], body


def post_scope(path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"origin", BASE.encode()), *headers],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 80),
    }


# -- 1. DNS rebinding: the Host header, and Origin with its scheme ------------------------


async def test_a_rebound_name_can_neither_read_nor_delete(backend: trioqueue.MemoryBackend) -> None:
    """The issue's repro: a page of attacker.test, its name pointed at 127.0.0.1."""
    job_id = await backend.enqueue("mail", {"secret": 1})
    rebound = {"Host": "attacker.test:8080", "Origin": "http://attacker.test:8080"}
    body = {"action": "delete", "ids": [job_id]}
    async with client(create_app(backend)) as c:
        deleted = await c.post("/api/jobs/actions", json=body, headers=rebound)
        read = await c.get("/api/jobs", headers=rebound)
        page = await c.get("/", headers=rebound)
    assert [deleted.status_code, read.status_code, page.status_code] == [400, 400, 400]
    assert "'attacker.test:8080'" in page.text and "--allowed-host" in page.text
    assert "secret" not in read.text
    assert (await backend.get_job(job_id)).payload == {"secret": 1}


@pytest.mark.parametrize(
    "host", ["127.0.0.1:8080", "localhost:8080", "LOCALHOST", "[::1]:8080", "[0:0::1]"]
)
async def test_the_loopback_names_are_served_by_default(
    backend: trioqueue.MemoryBackend, host: str
) -> None:
    async with client(create_app(backend)) as c:
        r = await c.get("/api/queues", headers={"Host": host})
    assert r.status_code == 200


async def test_allowed_hosts_name_the_hosts_served(backend: trioqueue.MemoryBackend) -> None:
    app = create_app(backend, allowed_hosts=["dash.example", "127.0.0.1"])
    async with client(app) as c:
        proxied = await c.get("/api/queues", headers={"Host": "dash.example"})
        loopback = await c.get("/api/queues")
        other = await c.get("/api/queues", headers={"Host": "localhost"})
        missing = await c.get("/static/dashboard.js", headers={"Host": "evil.example"})
    assert [proxied.status_code, loopback.status_code] == [200, 200]
    assert [other.status_code, missing.status_code] == [400, 400]


async def test_origin_must_match_the_scheme_too(backend: trioqueue.MemoryBackend) -> None:
    job_id = await backend.enqueue("mail", 1)
    async with client(create_app(backend)) as c:
        https = await c.post(f"/api/jobs/{job_id}/cancel", headers={"Origin": "https://127.0.0.1"})
        null = await c.post(f"/api/jobs/{job_id}/cancel", headers={"Origin": "null"})
    assert [https.status_code, null.status_code] == [403, 403]
    assert (await backend.get_job(job_id)).cancel_requested_at is None


async def test_allowed_origin_lets_a_proxy_that_rewrites_host_in(
    backend: trioqueue.MemoryBackend,
) -> None:
    """The proxy serves https://dash.example and passes Host: 127.0.0.1 on."""
    job_id = await backend.enqueue("mail", 1)
    app = create_app(backend, allowed_origins=["https://dash.example"])
    async with client(app) as c:
        r = await c.post(f"/api/jobs/{job_id}/cancel", headers={"Origin": "https://dash.example"})
        plain = await c.post(
            f"/api/jobs/{job_id}/cancel", headers={"Origin": "http://dash.example"}
        )
    assert [r.status_code, plain.status_code] == [200, 403]


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"allowed_hosts": ["http://dash.example"]}, "not a host name"),
        ({"allowed_hosts": ["dash.example:8080"]}, "not a host name"),
        ({"allowed_origins": ["dash.example"]}, "not an origin"),
        ({"allowed_origins": ["https://dash.example/path"]}, "not an origin"),
        ({"allowed_origins": [""]}, "not an origin"),
        # Would refuse every request (400 to every Host), so refused at once instead.
        ({"allowed_hosts": []}, "allowed_hosts is empty"),
        ({"allowed_hosts": [""]}, "not a host name"),
        ({"allowed_hosts": ["dash\x00.example"]}, "not a host name"),
        # One string, not a list of them: its characters would be taken one by one.
        ({"allowed_hosts": "dash.example"}, "allowed_hosts must be a list"),
        ({"allowed_origins": "https://dash.example"}, "allowed_origins must be a list"),
        # Checked when the app is made, not at its first request (a 500 each time).
        ({"max_body": -1}, "max_body must be"),
        ({"max_body": True}, "max_body must be"),
        ({"body_timeout": 0}, "body_timeout must be"),
        ({"body_timeout": float("nan")}, "body_timeout must be"),
        ({"body_timeout": float("inf")}, "body_timeout must be"),
    ],
)
async def test_bad_hosts_and_origins_are_refused_at_once(
    backend: trioqueue.MemoryBackend, options: dict[str, Any], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        create_app(backend, **options)


# -- 2. framing, and plain posts that must not act in one click ---------------------------


async def test_no_page_may_be_framed(backend: trioqueue.MemoryBackend) -> None:
    job_id = await backend.enqueue("mail", 1)
    async with client(create_app(backend)) as c:
        pages = [await c.get(p) for p in ("/", "/jobs", f"/jobs/{job_id}", "/workers")]
    for page in pages:
        assert page.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]


@pytest.mark.parametrize("action", ["cancel", "delete"])
async def test_a_plain_job_post_asks_before_it_acts(
    backend: trioqueue.MemoryBackend, action: str
) -> None:
    job_id = await backend.enqueue("mail", 1)
    form = {"action": action, "ids": str(job_id)}
    async with client(create_app(backend)) as c:
        asked = await c.post("/jobs/actions?next=/jobs", data=form, headers=SAME_SITE)
        untouched = await backend.get_job(job_id)
        fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', asked.text))
        done = await c.post("/jobs/actions?next=/jobs", data=fields, headers=SAME_SITE)
    assert asked.status_code == 200
    assert 'data-testid="confirm-form"' in asked.text
    assert untouched.status == "ready" and untouched.cancel_requested_at is None
    assert fields == {"action": action, "ids": str(job_id), "next": "/jobs", "confirmed": "yes"}
    assert (done.status_code, done.headers["location"]) == (303, "/jobs")
    if action == "delete":
        with pytest.raises(trioqueue.UnknownJobError):
            await backend.get_job(job_id)
    else:
        assert (await backend.get_job(job_id)).status == "failed"  # a ready job cancels at once


async def test_htmx_posts_act_after_the_pages_own_dialog(backend: trioqueue.MemoryBackend) -> None:
    job_id = await backend.enqueue("mail", 1)
    async with client(create_app(backend)) as c:
        r = await c.post(
            "/jobs/actions", data={"action": "delete", "ids": str(job_id)}, headers=HTMX
        )
    assert r.status_code == 200 and 'data-testid="action-results"' in r.text
    with pytest.raises(trioqueue.UnknownJobError):
        await backend.get_job(job_id)


async def test_a_plain_pause_asks_first(backend: trioqueue.MemoryBackend) -> None:
    await backend.enqueue("mail", 1)
    async with client(create_app(backend)) as c:
        asked = await c.post(
            "/queues/actions", data={"queue": "mail", "action": "pause"}, headers=SAME_SITE
        )
        paused_before = (await backend.queue_stats())["mail"].paused
        done = await c.post(
            "/queues/actions",
            data={"queue": "mail", "action": "pause", "confirmed": "yes"},
            headers=SAME_SITE,
        )
    assert asked.status_code == 200 and 'data-testid="confirm-form"' in asked.text
    assert paused_before is False
    assert done.status_code == 303
    assert (await backend.queue_stats())["mail"].paused is True


# -- 3. bodies: bounded in size while read, and in time ------------------------------------


async def test_a_declared_big_body_is_refused_before_the_token(
    backend: trioqueue.MemoryBackend,
) -> None:
    app = create_app(backend, token=TOKEN, max_body=1024)
    async with client(app) as c:
        login = await c.post("/login", content=b"token=" + b"x" * 2000, headers=SAME_SITE)
        api = await c.post("/api/jobs/actions", content=b"{" * 2000, headers=SAME_SITE)
    assert [login.status_code, api.status_code] == [413, 413]
    assert api.json() == {"error": "the request body is larger than 1024 bytes"}


async def test_a_chunked_body_is_refused_while_it_is_read(
    backend: trioqueue.MemoryBackend,
) -> None:
    """No Content-Length: the app stops reading once the limit is passed, not at the end."""
    app = create_app(backend, token=TOKEN, max_body=64 * 1024)
    chunk, chunks, read = b"t" * 1024, 2048, 0  # 2 MiB offered, 1 KiB at a time

    async def receive() -> dict[str, Any]:
        nonlocal read
        read += 1
        return {"type": "http.request", "body": chunk, "more_body": read < chunks}

    scope = post_scope("/login", [(b"content-type", b"application/x-www-form-urlencoded")])
    status, body = await call(app, scope, receive)
    assert status == 413
    assert read == 65  # the chunk that went past 64 KiB is the last one read
    assert b"larger than 65536 bytes" in body


async def test_a_slow_body_is_cut_after_the_timeout(
    backend: trioqueue.MemoryBackend, autojump_clock: trio.testing.MockClock
) -> None:
    app = create_app(backend, token=TOKEN, body_timeout=10.0)
    given = 0

    async def receive() -> dict[str, Any]:
        nonlocal given
        given += 1
        if given > 1:
            await trio.sleep_forever()  # the client drips no more
        return {"type": "http.request", "body": b"token=", "more_body": True}

    start = trio.current_time()
    with trio.fail_after(60):
        status, body = await call(app, post_scope("/login", []), receive)
    assert (status, trio.current_time() - start) == (408, 10.0)
    assert b"did not arrive within 10 s" in body


async def test_an_event_stream_has_no_body_deadline(
    backend: trioqueue.MemoryBackend, autojump_clock: trio.testing.MockClock
) -> None:
    """The timeout bounds bodies only: a stream's wait for the disconnect is not cut."""
    app = create_app(backend, body_timeout=1.0)
    hang_up = trio.Event()
    started: list[int] = []
    given = 0

    async def receive() -> dict[str, Any]:
        nonlocal given
        given += 1
        if given == 1:
            return {"type": "http.request", "body": b"", "more_body": False}
        await hang_up.wait()
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        if message["type"] == "http.response.start":
            started.append(message["status"])

    scope = {**post_scope("/api/events", []), "method": "GET"}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(app, scope, receive, send)
        await trio.sleep(30)  # thirty ticks of the stream, far past the body timeout
        assert started == [200]
        hang_up.set()


# -- 4. token guessing is throttled; weak tokens are refused ------------------------------


async def test_wrong_bearer_tokens_are_throttled_per_client(
    backend: trioqueue.MemoryBackend, autojump_clock: trio.testing.MockClock
) -> None:
    app = create_app(backend, token=TOKEN)
    wrong = {"Authorization": "Bearer guess"}
    async with from_address(app, "192.0.2.7") as guesser, from_address(app, "192.0.2.8") as other:
        guesses = [(await guesser.get("/api/queues", headers=wrong)).status_code for _ in range(11)]
        refused = await guesser.get("/api/queues", headers=BEARER)  # even the right one
        bystander = await other.get("/api/queues", headers=BEARER)
        await trio.sleep(10)
        later = await guesser.get("/api/queues", headers=BEARER)
    assert guesses == [401] * 10 + [429]
    assert (refused.status_code, refused.headers["retry-after"]) == (429, "10")
    assert "try again in 10 s" in refused.json()["error"]
    assert [bystander.status_code, later.status_code] == [200, 200]


async def test_wrong_tokens_at_the_login_form_are_throttled(
    backend: trioqueue.MemoryBackend, autojump_clock: trio.testing.MockClock
) -> None:
    app = create_app(backend, token=TOKEN)
    async with client(app) as c:
        tries = [
            (await c.post("/login", data={"token": f"guess{n}"}, headers=SAME_SITE)).status_code
            for n in range(11)
        ]
        right = await c.post("/login", data={"token": TOKEN}, headers=SAME_SITE)
    assert tries == [401] * 10 + [429]
    assert right.status_code == 429 and "set-cookie" not in right.headers
    assert int(right.headers["retry-after"]) > 0


async def test_a_wrong_bearer_on_a_page_is_a_401_not_a_login_redirect(
    backend: trioqueue.MemoryBackend,
) -> None:
    """Else a guesser could tell right from wrong by 200 and 303, never counted as failed."""
    async with client(create_app(backend, token=TOKEN)) as c:
        wrong = await c.get("/jobs", headers={"Authorization": "Bearer guess"})
        right = await c.get("/jobs", headers=BEARER)
        none = await c.get("/jobs")
    assert [wrong.status_code, right.status_code, none.status_code] == [401, 200, 303]


@pytest.mark.parametrize(
    "token",
    # Non-ASCII: a Bearer header carries it as UTF-8 (curl) but is read as Latin-1, so it
    # would only ever match through the login form.
    ["s", "s3cret", "x" * 21, " " * 30, "\t" * 30, f" {TOKEN}", f"\u00e9{TOKEN}", f"{TOKEN}\u00a0"],
)
async def test_weak_tokens_are_refused_at_start(
    backend: trioqueue.MemoryBackend, token: str
) -> None:
    with pytest.raises(ValueError, match="at least 22 characters") as refused:
        create_app(backend, token=token)
    assert "secrets.token_urlsafe(32)" in str(refused.value)
    with pytest.raises(ValueError, match="at least 22 characters"):
        check_bind("0.0.0.0", token)


def test_a_weak_token_makes_the_command_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from trioqueue.cli._commands import main

    monkeypatch.setenv("TRIOQUEUE_DASHBOARD_TOKEN", "short")
    code = main(["--dsn", "postgresql://nobody@192.0.2.1:1/x", "dashboard", "--host", "0.0.0.0"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "at least 22 characters" in err and "secrets.token_urlsafe(32)" in err


# -- 5. the cookie names a session, which logout ends --------------------------------------


async def test_logout_ends_the_session_for_every_copy_of_its_cookie(
    backend: trioqueue.MemoryBackend,
) -> None:
    app = create_app(backend, token=TOKEN)
    async with client(app) as c:
        login = await c.post("/login", data={"token": TOKEN}, headers=SAME_SITE)
        session = c.cookies["trioqueue_session"]
        assert (await c.get("/api/queues")).status_code == 200
        await c.post("/logout", headers=SAME_SITE)
    assert TOKEN not in login.headers["set-cookie"]
    async with client(app, cookies={"trioqueue_session": session}) as copy:
        assert (await copy.get("/api/queues")).status_code == 401


async def test_the_session_cookie_is_secure_over_https(backend: trioqueue.MemoryBackend) -> None:
    app = create_app(backend, token=TOKEN)
    https = "https://127.0.0.1"
    async with from_address(app, "127.0.0.1", base=https) as c:
        secure = await c.post("/login", data={"token": TOKEN}, headers={"Origin": https})
    async with client(app) as c:
        plain = await c.post("/login", data={"token": TOKEN}, headers=SAME_SITE)
    assert "; secure" in secure.headers["set-cookie"].lower()
    assert "secure" not in plain.headers["set-cookie"].lower()


# -- 7. security headers on every answer ----------------------------------------------------


async def test_every_answer_carries_the_security_headers(
    backend: trioqueue.MemoryBackend,
) -> None:
    job_id = await backend.enqueue("mail", 1)
    async with client(create_app(backend, token=TOKEN)) as c:
        data = [
            await c.get(path, headers=BEARER)
            for path in ("/", "/jobs", f"/jobs/{job_id}", "/api/jobs", f"/api/jobs/{job_id}")
        ]
        refusals = [await c.get("/api/jobs"), await c.get("/nowhere", headers=BEARER)]
        static = await c.get("/static/dashboard.js")
    for r in [*data, *refusals, static]:
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["referrer-policy"] == "same-origin"
        csp = r.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp
        assert "style-src 'self'" in csp and "unsafe-inline" not in csp
    for r in [*data, *refusals]:
        assert r.headers["cache-control"] == "no-store"
    assert [r.status_code for r in data] == [200] * 5
    assert "no-store" not in static.headers.get("cache-control", "")


async def test_pages_have_no_inline_script_or_style(backend: trioqueue.MemoryBackend) -> None:
    """What the Content-Security-Policy refuses is not on any page (the browser test sees
    no violation either)."""
    job_id = await backend.enqueue("mail", 1)
    await backend.claim("mail", limit=1, worker_id="w", visibility_timeout=60)
    async with client(create_app(backend, token=TOKEN)) as c:
        pages = [
            (await c.get(path, headers=BEARER)).text
            for path in ("/", "/jobs", f"/jobs/{job_id}", "/workers", "/schedules")
        ]
        pages.append((await c.get("/login")).text)
    for text in pages:
        assert " style=" not in text and "<style" not in text
        assert re.findall(r"<script(?![^>]* src=)", text) == []
        assert re.findall(r" on[a-z]+=", text) == []


# -- 9 (part). next and HX-Redirect stay on this site ---------------------------------------


@pytest.mark.parametrize(
    "target",
    ["/\t/attacker.test/pwn", "/\r\nSet-Cookie: x=1", "/\x0b/a", "/a\x00", "/a b", "/\x7f", "/é"],
)
async def test_htmx_redirect_names_only_a_plain_path(
    backend: trioqueue.MemoryBackend, target: str
) -> None:
    job_id = await backend.enqueue("mail", 1)
    async with client(create_app(backend)) as c:
        r = await c.post(
            "/jobs/actions",
            data={"action": "cancel", "ids": str(job_id), "next": target},
            headers=HTMX,
        )
    assert (r.status_code, r.headers["hx-redirect"]) == (200, "/")


@pytest.mark.parametrize("target", ["/\t/attacker.test/pwn", "/\n/x", "/jobs\x85"])
async def test_login_next_with_control_characters_goes_home(
    backend: trioqueue.MemoryBackend, target: str
) -> None:
    async with client(create_app(backend, token=TOKEN)) as c:
        r = await c.post("/login", data={"token": TOKEN, "next": target}, headers=SAME_SITE)
        form = await c.get("/login", params={"next": target})
    assert (r.status_code, r.headers["location"]) == (303, "/")
    assert 'name="next" value="/"' in form.text


# -- reads another site's page makes through its visitor's browser -------------------------

CORS_FETCH = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty"}


@pytest.mark.parametrize(
    "headers",
    [
        {**CORS_FETCH, "Origin": "http://attacker.test"},  # fetch() from another site
        {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "script"},
        {"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"},
        # A navigation of a frame: refused though framing is denied anyway.
        {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "iframe"},
        {"Origin": "http://attacker.test"},  # a browser without Fetch Metadata
    ],
)
@pytest.mark.parametrize("path", ["/api/jobs", "/api/jobs/1", "/jobs", "/metrics"])
async def test_another_sites_reads_are_refused_before_the_backend_is_read(
    backend: trioqueue.MemoryBackend, headers: dict[str, str], path: str
) -> None:
    """Without CORS the attacker's page reads nothing back, but each request it makes its
    visitor's browser send would run (a list read, a metrics sample): refused with 403 by
    the browser's own account of where it comes from (Fetch Metadata), and by ``Origin``."""
    await backend.enqueue("mail", {})
    async with client(create_app(backend)) as c:
        before = dict(backend.statistics().calls)
        response = await c.get(path, headers=headers)
    assert response.status_code == 403
    assert "cross-site request refused" in response.text
    assert dict(backend.statistics().calls) == before


@pytest.mark.parametrize(
    "headers",
    [
        # A link followed from another site, or a bookmark: the page opens.
        {
            "Sec-Fetch-Site": "cross-site",
            "Sec-Fetch-Mode": "navigate",
            "Sec-Fetch-Dest": "document",
        },
        {"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"},
        # The dashboard's own scripts and htmx.
        {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty"},
        {"Origin": BASE},
        {},  # curl, Prometheus, a script
    ],
)
async def test_navigations_and_this_sites_reads_pass(
    backend: trioqueue.MemoryBackend, headers: dict[str, str]
) -> None:
    async with client(create_app(backend)) as c:
        page = await c.get("/jobs", headers=headers)
        data = await c.get("/api/jobs", headers=headers)
    assert [page.status_code, data.status_code] == [200, 200]
