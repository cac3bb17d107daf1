"""``trioqueue queue pause|resume|limits``: flow control of a queue across every pool
(docs/flow.rst).
"""

from __future__ import annotations

import argparse
import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import trioqueue
from trioqueue.cli._commands.common import CliError, Subparsers, run_on_database, subcommand
from trioqueue.cli._escape import say


def add(commands: Subparsers) -> None:
    """``queue pause Q``, ``queue resume Q``, ``queue limits Q [...]`` (docs/flow.rst)."""
    queue = subcommand(
        commands, "queue", _run_queue_help, "pause, resume or limit a queue across every pool"
    )
    actions = queue.add_subparsers(title="actions", dest="action", metavar="ACTION")
    for name, paused, about in (
        ("pause", True, "stop every pool claiming from the queue (running jobs go on)"),
        ("resume", False, "let the queue be claimed again (idle pools hear of it at once)"),
    ):
        command = subcommand(actions, name, functools.partial(_run_pause, paused=paused), about)
        command.add_argument("queue", metavar="QUEUE")
    limits = subcommand(
        actions,
        "limits",
        _run_limits,
        "show the queue's limits, or change them (the ones not given stay)",
    )
    limits.add_argument("queue", metavar="QUEUE")
    limits.add_argument(
        "--max-running",
        type=_limit(int),
        default=argparse.SUPPRESS,
        metavar="N|none",
        help="at most N jobs of the queue running at once across every pool; none lifts it",
    )
    limits.add_argument(
        "--max-per-second",
        type=_limit(float),
        default=argparse.SUPPRESS,
        metavar="R|none",
        help="at most R claims of the queue per second across every pool; none lifts it",
    )


def _run_queue_help(args: argparse.Namespace) -> int:
    raise CliError("queue: choose an action: pause, resume or limits (trioqueue queue --help)")


def _run_pause(args: argparse.Namespace, *, paused: bool) -> int:
    run_on_database(args, pause_queue, args.queue, paused)
    if paused:
        say(f"queue {args.queue}: paused (running jobs go on; `trioqueue queue resume` resumes)")
    else:
        say(f"queue {args.queue}: resumed")
    return 0


async def pause_queue(dsn: str, schema: str, queue: str, paused: bool) -> None:
    """Pause (``paused``) or resume ``queue``."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        if paused:
            await backend.pause_queue(queue)
        else:
            await backend.resume_queue(queue)


#: ``queue limits``'s options, as ``set_queue_limits``'s arguments.
LIMITS = ("max_running", "max_per_second")


def _run_limits(args: argparse.Namespace) -> int:
    changes = {name: getattr(args, name) for name in LIMITS if hasattr(args, name)}
    stats = run_on_database(args, queue_limits, args.queue, changes)
    say(f"queue {args.queue}: {limits_text(stats)}")
    return 0


async def queue_limits(
    dsn: str, schema: str, queue: str, changes: Mapping[str, float | None]
) -> trioqueue.QueueStats | None:
    """Apply ``changes`` to ``queue``'s limits, keeping the limits not named (the backend
    sets both at once: read, merge, set); the queue's stats after (None: unknown queue)."""
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        if changes:
            _, running, rate = _flow((await backend.queue_stats()).get(queue))
            limits: dict[str, Any] = {"max_running": running, "max_per_second": rate}
            await backend.set_queue_limits(queue, **(limits | dict(changes)))
        return (await backend.queue_stats()).get(queue)


def limits_text(stats: trioqueue.QueueStats | None) -> str:
    """``max_running 5, max_per_second 2.5`` (``none`` for no limit), and ``paused``."""
    if stats is None:
        return "max_running none, max_per_second none (no jobs, not configured)"
    paused, running, rate = _flow(stats)
    text = f"max_running {_limit_value(running)}, max_per_second {_limit_value(rate)}"
    return text + (", paused" if paused else "")


def _flow(stats: trioqueue.QueueStats | None) -> tuple[bool, int | None, float | None]:
    """A queue's pause and limits (a queue without stats: neither paused nor limited)."""
    if stats is None:
        return False, None, None
    return stats.paused, stats.max_running, stats.max_per_second


def _limit_value(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def flow_text(stats: trioqueue.QueueStats | None) -> str:
    """The ``FLOW`` column of ``status``: ``paused``, ``max 5 running``, ``max 2.5/s``,
    joined by commas; ``-`` for a queue running unpaused and unlimited."""
    paused, running, rate = _flow(stats)
    parts = ["paused"] if paused else []
    if running is not None:
        parts.append(f"max {running} running")
    if rate is not None:
        parts.append(f"max {rate:g}/s")
    return ", ".join(parts) or "-"


def _limit(kind: Callable[[str], float]) -> Callable[[str], float | None]:
    """An argparse type: a number of ``kind``, or ``none`` (no limit). Its range is the
    backend's to check (a clear error, nothing written)."""

    def parse(text: str) -> float | None:
        if text.lower() == "none":
            return None
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number or 'none': {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be finite or 'none', got {text}")
        return value

    return parse
