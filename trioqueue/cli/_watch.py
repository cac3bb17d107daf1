"""``trioqueue jobs --watch``: the job list redrawn in place until Ctrl-C.

:func:`watch_frame` is a pure function from jobs and queue statistics to lines, each clipped
to the terminal width; :func:`watch_loop` fetches, draws and sleeps, and keeps going while the
database is unavailable (one status line says so and it retries every interval). On a
terminal the frames go through the demo's :class:`~trioqueue.cli._terminal.LiveBlock`; on
anything else (a pipe, a file) each frame is printed whole, frames separated by a blank line,
so ``trioqueue jobs --watch | tee log`` keeps a readable history instead of escape codes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import trio

import trioqueue
from trioqueue.cli._escape import visible
from trioqueue.cli._terminal import (
    STATUS_STYLES,
    clip,
    format_age,
    format_table,
    marked_if_cut,
    progress_bar,
    styled,
)

#: Job states in the order the header counts them.
STATES: tuple[trioqueue.JobStatus, ...] = ("scheduled", "ready", "running", "succeeded", "failed")
HEADERS = ("ID", "QUEUE", "STATUS", "TRIES", "PROGRESS", "ERROR")
#: How many characters of each error (and payload, which the watch does not show) its list
#: read carries: more than any terminal line has room for; a longer error is cut and marked.
WATCH_PREVIEW = 1000
#: The narrowest frame drawn, whatever the terminal says.
MIN_WIDTH = 20


class WatchedBackend(Protocol):
    """What the watch reads: the two read operations of every backend."""

    async def list_jobs(
        self,
        queue: str | None = None,
        status: trioqueue.JobStatus | None = None,
        limit: int = 100,
        offset: int = 0,
        *,
        preview: int | None = None,
    ) -> list[trioqueue.JobInfo]: ...

    async def queue_stats(self) -> dict[str, trioqueue.QueueStats]: ...


def queue_line(queue: str, stats: trioqueue.QueueStats) -> str:
    """``default: 2 ready, 1 running; oldest ready 3s`` (states with no jobs left out)."""
    counts = ", ".join(f"{stats.counts[s]} {s}" for s in STATES if stats.counts.get(s))
    age = format_age(stats.oldest_ready_age)
    return visible(f"{queue}: {counts or 'no jobs'}; oldest ready {age}")


def watch_frame(
    infos: Sequence[trioqueue.JobInfo],
    stats: Mapping[str, trioqueue.QueueStats],
    *,
    title: str,
    problem: str | None,
    width: int,
    height: int,
    unicode: bool = False,
    colour: bool = False,
) -> list[str]:
    """One frame: the title, a line of counts per queue, the job table.

    Every line is clipped to ``width`` (a wrapped line would throw the redraw off) and
    stored text in it made visible (:func:`~trioqueue.cli._terminal.clip` and the table
    escape it; the styles of ``colour`` are the only escape codes in a frame), and the
    table keeps to ``height`` rows, ending in ``... and N more`` when jobs did not fit.
    ``problem`` (the database being unavailable) adds a status line under the counts; the
    jobs shown are then the last ones read. No line is empty, so printed snapshots can be
    told apart by the blank line between them.
    """
    width = max(MIN_WIDTH, width)
    header = [clip(title, width)]
    header += [clip(queue_line(q, s), width) for q, s in sorted(stats.items())]
    if not stats:
        header.append("no queues yet")
    if problem:
        header.append(clip(f"database unavailable: {problem}, retrying", width))
    if not infos:
        return [*header, "no jobs"]
    room = max(1, height - len(header) - 3)  # the table's header, "... more", the cursor row
    shown = infos[:room]
    rows = [
        [
            str(info.id),
            clip(info.queue, 20),
            info.status,
            f"{info.attempts}/{info.max_attempts}",
            progress_bar(info.progress, unicode=unicode),
            marked_if_cut(info.last_error or "").replace("\n", " "),
        ]
        for info in shown
    ]
    table = format_table(HEADERS, rows)
    lines = [*header, clip(table[0], width)]
    for info, line in zip(shown, table[1:], strict=True):
        cut = clip(line, width)
        lines.append(styled(cut, STATUS_STYLES.get(info.status, "")) if colour else cut)
    if len(infos) > room:
        lines.append(f"... and {len(infos) - room} more")
    return lines


async def watch_loop(
    backend: WatchedBackend,
    draw: Callable[
        [Sequence[trioqueue.JobInfo], Mapping[str, trioqueue.QueueStats], str | None], None
    ],
    *,
    queue: str | None,
    status: trioqueue.JobStatus | None,
    limit: int,
    interval: float,
    frames: int | None = None,
) -> None:
    """Read and ``draw`` every ``interval`` seconds, ``frames`` times (None: until cancelled).

    The read carries :data:`WATCH_PREVIEW` characters of each error and payload (a
    queue of big payloads costs a prefix of each). A :class:`trioqueue.BackendError` or
    ``OSError`` while reading is drawn as the problem,
    with the last jobs and counts read, and the next interval tries again.
    """
    infos: Sequence[trioqueue.JobInfo] = []
    stats: Mapping[str, trioqueue.QueueStats] = {}
    drawn = 0
    while frames is None or drawn < frames:
        problem: str | None = None
        try:
            new_stats = await backend.queue_stats()
            infos = await backend.list_jobs(
                queue=queue, status=status, limit=limit, preview=WATCH_PREVIEW
            )
            stats = {q: s for q, s in new_stats.items() if queue is None or q == queue}
        except (trioqueue.BackendError, OSError) as exc:
            problem = " ".join(str(exc).split()) or type(exc).__name__
        draw(infos, stats, problem)
        drawn += 1
        if frames is None or drawn < frames:
            await trio.sleep(interval)
