"""The dashboard's flow control (docs/dashboard.rst): queues' pause and limits in the JSON
API, the overview's Pause/Resume buttons, live queue events, and a job's group; over the
memory backend."""

from __future__ import annotations

import json
from typing import Any

import pytest

import trioqueue
from tests._web_harness import SAME_SITE, client
from trioqueue.web import create_app

from .test_web_events import events


async def test_queues_show_pause_and_limits(backend: trioqueue.MemoryBackend) -> None:
    await backend.enqueue("mail", 1)
    await backend.pause_queue("mail")
    await backend.set_queue_limits("sms", max_running=3, max_per_second=2.5)  # no jobs yet
    async with client(create_app(backend)) as c:
        r = await c.get("/api/queues")
    assert r.json() == [
        {
            "queue": "mail",
            "counts": {"ready": 1},
            "oldest_ready_age": r.json()[0]["oldest_ready_age"],
            "estimated": False,
            "paused": True,
            "max_running": None,
            "max_per_second": None,
        },
        {
            "queue": "sms",
            "counts": {},
            "oldest_ready_age": None,
            "estimated": False,
            "paused": False,
            "max_running": 3,
            "max_per_second": 2.5,
        },
    ]


async def test_pause_and_resume_through_the_api(backend: trioqueue.MemoryBackend) -> None:
    async with client(create_app(backend)) as c:
        paused = await c.post("/api/queues/mail/pause", headers=SAME_SITE)
        assert (await backend.queue_stats())["mail"].paused is True
        again = await c.post("/api/queues/mail/pause", headers=SAME_SITE)  # idempotent
        resumed = await c.post("/api/queues/mail/resume", headers=SAME_SITE)
    assert paused.status_code == again.status_code == resumed.status_code == 200
    assert paused.json() | {"oldest_ready_age": None} == {
        "ok": True,
        "queue": "mail",
        "counts": {},
        "oldest_ready_age": None,
        "estimated": False,
        "paused": True,
        "max_running": None,
        "max_per_second": None,
    }
    assert resumed.json()["paused"] is False
    stats = (await backend.queue_stats()).get("mail")
    assert stats is None or stats.paused is False


async def test_a_queue_name_with_a_slash_or_odd_characters(
    backend: trioqueue.MemoryBackend,
) -> None:
    name = "reports/eu west"
    async with client(create_app(backend)) as c:
        r = await c.post("/api/queues/reports%2Feu%20west/pause", headers=SAME_SITE)
    assert (r.status_code, r.json()["queue"]) == (200, name)
    assert (await backend.queue_stats())[name].paused is True


async def test_limits_change_only_what_is_given(backend: trioqueue.MemoryBackend) -> None:
    async with client(create_app(backend)) as c:
        first = await c.post(
            "/api/queues/mail/limits",
            json={"max_running": 5, "max_per_second": 2},
            headers=SAME_SITE,
        )
        second = await c.post(
            "/api/queues/mail/limits", json={"max_per_second": None}, headers=SAME_SITE
        )
    assert (first.status_code, first.json()["max_running"], first.json()["max_per_second"]) == (
        200,
        5,
        2,
    )
    assert (second.json()["max_running"], second.json()["max_per_second"]) == (5, None)
    stats = (await backend.queue_stats())["mail"]
    assert (stats.max_running, stats.max_per_second) == (5, None)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "the body must be JSON"),
        (b"{}", "the body must be"),
        (b'{"max_running": 1, "paused": true}', "the body must be"),
        (b'{"max_running": "5"}', "max_running must be an integer or null"),
        (b'{"max_running": true}', "max_running must be an integer or null"),
        (b'{"max_per_second": "fast"}', "max_per_second must be a number or null"),
        (b'{"max_running": 0}', "max_running"),
        (b'{"max_per_second": -1}', "max_per_second"),
    ],
)
async def test_bad_limits_are_400_and_change_nothing(
    backend: trioqueue.MemoryBackend, body: bytes, message: str
) -> None:
    await backend.set_queue_limits("mail", max_running=4)
    async with client(create_app(backend)) as c:
        r = await c.post("/api/queues/mail/limits", content=body, headers=SAME_SITE)
    assert r.status_code == 400
    assert message in r.json()["error"]
    stats = (await backend.queue_stats())["mail"]
    assert (stats.max_running, stats.max_per_second) == (4, None)


async def test_queue_actions_follow_the_same_rules_as_job_actions(
    backend: trioqueue.MemoryBackend,
) -> None:
    posts: list[tuple[str, dict[str, Any]]] = [
        ("/api/queues/mail/pause", {}),
        ("/api/queues/mail/resume", {}),
        ("/api/queues/mail/limits", {"json": {"max_running": 1}}),
    ]
    async with client(create_app(backend, read_only=True)) as c:
        read_only = [await c.post(path, headers=SAME_SITE, **kw) for path, kw in posts]
    async with client(create_app(backend)) as c:
        cross_site = [
            await c.post(path, headers={"Origin": "http://evil.example"}, **kw)
            for path, kw in posts
        ]
    async with client(create_app(backend, token="s3cret-s3cret-s3cret-s3cret")) as c:
        no_token = [await c.post(path, headers=SAME_SITE, **kw) for path, kw in posts]
    assert [r.status_code for r in read_only] == [403] * 3
    assert [r.status_code for r in cross_site] == [403] * 3
    assert [r.status_code for r in no_token] == [401] * 3
    assert "mail" not in await backend.queue_stats()


async def test_an_empty_queue_name_is_400(backend: trioqueue.MemoryBackend) -> None:
    async with client(create_app(backend)) as c:
        r = await c.post("/api/queues//pause", headers=SAME_SITE)
    assert r.status_code == 400
    assert "queue" in r.json()["error"]


# -- pages --------------------------------------------------------------------------------


async def test_overview_shows_pause_limits_and_the_buttons(
    backend: trioqueue.MemoryBackend,
) -> None:
    await backend.enqueue("mail", 1)
    await backend.enqueue("sms", 1)
    await backend.pause_queue("mail")
    await backend.set_queue_limits("sms", max_running=5, max_per_second=2.5)
    async with client(create_app(backend)) as c:
        page = (await c.get("/")).text
    mail, sms = page.split('data-testid="queue-row"')[1:]
    assert '<span class="status paused">paused</span>' in mail
    assert 'data-testid="resume-button"' in mail and 'data-testid="pause-button"' not in mail
    assert 'data-testid="pause-button"' in sms and 'data-testid="resume-button"' not in sms
    assert 'data-testid="queue-limits">max 5 running, max 2.5/s<' in sms
    assert 'data-testid="queue-limits">–<' in mail


async def test_read_only_overview_has_no_queue_buttons(backend: trioqueue.MemoryBackend) -> None:
    await backend.enqueue("mail", 1)
    async with client(create_app(backend, read_only=True)) as c:
        page = (await c.get("/")).text
        refused = await c.post(
            "/queues/actions", data={"queue": "mail", "action": "pause"}, headers=SAME_SITE
        )
    assert 'data-testid="queue-action"' not in page
    assert refused.status_code == 403
    assert (await backend.queue_stats())["mail"].paused is False


async def test_the_buttons_work_without_javascript(backend: trioqueue.MemoryBackend) -> None:
    # (A pause without JavaScript is confirmed on a page of its own first: test_web_security.)
    async with client(create_app(backend)) as c:
        paused = await c.post(
            "/queues/actions",
            data={"queue": "mail", "action": "pause", "confirmed": "yes"},
            headers=SAME_SITE,
        )
        assert (await backend.queue_stats())["mail"].paused is True
        resumed = await c.post(
            "/queues/actions", data={"queue": "mail", "action": "resume"}, headers=SAME_SITE
        )
        bad = await c.post(
            "/queues/actions", data={"queue": "mail", "action": "drop"}, headers=SAME_SITE
        )
    assert (paused.status_code, paused.headers["location"]) == (303, "/")
    assert resumed.status_code == 303
    assert bad.status_code == 400
    assert (await backend.queue_stats())["mail"].paused is False


async def test_a_jobs_group_on_its_page_and_in_its_json(backend: trioqueue.MemoryBackend) -> None:
    grouped = await backend.enqueue("mail", 1, group="customer-42")
    alone = await backend.enqueue("mail", 2)
    async with client(create_app(backend)) as c:
        page = (await c.get(f"/jobs/{grouped}")).text
        other = (await c.get(f"/jobs/{alone}")).text
        detail = (await c.get(f"/api/jobs/{grouped}")).json()
        listed = (await c.get("/api/jobs")).json()["jobs"]
    assert 'data-testid="job-group"><code>customer-42</code>' in page
    assert 'data-testid="job-group">–<' in other
    assert detail["group"] == "customer-42"
    assert [job["group"] for job in listed] == ["customer-42", None]


async def test_a_pause_elsewhere_sends_a_queue_event(
    backend: trioqueue.MemoryBackend, autojump_clock: object
) -> None:
    """The overview reloads when a queue's pause or limits change (the CLI, another tab):
    its queue event says so even when no count moved."""
    await backend.enqueue("mail", 1)
    async with events(create_app(backend)) as stream:
        await stream.next_events()
        await backend.pause_queue("mail")
        changed = [data for name, data in await stream.next_events() if name == "queue"]
    assert [(q["queue"], q["counts"], q["paused"]) for q in changed] == [
        ("mail", {"ready": 1}, True)
    ]
    assert json.dumps(changed)  # plain JSON
