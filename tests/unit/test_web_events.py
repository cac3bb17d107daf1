"""``GET /api/events`` (docs/dashboard.rst, "Events") over the memory backend.

The stream is driven as a raw ASGI call, so the test sees each chunk the app sends (one per
tick) and decides when the client disconnects. The memory backend's rows and the stream's
ticks run on trio's clock, so ``autojump_clock`` makes ticks instant and deterministic.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio

import trioqueue
from trioqueue._core import RenewItem
from trioqueue._types import Failure
from trioqueue.web import create_app
from trioqueue.web.events import (
    MAX_JOB_EVENTS,
    MAX_STREAMS,
    MAX_STREAMS_PER_CLIENT,
    MIN_GAP,
)


@dataclass
class Stream:
    """One client of the event stream: what it received, and a way to hang up."""

    status: int | None = None
    headers: dict[bytes, bytes] = field(default_factory=dict)
    hang_up: trio.Event = field(default_factory=trio.Event)
    ended: trio.Event = field(default_factory=trio.Event)
    chunks: trio.MemoryReceiveChannel[bytes] | None = None

    async def next_events(self) -> list[tuple[str, Any]]:
        """The events of the next chunk that holds any (comments skipped)."""
        assert self.chunks is not None
        while True:
            chunk = await self.chunks.receive()
            events = parse(chunk)
            if events:
                return events

    async def next_body(self) -> bytes:
        assert self.chunks is not None
        return await self.chunks.receive()

    async def until(self, wanted: Any) -> tuple[str, Any]:
        """Read events until one satisfies ``wanted(name, data)``."""
        while True:
            for name, data in await self.next_events():
                if wanted(name, data):
                    return name, data


def parse(chunk: bytes) -> list[tuple[str, Any]]:
    events = []
    for block in chunk.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in lines:
            events.append((lines["event"], json.loads(lines["data"])))
    return events


def scope(
    path: str,
    query: str = "",
    headers: list[tuple[bytes, bytes]] | None = None,
    client: str = "127.0.0.1",
) -> Any:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), *(headers or [])],
        "client": (client, 5000),
        "server": ("127.0.0.1", 80),
    }


@asynccontextmanager
async def events(app: Any, query: str = "", **kwargs: Any) -> AsyncIterator[Stream]:
    stream = Stream()
    send_chunk, stream.chunks = trio.open_memory_channel[bytes](1000)

    async def receive() -> dict[str, Any]:
        await stream.hang_up.wait()
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        if message["type"] == "http.response.start":
            stream.status = message["status"]
            stream.headers = dict(message["headers"])
        else:
            await send_chunk.send(message.get("body", b""))

    async def run() -> None:
        await app(scope("/api/events", query, **kwargs), receive, send)
        stream.ended.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        yield stream
        stream.hang_up.set()


async def running_job(backend: trioqueue.MemoryBackend, queue: str = "mail") -> tuple[int, int]:
    job_id = await backend.enqueue(queue, {"n": 1})
    [claimed] = await backend.claim(queue, limit=1, worker_id="w", visibility_timeout=600)
    return job_id, claimed.job.claim_seq


async def test_progress_moves_job_and_queue_events(
    backend: trioqueue.MemoryBackend, autojump_clock: object
) -> None:
    job_id, seq = await running_job(backend)
    app = create_app(backend)
    async with events(app) as stream:
        first = await stream.next_events()
        assert ("queue", {"queue": "mail", "counts": {"running": 1}}) in [
            (name, {k: data[k] for k in ("queue", "counts")})
            for name, data in first
            if name == "queue"
        ]
        assert ("job", {"id": job_id, "status": "running", "progress": None}) in [
            (name, {k: data[k] for k in ("id", "status", "progress")})
            for name, data in first
            if name == "job"
        ]
        await backend.renew([RenewItem(job_id, seq, 0.5)], visibility_timeout=600)
        _, moved = await stream.until(lambda n, d: n == "job" and d["progress"] == 0.5)
        assert (moved["id"], moved["status"], moved["progress"]) == (job_id, "running", 0.5)
        assert moved["lease_expires_at"] > moved["last_renewed_at"]
        await backend.enqueue("mail", 2)
        _, counts = await stream.until(lambda n, d: n == "queue")
        assert counts["counts"] == {"ready": 1, "running": 1}
    assert stream.status == 200
    assert stream.headers[b"content-type"].startswith(b"text/event-stream")


async def test_a_finished_job_sends_its_final_state(
    backend: trioqueue.MemoryBackend, autojump_clock: object
) -> None:
    job_id, seq = await running_job(backend)
    async with events(create_app(backend)) as stream:
        await stream.until(lambda n, d: n == "job" and d["status"] == "running")
        await backend.fail([Failure(job_id, seq, "boom", retry_delay=None, progress=0.25)])
        _, final = await stream.until(lambda n, d: n == "job" and d["status"] != "running")
    assert (final["id"], final["status"], final["progress"]) == (job_id, "failed", 0.25)
    assert final["lease_expires_at"] is None


async def test_unchanged_state_sends_nothing_new(
    backend: trioqueue.MemoryBackend, autojump_clock: object
) -> None:
    await running_job(backend)
    async with events(create_app(backend)) as stream:
        await stream.next_events()  # the initial state
        assert stream.chunks is not None
        with trio.move_on_after(10):  # ten ticks with nothing changing
            chunk = await stream.chunks.receive()
            pytest.fail(f"an unchanged backend sent {chunk!r}")


async def test_job_events_are_capped_per_tick(
    backend: trioqueue.MemoryBackend, autojump_clock: object
) -> None:
    total = MAX_JOB_EVENTS + 20
    await backend.enqueue_many("mail", [{"n": n} for n in range(total)])
    claimed = await backend.claim("mail", limit=total, worker_id="w", visibility_timeout=600)
    assert len(claimed) == total
    async with events(create_app(backend)) as stream:
        first = [e for e in await stream.next_events() if e[0] == "job"]
        second = [e for e in await stream.next_events() if e[0] == "job"]
    assert len(first) == MAX_JOB_EVENTS
    assert len(second) == 20
    assert {d["id"] for _, d in first}.isdisjoint(d["id"] for _, d in second)


async def test_watched_jobs_are_followed_whatever_their_state(
    backend: trioqueue.MemoryBackend, autojump_clock: object
) -> None:
    ready = await backend.enqueue("mail", 1)
    async with events(create_app(backend), f"jobs={ready}") as stream:
        _, first = await stream.until(lambda n, d: n == "job")
        assert (first["id"], first["status"]) == (ready, "ready")
        await backend.cancel(ready)
        _, then = await stream.until(lambda n, d: n == "job")
        assert (then["id"], then["status"]) == (ready, "failed")
        await backend.delete_job(ready)
        _, gone = await stream.until(lambda n, d: n == "job")
        assert (gone["id"], gone["status"]) == (ready, "deleted")


async def test_a_watched_job_sends_every_renewal_others_only_progress(
    backend: trioqueue.MemoryBackend, autojump_clock: object
) -> None:
    watched, watched_seq = await running_job(backend)
    other, other_seq = await running_job(backend)
    async with events(create_app(backend), f"jobs={watched}") as stream:
        await stream.next_events()  # the initial state of both
        await trio.sleep(5)
        renewals = [RenewItem(watched, watched_seq, None), RenewItem(other, other_seq, None)]
        await backend.renew(renewals, visibility_timeout=600)
        _, renewed = await stream.until(lambda n, d: n == "job")
        assert renewed["id"] == watched  # the other job's renewal is not news
        assert stream.chunks is not None
        with trio.move_on_after(10):
            chunk = await stream.chunks.receive()
            pytest.fail(f"a renewal of an unwatched job was sent: {chunk!r}")


async def test_a_disconnected_client_ends_its_stream(
    backend: trioqueue.MemoryBackend, autojump_clock: object
) -> None:
    await running_job(backend)
    async with events(create_app(backend)) as stream:
        await stream.next_events()
        stream.hang_up.set()
        with trio.fail_after(0.5):  # less than one tick: the stream does not wait for it
            await stream.ended.wait()


@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("jobs=abc", 400),
        ("jobs=0", 400),
        ("jobs=" + ",".join(["1"] * 201), 400),
        # int() takes these; an id is ASCII digits only
        ("jobs=%2B1", 400),
        ("jobs=1_0", 400),
        ("jobs=%D9%A1", 400),
        ("jobs=1,%202", 400),
    ],
)
async def test_bad_params_are_400(
    backend: trioqueue.MemoryBackend, autojump_clock: object, query: str, status: int
) -> None:
    async with events(create_app(backend), query) as stream:
        with trio.fail_after(1):
            await stream.ended.wait()
            body = await stream.next_body()
    assert stream.status == status
    assert list(json.loads(body)) == ["error"]


async def test_token_is_required(backend: trioqueue.MemoryBackend, autojump_clock: object) -> None:
    await backend.enqueue("mail", 1)
    app = create_app(backend, token="s3cret-s3cret-s3cret-s3cret")
    async with events(app) as refused:
        with trio.fail_after(1):
            await refused.ended.wait()
    assert refused.status == 401
    async with events(
        app, headers=[(b"authorization", b"Bearer s3cret-s3cret-s3cret-s3cret")]
    ) as allowed:
        await allowed.next_events()
    assert allowed.status == 200


@asynccontextmanager
async def lifespan(app: Any) -> AsyncIterator[None]:
    """Run the app's ASGI lifespan (startup, then shutdown on leaving), as a server does."""
    to_app, from_test = trio.open_memory_channel[dict[str, Any]](2)
    started = trio.Event()

    async def send(message: Any) -> None:
        if message["type"] == "lifespan.startup.complete":
            started.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            app, {"type": "lifespan", "asgi": {"version": "3.0"}}, from_test.receive, send
        )
        await to_app.send({"type": "lifespan.startup"})
        await started.wait()
        yield
        await to_app.send({"type": "lifespan.shutdown"})


async def test_a_notice_wakes_the_stream_before_its_poll(
    backend: trioqueue.MemoryBackend, autojump_clock: object
) -> None:
    """An enqueue's notice ends the stream's nap at once (after the debounce gap), though
    the poll would come only an hour later."""
    app = create_app(backend, events_interval=3600)
    async with lifespan(app), events(app) as stream:
        await stream.next_body()  # the retry line
        while not app.state.waker.watching:
            await trio.sleep(0.01)
        sent_at = trio.current_time()
        await backend.enqueue("fresh", {"n": 1})
        _, data = await stream.until(lambda n, d: n == "queue" and d["queue"] == "fresh")
        assert trio.current_time() - sent_at <= MIN_GAP
        assert data["counts"] == {"ready": 1}


async def test_notices_are_debounced_into_few_ticks(
    backend: trioqueue.MemoryBackend, autojump_clock: object
) -> None:
    """A burst of 200 enqueues over 2 s wakes the stream at most once per MIN_GAP."""
    app = create_app(backend, events_interval=3600)
    async with lifespan(app), events(app) as stream:
        await stream.next_body()
        while not app.state.waker.watching:
            await trio.sleep(0.01)
        for n in range(200):
            await backend.enqueue("burst", {"n": n})
            await trio.sleep(0.01)
        await trio.sleep(MIN_GAP)  # the last tick of the burst
        assert stream.chunks is not None
        ticks = []
        while True:
            try:
                ticks.append(stream.chunks.receive_nowait())
            except trio.WouldBlock:
                break
    assert 1 <= len(ticks) <= 2 / MIN_GAP + 1
    counts = [d["counts"] for t in ticks for n, d in parse(t) if n == "queue"]
    assert counts[-1] == {"ready": 200}


# -- one poller for every stream, and the caps (issue 22, item 6) -------------------------


def reads(backend: trioqueue.MemoryBackend) -> dict[str, int]:
    calls = backend.statistics().calls
    return {op: calls[op] for op in ("queue_stats", "list_jobs", "get_jobs", "get_job")}


async def test_streams_share_one_read_per_tick_whatever_their_number(
    backend: trioqueue.MemoryBackend, autojump_clock: object
) -> None:
    """Ten streams following 20 jobs each cost what one does: per tick one queue_stats,
    one list_jobs and one get_jobs (all 200 followed ids at once), never a get_job."""
    await running_job(backend)
    followed = [await backend.enqueue_many("mail", [{"n": n}] * 20) for n in range(10)]
    app = create_app(backend)  # a one-second tick
    async with AsyncExitStack() as stack:
        streams = [
            await stack.enter_async_context(events(app, "jobs=" + ",".join(map(str, ids))))
            for ids in followed
        ]
        for stream, ids in zip(streams, followed, strict=True):
            first = [d["id"] for n, d in await stream.next_events() if n == "job"]
            assert set(ids) <= set(first)
        await trio.sleep(0.5)  # between two ticks
        before = reads(backend)
        await trio.sleep(10)
        after = reads(backend)
    assert {op: after[op] - before[op] for op in after} == {
        "queue_stats": 10,
        "list_jobs": 10,
        "get_jobs": 10,
        "get_job": 0,
    }


async def test_a_stream_that_joins_starts_from_the_shared_read_at_once(
    backend: trioqueue.MemoryBackend, autojump_clock: object
) -> None:
    """With an hour between polls, a second stream still gets its first events at once
    (from the read the first one keeps), and the first one's leaving hands the reads on."""
    job_id, seq = await running_job(backend)
    app = create_app(backend, events_interval=3600)
    async with events(app) as first:
        await first.next_events()
        async with events(app, f"jobs={job_id}") as second:
            with trio.fail_after(0.1):
                joined = await second.next_events()
            assert ("job", job_id) in [(n, d.get("id")) for n, d in joined]
            first.hang_up.set()
            with trio.fail_after(0.1):
                await first.ended.wait()
            await backend.renew([RenewItem(job_id, seq, 0.5)], visibility_timeout=600)
            await trio.sleep(3600)
            _, moved = await second.until(lambda n, d: n == "job")
    assert (moved["id"], moved["progress"]) == (job_id, 0.5)
    assert backend.statistics().calls["queue_stats"] == 2  # one read, then one an hour on


async def test_streams_are_capped_per_client_and_in_all(
    backend: trioqueue.MemoryBackend, autojump_clock: object
) -> None:
    app = create_app(backend)
    async with AsyncExitStack() as stack:
        for _ in range(MAX_STREAMS_PER_CLIENT):
            stream = await stack.enter_async_context(events(app))
            assert (await stream.next_body()).startswith(b"retry:")
        over = await stack.enter_async_context(events(app))
        with trio.fail_after(1):
            await over.ended.wait()
        assert over.status == 429
        body = json.loads(await over.next_body())
        assert body == {
            "error": f"too many event streams from this client (at most {MAX_STREAMS_PER_CLIENT})"
        }
        for n in range(MAX_STREAMS - MAX_STREAMS_PER_CLIENT):
            stream = await stack.enter_async_context(events(app, client=f"10.0.0.{n}"))
            assert (await stream.next_body()).startswith(b"retry:")
        full = await stack.enter_async_context(events(app, client="10.9.9.9"))
        with trio.fail_after(1):
            await full.ended.wait()
        assert full.status == 503
        assert "too many event streams open" in json.loads(await full.next_body())["error"]
    async with events(app) as again:  # every stream closed: room again
        assert (await again.next_body()).startswith(b"retry:")
    assert again.status == 200


async def test_a_stream_that_joins_following_other_jobs_gets_them_after_the_debounce(
    backend: trioqueue.MemoryBackend, autojump_clock: object
) -> None:
    """Its jobs were not in the shared read: the next read comes within MIN_GAP, not an
    interval later."""
    ready = await backend.enqueue("mail", 1)
    app = create_app(backend, events_interval=3600)
    async with events(app) as first:
        await first.next_events()
        joined_at = trio.current_time()
        async with events(app, f"jobs={ready}") as second:
            _, data = await second.until(lambda n, d: n == "job")
            assert trio.current_time() - joined_at <= MIN_GAP
    assert (data["id"], data["status"]) == (ready, "ready")


async def test_a_stream_another_site_opens_is_refused_and_takes_no_slot(
    backend: trioqueue.MemoryBackend, autojump_clock: object
) -> None:
    """A page of another origin can open ``new EventSource(...)`` on the dashboard: its
    browser reads nothing back (no CORS), but the stream would run and hold one of the
    client's slots (all local users share 127.0.0.1). It is refused before either."""
    app = create_app(backend)
    cross_site = [
        (b"origin", b"http://attacker.test"),
        (b"sec-fetch-site", b"cross-site"),
        (b"sec-fetch-mode", b"cors"),
        (b"sec-fetch-dest", b"empty"),
    ]
    async with AsyncExitStack() as stack:
        for _ in range(MAX_STREAMS_PER_CLIENT + 1):
            refused = await stack.enter_async_context(events(app, headers=cross_site))
            with trio.fail_after(1):
                await refused.ended.wait()
            assert refused.status == 403
        ours = await stack.enter_async_context(events(app))
        assert (await ours.next_body()).startswith(b"retry:")
