"""The dashboard's retention (docs/dashboard.rst, "Retention"; docs/protocol.rst §15) over
the memory backend: ``/api/retention`` and its writes, the Retention page and its form
posts with their confirmation, the queue page's policy, what each change records in the
audit log, and the refusals (bad input naming every problem, read-only, another site)."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest

import trioqueue
from tests._web_harness import SAME_SITE, client
from trioqueue.web import create_app
from trioqueue.web.policies import form_keep, keep_text, prefill

DAY = 86_400.0
HIDDEN = re.compile(r'<input type="hidden" name="(\w+)" value="([^"]*)">')
DEFAULTS = {
    "default": {"succeeded": 7 * DAY, "failed": 30 * DAY},
    "queues": [],
    "audit": 90 * DAY,
    "maintainer": None,
}


async def policies(backend: trioqueue.MemoryBackend) -> dict[str | None, tuple[Any, Any]]:
    r = await backend.get_retention()
    own = {p.queue: (p.succeeded, p.failed) for p in r.queues}
    return {None: (r.default.succeeded, r.default.failed)} | own


# -- the JSON API -------------------------------------------------------------------------------


async def test_get_answers_the_defaults_and_no_maintainer(backend: trioqueue.MemoryBackend) -> None:
    async with client(create_app(backend)) as c:
        r = await c.get("/api/retention")
    assert (r.status_code, r.json()) == (200, DEFAULTS)


async def test_get_answers_each_queues_own_and_the_lease(backend: trioqueue.MemoryBackend) -> None:
    await backend.set_retention("mail", succeeded=DAY, failed=None)
    seq = await backend.claim_maintainer("host-1:42:abcd", 30.0)
    async with client(create_app(backend)) as c:
        body = (await c.get("/api/retention")).json()
    assert body["queues"] == [{"queue": "mail", "succeeded": DAY, "failed": None}]
    lease = body["maintainer"]
    assert (lease["holder"], lease["seq"]) == ("host-1:42:abcd", seq)
    assert set(lease) == {"holder", "seq", "acquired_at", "expires_at"}


async def test_put_sets_the_policies_and_records_what_they_replaced(
    backend: trioqueue.MemoryBackend,
) -> None:
    async with client(create_app(backend)) as c:
        queue = await c.put(
            "/api/retention/queues/mail/eu",
            json={"succeeded": 3600, "failed": None},
            headers=SAME_SITE,
        )
        default = await c.put(
            "/api/retention/default", json={"succeeded": DAY, "failed": 2 * DAY}, headers=SAME_SITE
        )
        audit = await c.put("/api/retention/audit", json={"seconds": None}, headers=SAME_SITE)
    assert queue.status_code == default.status_code == audit.status_code == 200
    assert audit.json() == {
        "ok": True,
        "default": {"succeeded": DAY, "failed": 2 * DAY},
        "queues": [{"queue": "mail/eu", "succeeded": 3600.0, "failed": None}],
        "audit": None,
        "maintainer": None,
    }
    entries = list(reversed(await backend.list_audit()))
    assert [(e.action, e.target, e.session) for e in entries] == [
        ("retention.set", "mail/eu", "open"),
        ("retention.set_default", "default", "open"),
        ("retention.audit", "audit", "open"),
    ]
    assert entries[0].detail == {
        "succeeded": 3600.0,
        "failed": None,
        "before": {"succeeded": 7 * DAY, "failed": 30 * DAY, "own": False},
    }
    assert entries[2].detail == {"seconds": None, "before": 90 * DAY}


async def test_delete_drops_a_queues_own_policy(backend: trioqueue.MemoryBackend) -> None:
    await backend.set_retention("mail", succeeded=DAY, failed=DAY)
    async with client(create_app(backend)) as c:
        gone = await c.delete("/api/retention/queues/mail", headers=SAME_SITE)
        again = await c.delete("/api/retention/queues/mail", headers=SAME_SITE)
    assert (gone.status_code, gone.json()["queues"]) == (200, [])
    assert (again.status_code, again.json()) == (
        404,
        {"error": "queue mail has no retention of its own"},
    )
    [entry] = await backend.list_audit()
    assert (entry.action, entry.target) == ("retention.clear", "mail")
    assert entry.detail == {"before": {"queue": "mail", "succeeded": DAY, "failed": DAY}}


@pytest.mark.parametrize(
    ("method", "path", "body", "problems"),
    [
        pytest.param(
            "PUT", "/api/retention/queues/mail",
            {"succeeded": "7d", "failed": -1, "keep": 1},
            ["succeeded must be a number of seconds", "failed must be more than 0", "unknown key keep"],
            id="three-problems",
        ),
        pytest.param(
            "PUT", "/api/retention/queues/m%00il", {"succeeded": True},
            ["NUL", "lacks failed", "succeeded must be a number"],
            id="queue-and-body",
        ),
        pytest.param(
            "PUT", "/api/retention/default", [1, 2], ["the body must be {"], id="not-an-object"
        ),
        pytest.param(
            "PUT", "/api/retention/default", {"succeeded": 1e300, "failed": 1.0},
            ["succeeded"], id="past-a-century",
        ),
        pytest.param(
            "PUT", "/api/retention/audit", {"seconds": 0, "days": 1},
            ["seconds must be more than 0", "unknown key days"], id="audit",
        ),
        pytest.param(
            "DELETE", "/api/retention/queues/" + "q" * 129, None, ["at most 128"], id="long-queue"
        ),
    ],
)  # fmt: skip
async def test_bad_writes_get_400_naming_every_problem_and_change_nothing(
    backend: trioqueue.MemoryBackend, method: str, path: str, body: Any, problems: list[str]
) -> None:
    await backend.set_retention("mail", succeeded=DAY, failed=DAY)
    before = await backend.get_retention()
    async with client(create_app(backend)) as c:
        r = await c.request(method, path, json=body, headers=SAME_SITE)
    assert r.status_code == 400
    for problem in problems:
        assert problem in r.json()["error"]
    assert await backend.get_retention() == before
    assert await backend.list_audit() == []


# -- the page -------------------------------------------------------------------------------------


async def test_the_page_shows_the_policies_the_audit_log_and_the_maintainer(
    backend: trioqueue.MemoryBackend,
) -> None:
    await backend.set_retention("mail", succeeded=1.5 * DAY, failed=None)
    await backend.claim_maintainer("host-1:42:abcd", 30.0)
    async with client(create_app(backend)) as c:
        page = await c.get("/retention")
    assert page.status_code == 200
    text = page.text
    assert 'id="nav-retention" aria-current="page"' in text
    assert '<td data-testid="keep-succeeded">7d</td>' in text
    assert '<td data-testid="keep-failed">30d</td>' in text
    assert '<td data-testid="keep-succeeded">1d 12h</td>' in text
    assert '<td data-testid="keep-failed">forever</td>' in text
    assert '<strong data-testid="keep-audit">90d</strong>' in text
    assert "<code>host-1:42:abcd</code>" in text
    assert 'data-testid="maintainer-lapsed"' not in text
    assert 'data-testid="retention-controls"' in text


async def test_a_page_without_a_maintainer_says_so(backend: trioqueue.MemoryBackend) -> None:
    async with client(create_app(backend)) as c:
        text = (await c.get("/retention")).text
    assert 'data-testid="no-maintainer"' in text
    assert 'data-testid="no-queue-policies"' in text


async def test_hostile_names_are_escaped_on_the_page(backend: trioqueue.MemoryBackend) -> None:
    hostile = "<script>alert(1)</script>&\"'"
    await backend.set_retention(hostile, succeeded=DAY, failed=DAY)
    await backend.claim_maintainer("\u202eliam<b>", 30.0)
    async with client(create_app(backend)) as c:
        text = (await c.get("/retention")).text
        queue = (await c.get("/queues/%3Cscript%3Ealert(1)%3C/script%3E&%22'")).text
    assert "<script>alert" not in text and "<b>" not in text
    assert 'Queue <a href="/queues/%3Cscript%3Ealert%281%29%3C/script%3E%26%22%27">' in text
    assert ">&lt;script&gt;alert(1)&lt;/script&gt;&amp;&#34;&#39;</a>" in text
    assert "\\u202eliam&lt;b&gt;" in text  # the override shown as its escape
    # The clear form carries the name back exactly, escaped in its attribute.
    values = [html.unescape(v) for n, v in HIDDEN.findall(text) if n == "queue"]
    assert values == [hostile]
    assert "<script>alert" not in queue
    assert 'data-own="true"' in queue


async def test_read_only_shows_no_forms(backend: trioqueue.MemoryBackend) -> None:
    await backend.set_retention("mail", succeeded=DAY, failed=DAY)
    async with client(create_app(backend, read_only=True)) as c:
        text = (await c.get("/retention")).text
    assert "<form" not in text.split("</header>")[1]
    assert 'data-testid="keep-audit"' in text


async def test_the_queue_page_shows_its_effective_policy(backend: trioqueue.MemoryBackend) -> None:
    await backend.set_retention("mail", succeeded=DAY, failed=None)
    await backend.enqueue("sms", 1)
    async with client(create_app(backend)) as c:
        mail = (await c.get("/queues/mail")).text
        sms = (await c.get("/queues/sms")).text
    assert 'data-own="true">succeeded kept 1d, failed forever' in mail
    assert 'data-own="false">succeeded kept 7d, failed 30d' in sms
    assert "(the default)" in sms and "(its own)" in mail


# -- the page's forms ----------------------------------------------------------------------------


async def test_a_form_post_is_confirmed_first_then_sets_and_records(
    backend: trioqueue.MemoryBackend,
) -> None:
    form = {
        "action": "set",
        "queue": "mail",
        "succeeded": "36",
        "succeeded_unit": "h",
        "failed": "",
        "failed_unit": "d",
    }
    async with client(create_app(backend)) as c:
        asked = await c.post("/retention/actions", data=form, headers=SAME_SITE)
        assert await policies(backend) == {None: (7 * DAY, 30 * DAY)}  # nothing yet
        fields = {n: html.unescape(v) for n, v in HIDDEN.findall(asked.text)}
        done = await c.post("/retention/actions", data=fields, headers=SAME_SITE)
    assert asked.status_code == 200
    question = html.unescape(asked.text)
    assert "Keep the succeeded jobs of queue mail 1d 12h and its failed jobs forever?" in question
    assert fields == {
        "action": "set", "queue": "mail", "succeeded": "129600", "succeeded_unit": "s",
        "failed": "", "failed_unit": "s", "confirmed": "yes",
    }  # fmt: skip
    assert (done.status_code, done.headers["location"]) == (303, "/retention")
    assert await policies(backend) == {None: (7 * DAY, 30 * DAY), "mail": (1.5 * DAY, None)}
    [entry] = await backend.list_audit()
    assert (entry.action, entry.target, entry.session) == ("retention.set", "mail", "open")


@pytest.mark.parametrize(
    ("form", "action", "after"),
    [
        pytest.param(
            {"action": "set_default", "succeeded": "2", "succeeded_unit": "d", "failed": "90",
             "failed_unit": "m"},
            "retention.set_default", {None: (2 * DAY, 5400.0), "mail": (DAY, DAY)}, id="default",
        ),
        pytest.param(
            {"action": "clear", "queue": "mail"}, "retention.clear", {None: (7 * DAY, 30 * DAY)},
            id="clear",
        ),
    ],
)  # fmt: skip
async def test_the_default_and_clear_forms(
    backend: trioqueue.MemoryBackend, form: dict[str, str], action: str, after: dict[Any, Any]
) -> None:
    await backend.set_retention("mail", succeeded=DAY, failed=DAY)
    async with client(create_app(backend)) as c:
        done = await c.post(
            "/retention/actions", data=form | {"confirmed": "yes"}, headers=SAME_SITE
        )
    assert done.status_code == 303
    assert await policies(backend) == after
    assert [e.action for e in await backend.list_audit()] == [action]


async def test_the_audit_form(backend: trioqueue.MemoryBackend) -> None:
    form = {"action": "audit", "audit": "30", "audit_unit": "d", "confirmed": "yes"}
    async with client(create_app(backend)) as c:
        done = await c.post("/retention/actions", data=form, headers=SAME_SITE)
    assert done.status_code == 303
    assert (await backend.get_retention()).audit == 30 * DAY


async def test_a_bad_form_names_every_problem_and_changes_nothing(
    backend: trioqueue.MemoryBackend,
) -> None:
    form = {
        "action": "set",
        "queue": "",
        "succeeded": "1e3",
        "failed": "2",
        "failed_unit": "y",
        "confirmed": "yes",
    }
    async with client(create_app(backend)) as c:
        r = await c.post("/retention/actions", data=form, headers=SAME_SITE)
        bogus = await c.post("/retention/actions", data={"action": "drop"}, headers=SAME_SITE)
    assert r.status_code == bogus.status_code == 400
    text = html.unescape(r.text)
    assert "the queue name is empty" in text
    assert "succeeded must be a number (empty: for ever), not '1e3'" in text
    assert "failed: the unit must be one of d, h, m, s, not 'y'" in text
    assert await policies(backend) == {None: (7 * DAY, 30 * DAY)}
    assert await backend.list_audit() == []


# -- refusals ------------------------------------------------------------------------------------

WRITES = [
    ("PUT", "/api/retention/default", {"json": {"succeeded": 1, "failed": 1}}),
    ("PUT", "/api/retention/queues/mail", {"json": {"succeeded": 1, "failed": 1}}),
    ("DELETE", "/api/retention/queues/mail", {}),
    ("PUT", "/api/retention/audit", {"json": {"seconds": 1}}),
    (
        "POST",
        "/retention/actions",
        {"data": {"action": "set_default", "succeeded": "1", "confirmed": "yes"}},
    ),
    (
        "POST",
        "/retention/actions",
        {"data": {"action": "clear", "queue": "mail", "confirmed": "yes"}},
    ),
    ("POST", "/retention/actions", {"data": {"action": "audit", "audit": "1", "confirmed": "yes"}}),
]


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
@pytest.mark.parametrize("refusal", ["read-only", "other-site", "no-token"])
async def test_every_write_is_refused_read_only_from_another_site_and_without_the_token(
    backend: trioqueue.MemoryBackend, method: str, path: str, body: dict[str, Any], refusal: str
) -> None:
    await backend.set_retention("mail", succeeded=DAY, failed=DAY)
    before = await backend.get_retention()
    app = create_app(
        backend, read_only=refusal == "read-only", token="t" * 32 if refusal == "no-token" else None
    )
    headers = {"Origin": "https://attacker.test"} if refusal == "other-site" else SAME_SITE
    async with client(app) as c:
        r = await c.request(method, path, headers=headers, **body)
    assert r.status_code == (401 if refusal == "no-token" else 403)
    assert await backend.get_retention() == before
    assert await backend.list_audit() == []


async def test_the_page_has_no_inline_script_or_style(backend: trioqueue.MemoryBackend) -> None:
    """What the Content-Security-Policy refuses is not on the page either."""
    await backend.set_retention("mail", succeeded=DAY, failed=DAY)
    await backend.claim_maintainer("w", 30.0)
    async with client(create_app(backend)) as c:
        texts = [(await c.get("/retention")).text]
        texts.append(
            (
                await c.post(
                    "/retention/actions",
                    data={"action": "clear", "queue": "mail"},
                    headers=SAME_SITE,
                )
            ).text
        )
    for text in texts:
        assert " style=" not in text and "<style" not in text
        assert re.findall(r"<script(?![^>]* src=)", text) == []
        assert re.findall(r" on[a-z]+=", text) == []


# -- the words and fields ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text", "field"),
    [
        (7 * DAY, "7d", ("7", "d")), (1.5 * DAY, "1d 12h", ("36", "h")), (5400.0, "1h 30m", ("90", "m")),
        (90.0, "1m 30s", ("90", "s")), (1.5, "1.5s", ("1.5", "s")), (None, "forever", ("", "d")),
    ],
)  # fmt: skip
def test_keep_times_in_words_and_in_the_forms(
    seconds: float | None, text: str, field: tuple[str, str]
) -> None:
    assert keep_text(seconds) == text
    assert prefill(seconds) == field
    problems: list[str] = []
    number, unit = field
    assert form_keep({"k": number, "k_unit": unit}, "k", problems) == seconds
    assert problems == []


async def test_the_default_forms_confirmation_and_its_audit_entry(
    backend: trioqueue.MemoryBackend,
) -> None:
    form = {"action": "set_default", "succeeded": "2", "succeeded_unit": "d", "failed": ""}
    async with client(create_app(backend)) as c:
        asked = await c.post("/retention/actions", data=form, headers=SAME_SITE)
        await c.post("/retention/actions", data=form | {"confirmed": "yes"}, headers=SAME_SITE)
    assert (
        "Keep the succeeded jobs of every queue without a policy of its own 2d and their "
        "failed jobs forever?" in html.unescape(asked.text)
    )
    [entry] = await backend.list_audit()
    assert entry.detail == {
        "succeeded": 2 * DAY,
        "failed": None,
        "before": {"succeeded": 7 * DAY, "failed": 30 * DAY},
    }
