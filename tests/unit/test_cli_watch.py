"""``trioqueue jobs --watch``: the frame (a pure function) and the refresh loop.

The loop runs against the memory backend under ``MockClock(autojump_threshold=0)``. The
memory backend's faults apply to writes only (list and stats reads take none), so the
database going away is a small wrapper whose reads fail while it is "down".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import trio

import trioqueue
from trioqueue.cli._terminal import CSI
from trioqueue.cli._watch import WATCH_PREVIEW, watch_frame, watch_loop

CREATED = datetime(2026, 1, 1, tzinfo=UTC)


def info(job_id: int, status: trioqueue.JobStatus, **fields: Any) -> trioqueue.JobInfo:
    values: dict[str, Any] = {
        "id": job_id,
        "queue": "emails",
        "payload": {},
        "status": status,
        "attempts": 0,
        "max_attempts": 3,
        "priority": 0,
        "progress": None,
        "last_error": None,
        "created_at": CREATED,
        "finished_at": None,
    }
    return trioqueue.JobInfo(**(values | fields))


STATS = {
    "emails": trioqueue.QueueStats(counts={"ready": 2, "running": 1}, oldest_ready_age=65.0),
    "reports": trioqueue.QueueStats(counts={"failed": 1}, oldest_ready_age=None),
}
INFOS = [
    info(1, "running", attempts=1, progress=0.5),
    info(2, "ready"),
    info(3, "failed", queue="reports", attempts=3, last_error="ValueError: " + "x" * 200),
]


def test_frame_shows_counts_states_attempts_progress_and_errors() -> None:
    lines = watch_frame(INFOS, STATS, title="watch", problem=None, width=200, height=40)
    assert lines[0] == "watch"
    assert lines[1] == "emails: 2 ready, 1 running; oldest ready 1m05s"
    assert lines[2] == "reports: 1 failed; oldest ready -"
    assert lines[3].split() == ["ID", "QUEUE", "STATUS", "TRIES", "PROGRESS", "ERROR"]
    assert lines[4].split()[:5] == ["1", "emails", "running", "1/3", "########........"]
    assert "50%" in lines[4]
    assert lines[5].split()[:4] == ["2", "emails", "ready", "0/3"]
    assert "3/3" in lines[6] and "ValueError: xxx" in lines[6]
    assert len(lines) == 7
    assert "" not in lines  # the blank line separates printed snapshots


def test_frame_lines_are_clipped_to_the_width() -> None:
    for width in (20, 33, 60):
        lines = watch_frame(INFOS, STATS, title="t" * 100, problem="down", width=width, height=40)
        assert lines and all(len(line) <= width for line in lines), lines
        assert lines[-1].endswith("...")  # the long error was cut, visibly


def test_frame_keeps_to_the_height_and_says_how_many_more() -> None:
    many = [info(n, "ready") for n in range(1, 51)]
    lines = watch_frame(many, STATS, title="t", problem=None, width=80, height=15)
    assert len(lines) <= 15 - 1  # the cursor's row stays free
    assert lines[-1].startswith("... and ") and lines[-1].endswith(" more")
    shown = sum(1 for line in lines if line.split()[:1] and line.split()[0].isdigit())
    assert lines[-1] == f"... and {50 - shown} more"


def test_frame_says_the_database_is_unavailable_and_keeps_the_jobs() -> None:
    lines = watch_frame(INFOS, STATS, title="t", problem="connection refused", width=80, height=40)
    assert lines[3] == "database unavailable: connection refused, retrying"
    assert any(line.startswith("1 ") for line in lines)


def test_frame_with_no_jobs_and_colour() -> None:
    assert watch_frame([], {}, title="t", problem=None, width=80, height=40) == [
        "t",
        "no queues yet",
        "no jobs",
    ]
    coloured = watch_frame(INFOS, STATS, title="t", problem=None, width=80, height=40, colour=True)
    assert coloured[4].startswith(f"{CSI}1m")  # running in bold
    assert coloured[6].startswith(f"{CSI}31m")  # failed in red


Frame = tuple[list[int], dict[str, trioqueue.QueueStats], str | None, float]


class Recorder:
    """The frames drawn, each with the (mock) time it was drawn at."""

    def __init__(self) -> None:
        self.frames: list[Frame] = []
        self.drawn = trio.Event()

    def __call__(
        self,
        infos: Sequence[trioqueue.JobInfo],
        stats: Mapping[str, trioqueue.QueueStats],
        problem: str | None,
    ) -> None:
        ids = [i.id for i in infos]
        self.frames.append((ids, dict(stats), problem, trio.current_time()))
        self.drawn.set()

    async def next_frame(self) -> Frame:
        self.drawn = trio.Event()
        await self.drawn.wait()
        return self.frames[-1]


async def test_loop_refreshes_every_interval_with_the_filters(
    autojump_clock: trio.abc.Clock,
) -> None:
    async with trioqueue.open_memory() as backend:
        first = await backend.enqueue("emails", {"n": 1})
        await backend.enqueue("reports", {"n": 2})
        record = Recorder()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: watch_loop(
                    backend, record, queue="emails", status="ready", limit=10, interval=0.5
                )
            )
            ids, stats, problem, t0 = await record.next_frame()
            assert (ids, list(stats), problem) == ([first], ["emails"], None)
            second = await backend.enqueue("emails", {"n": 3})
            ids, stats, problem, t1 = await record.next_frame()
            assert ids == [first, second] and stats["emails"].counts["ready"] == 2
            assert t1 - t0 == 0.5
            nursery.cancel_scope.cancel()


class FlakyBackend:
    """The memory backend's reads, failing while ``down`` is set (the database went away)."""

    def __init__(self, backend: trioqueue.MemoryBackend) -> None:
        self.backend = backend
        self.down = False

    async def list_jobs(
        self,
        queue: str | None = None,
        status: trioqueue.JobStatus | None = None,
        limit: int = 100,
        offset: int = 0,
        *,
        preview: int | None = None,
    ) -> list[trioqueue.JobInfo]:
        if self.down:
            raise trioqueue.BackendError("connection refused\n(is the server running?)")
        return await self.backend.list_jobs(queue, status, limit, offset, preview=preview)

    async def queue_stats(self) -> dict[str, trioqueue.QueueStats]:
        if self.down:
            raise OSError(111, "Connect call failed")
        return await self.backend.queue_stats()


async def test_loop_keeps_going_while_the_database_is_away(
    autojump_clock: trio.abc.Clock,
) -> None:
    async with trioqueue.open_memory() as memory:
        job = await memory.enqueue("emails", {})
        flaky = FlakyBackend(memory)
        record = Recorder()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: watch_loop(flaky, record, queue=None, status=None, limit=5, interval=1)
            )
            assert (await record.next_frame())[2] is None
            flaky.down = True
            ids, stats, problem, _ = await record.next_frame()
            assert problem is not None and "Connect call failed" in problem
            assert ids == [job] and list(stats) == ["emails"]  # the last ones read
            ids, _, problem, _ = await record.next_frame()
            assert problem is not None  # still retrying, still running
            flaky.down = False
            ids, _, problem, _ = await record.next_frame()
            assert (ids, problem) == ([job], None)
            nursery.cancel_scope.cancel()


async def test_loop_problem_is_one_line(autojump_clock: trio.abc.Clock) -> None:
    async with trioqueue.open_memory() as memory:
        flaky = FlakyBackend(memory)
        flaky.queue_stats = memory.queue_stats  # type: ignore[method-assign]
        flaky.down = True
        record = Recorder()
        await watch_loop(flaky, record, queue=None, status=None, limit=5, interval=1, frames=2)
        assert [frame[2] for frame in record.frames] == [
            "connection refused (is the server running?)"
        ] * 2
        assert record.frames[1][3] - record.frames[0][3] == 1


async def test_loop_reads_only_a_prefix_of_big_payloads(autojump_clock: trio.abc.Clock) -> None:
    """The watch shows no payload and a line of each error: its list read is cut
    (``preview=``), so a queue of big payloads costs it a prefix of each."""
    async with trioqueue.open_memory() as backend:
        big = await backend.enqueue("emails", {"blob": "x" * 1_000_000})
        small = await backend.enqueue("emails", {"n": 1})
        drawn: list[Sequence[trioqueue.JobInfo]] = []
        await watch_loop(
            backend,
            lambda infos, stats, problem: drawn.append(infos),
            queue=None,
            status=None,
            limit=10,
            interval=1,
            frames=1,
        )
    [infos] = drawn
    payloads = {info.id: info.payload for info in infos}
    assert isinstance(payloads[big], trioqueue.TruncatedText)
    assert len(payloads[big]) == WATCH_PREVIEW < payloads[big].length
    assert payloads[small] == {"n": 1}


def test_frame_marks_an_error_the_list_read_cut() -> None:
    """An error cut by the read ends in ``...`` even where the line has room for more."""
    cut = trioqueue.TruncatedText("ValueError: " + "y" * 20, 5000)
    lines = watch_frame(
        [info(4, "failed", last_error=cut)], STATS, title="t", problem=None, width=10_000,
        height=40,
    )  # fmt: skip
    assert lines[-1].endswith("ValueError: " + "y" * 20 + "...")
