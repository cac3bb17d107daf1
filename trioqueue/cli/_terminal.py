"""Terminal output for the command line: tables, progress bars, a block redrawn in place.

Plain strings in, plain strings out: nothing here knows about trio, backends or jobs, so the
command line's views (the demo, ``jobs``, ``status`` and ``jobs --watch``) share one way of drawing
(stored text in a cell or a clipped line shown :func:`~trioqueue.cli._escape.visible`),
and one way of showing the library's own log records (:func:`library_logs_to`), as text or
as one JSON object per line (:class:`JsonLogFormatter`).

:class:`LiveBlock` redraws a block of lines in place: each frame moves the cursor up over the
previous one (``CSI n A``) and rewrites every line after clearing it (``CSI 2K``). Callers clip
lines to the terminal width first, because a wrapped line takes two rows and the next frame
would then move up too little.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, TextIO

import trio

import trioqueue
from trioqueue.cli._escape import visible

CSI = "\x1b["
RESET = f"{CSI}0m"
HIDE_CURSOR = f"{CSI}?25l"
SHOW_CURSOR = f"{CSI}?25h"

#: SGR codes per job status, for terminals that take colour.
STATUS_STYLES = {
    "scheduled": f"{CSI}2m",  # dim
    "ready": "",
    "running": f"{CSI}1m",  # bold
    "succeeded": f"{CSI}32m",  # green
    "failed": f"{CSI}31m",  # red
}


def supports_unicode(out: TextIO) -> bool:
    """True when ``out`` encodes UTF-8, so block characters can be written to it."""
    encoding = (getattr(out, "encoding", None) or "").lower().replace("-", "")
    return encoding in ("utf8", "utf_8")


def wants_colour(out: TextIO) -> bool:
    """True for a terminal, unless the user set ``NO_COLOR`` (https://no-color.org)."""
    return out.isatty() and not os.environ.get("NO_COLOR")


def progress_bar(progress: float | None, width: int = 16, *, unicode: bool = False) -> str:
    """A bar and a percentage for a fraction in [0, 1]; an empty bar and ``-`` for None."""
    full, empty = ("█", "░") if unicode else ("#", ".")
    if progress is None:
        return f"{empty * width}    -"
    filled = round(min(1.0, max(0.0, progress)) * width)
    return f"{full * filled}{empty * (width - filled)} {progress:4.0%}"


def clip(text: str, width: int) -> str:
    """``text`` made :func:`visible`, then cut to at most ``width`` characters, ending in
    ``...`` when it was cut (escaped first: the width is what the terminal shows)."""
    text = visible(text)
    if len(text) <= width:
        return text
    if width <= 3:
        return text[:width]
    return text[: width - 3] + "..."


def marked_if_cut(text: str) -> str:
    """``text``, ending in ``...`` when it is a prefix a list read cut
    (:class:`trioqueue.TruncatedText`), so that it reads as cut wherever it is shown whole."""
    return f"{text}..." if isinstance(text, trioqueue.TruncatedText) else text


def format_age(seconds: float | None) -> str:
    """``-`` for none, else whole seconds in the two largest units: 12s, 3m05s, 2h07m, 3d04h."""
    if seconds is None:
        return "-"
    whole = int(seconds)
    for unit, size, small, small_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60)):
        if whole >= size:
            return f"{whole // size}{unit}{whole % size // small_size:02d}{small}"
    if whole >= 60:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole}s"


_UNITS = ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k"))


def count_text(n: int, estimated: bool = False) -> str:
    """A count as the dashboard shows it (docs/dashboard.rst, "Big tables"): ``n`` when
    exact; an estimate marked ``~``, to two significant figures (``~1.2M``, ``~870``), so
    that no one reads the planner's figure as a tally."""
    if not estimated:
        return str(n)
    for size, unit in _UNITS:
        if n >= size:
            scaled = n / size
            shown = f"{scaled:.1f}" if scaled < 10 else f"{scaled:.0f}"
            return f"~{shown.removesuffix('.0')}{unit}"
    return f"~{n}"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """``headers`` and ``rows`` aligned in left-justified columns, two spaces apart, every
    cell made :func:`visible` (stored text goes into tables: it cannot act on the terminal,
    nor break a row in two)."""
    lines = [[visible(cell) for cell in line] for line in (headers, *rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    ]


def styled(text: str, style: str) -> str:
    """``text`` in the SGR ``style`` (no change for an empty style)."""
    return f"{style}{text}{RESET}" if style else text


class LiveBlock:
    """A block of lines at the bottom of a terminal, redrawn in place; a context manager.

    The cursor is hidden while the block is live and shown again on exit, also on error or
    Ctrl-C. The block never shrinks: a shorter frame blanks the rows it no longer uses.
    """

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._height = 0

    @property
    def size(self) -> os.terminal_size:
        """The terminal's columns and lines."""
        return shutil.get_terminal_size()

    def draw(self, lines: Sequence[str]) -> None:
        """Replace the previous frame with ``lines`` (each already clipped to the width)."""
        frame = [*lines, *([""] * (self._height - len(lines)))]
        up = f"{CSI}{self._height}A" if self._height else ""
        body = "".join(f"\r{CSI}2K{line}\n" for line in frame)
        self._out.write(up + body)
        self._out.flush()
        self._height = len(frame)

    def __enter__(self) -> LiveBlock:
        self._out.write(HIDE_CURSOR)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._out.write(SHOW_CURSOR)
        self._out.flush()


@contextmanager
def library_logs_to(
    handler: logging.Handler, *, verbose: bool = False, level: int | None = None
) -> Iterator[None]:
    """Route the ``trioqueue`` loggers' records to ``handler`` for the block: ``level`` and
    worse; without one, warnings and worse, or info too when ``verbose``."""
    logger = logging.getLogger("trioqueue")
    previous = logger.level
    if level is None:
        level = logging.INFO if verbose else logging.WARNING
    logger.setLevel(level)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


class TextLogFormatter(logging.Formatter):
    """A record as lines of text for a terminal: the message made :func:`visible` (a
    handler's error cannot colour, retitle or clear the terminal, nor start a line), and
    every further line (a traceback's) indented four spaces, so that none of them can pass
    for a record of its own, which starts at the line's first column."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return visible(super().formatMessage(record))

    def format(self, record: logging.LogRecord) -> str:
        first, *rest = super().format(record).split("\n")
        return "\n".join([first, *("    " + visible(line) for line in rest)])


#: The fields a record about one job carries (logging's ``extra=``, set by the runtime).
JOB_LOG_FIELDS = ("job_id", "queue", "attempt", "event")


class JsonLogFormatter(logging.Formatter):
    """A record as one line of JSON: ``time`` (ISO 8601, UTC), ``level``, ``logger``,
    ``message``; for a record about a job also ``job_id``, ``queue``, ``attempt`` and
    ``event`` (those it has); ``exception`` with the traceback when there is one.

    One object per line, for log collectors: a message or traceback spanning lines stays
    inside its JSON string (docs/usage.rst, "Logging").
    """

    def format(self, record: logging.LogRecord) -> str:
        time = datetime.fromtimestamp(record.created, UTC)
        entry: dict[str, Any] = {
            "time": time.isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in JOB_LOG_FIELDS:
            if name in record.__dict__:
                entry[name] = record.__dict__[name]
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str)


async def stop_on_signals(
    scope: trio.CancelScope, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Ctrl-C (SIGINT) or a service manager's stop (SIGTERM) cancels ``scope``: for the
    commands that run until stopped (``dashboard``, ``jobs --watch``). A cancellation
    unwinds the backend's connections cleanly, where a KeyboardInterrupt raised at an
    arbitrary checkpoint (inside the asyncio bridge, say) might not."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()  # installed: the caller may now say it runs
        async for _ in signals:
            scope.cancel()
            return


async def check_migrated(backend: trioqueue.PostgresBackend) -> None:
    """Fail now, once, with the migrate hint, unless the schema has every migration this
    trioqueue knows (commands that run until stopped, before they start anything): never
    migrated, missing the newest migrations, or migrated by a newer trioqueue. One read of
    the small ``schema_migrations`` table.

    Raises:
        BackendError: saying which, and what to run.
    """
    pending = await backend.pending_migrations()
    if pending:
        raise trioqueue.BackendError(
            f"schema {backend.schema!r} lacks migration(s) {', '.join(pending)} of this "
            f"trioqueue; run: trioqueue migrate --schema {backend.schema}",
            transient=False,
        )
