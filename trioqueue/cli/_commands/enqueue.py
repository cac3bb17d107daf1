"""``trioqueue enqueue QUEUE JSON``: add a job and print its id."""

from __future__ import annotations

import argparse
import json
import sys
import typing
from typing import Any, TextIO

import trioqueue
from trioqueue.cli._commands.common import (
    CliError,
    Subparsers,
    job_id_type,
    run_on_database,
    subcommand,
)
from trioqueue.cli._escape import say

#: What ``--on-duplicate`` takes: the ``on_duplicate`` policies (docs/protocol.rst §18).
POLICIES: tuple[str, ...] = typing.get_args(trioqueue.OnDuplicate)
#: What ``--on-dependency-failure`` takes (docs/protocol.rst §21).
DEPENDENCY_POLICIES: tuple[str, ...] = typing.get_args(trioqueue.OnDependencyFailure)


def add(commands: Subparsers) -> None:
    enqueue = subcommand(commands, "enqueue", _run_enqueue, "add a job; prints its id")
    enqueue.add_argument("queue", metavar="QUEUE")
    enqueue.add_argument(
        "payload",
        metavar="JSON",
        help="the payload, as JSON text; - reads it from stdin, @PATH from a file",
    )
    enqueue.add_argument(
        "--priority", type=int, default=0, help="higher runs first (default: %(default)s)"
    )
    enqueue.add_argument("--delay", type=float, metavar="S", help="run no sooner than in S s")
    enqueue.add_argument(
        "--max-attempts", type=int, default=10, metavar="N", help="(default: %(default)s)"
    )
    enqueue.add_argument(
        "--dedup-key", metavar="KEY", help="skip if an unfinished job of the queue has this key"
    )
    enqueue.add_argument(
        "--on-duplicate",
        choices=POLICIES,
        default="keep",
        help="what a waiting job holding --dedup-key gets: kept as it is (the default), "
        "replaced (this payload, --priority and --delay), or debounced (run in --delay s); "
        "a running one is left alone",
    )
    enqueue.add_argument(
        "--group", metavar="KEY", help="run one job of this group at a time (docs/flow.rst)"
    )
    enqueue.add_argument(
        "--depends-on",
        action="append",
        type=job_id_type,
        metavar="ID",
        help="run only once job ID has succeeded (repeat for several; docs/howto/dependencies.rst)",
    )
    enqueue.add_argument(
        "--on-dependency-failure",
        choices=DEPENDENCY_POLICIES,
        default="fail",
        help="what this job becomes if a dependency fails for good: failed (the default) or "
        "cancelled; either way it never runs",
    )


def _run_enqueue(args: argparse.Namespace) -> int:
    payload = parse_payload(read_payload(args.payload, sys.stdin))
    options = {
        "priority": args.priority,
        "delay": args.delay,
        "max_attempts": args.max_attempts,
        "dedup_key": args.dedup_key,
        "group": args.group,
        "on_duplicate": args.on_duplicate,
    }
    if args.depends_on:
        options["depends_on"] = args.depends_on
        options["on_dependency_failure"] = args.on_dependency_failure
    done = run_on_database(args, enqueue_reporting, args.queue, payload, options)
    say(str(done.id))
    if not done.added:
        # stdout stays the id alone, for scripts; the news goes to stderr.
        say(duplicate_news(done, args.dedup_key), file=sys.stderr)
    return 0


def duplicate_news(done: trioqueue.Enqueued, dedup_key: str) -> str:
    """What befell the job that holds ``dedup_key`` (nothing was added)."""
    held = f"job {done.id} already exists with dedup key {dedup_key!r}"
    return {
        "kept": f"{held}; not enqueued again",
        "replaced": f"{held}; it waited, and now has this payload, priority and delay",
        "debounced": f"{held}; it waited, and now runs after the delay",
        "running": f"{held} and is running; left unchanged, not enqueued again",
    }[done.outcome]


def read_payload(arg: str, stdin: TextIO) -> str:
    """The payload's JSON text: ``-`` reads ``stdin``, ``@PATH`` the file PATH, anything else
    is the text itself. A JSON text never starts with ``@`` (a string starts with ``"``), so
    no literal payload is lost to this (docs/cli.rst, ``enqueue``).

    Raises:
        CliError: the file cannot be read, or stdin is empty.
    """
    if arg == "-":
        text = stdin.read()
        if not text.strip():
            raise CliError("the payload on stdin is empty; nothing was enqueued")
        return text
    if arg.startswith("@"):
        path = arg[1:]
        try:
            with open(path, encoding="utf-8") as file:
                return file.read()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise CliError(
                f"cannot read the payload file {path!r}: {reason}; nothing was enqueued"
            ) from None
    return arg


def parse_payload(text: str) -> Any:
    """JSON text as a payload, or a usage error naming where the JSON went wrong."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"the payload is not valid JSON: {exc}; nothing was enqueued") from None
    except RecursionError:
        # Python's parser gives up near its recursion limit (about a thousand levels).
        raise CliError(
            "the payload nests too deeply to be parsed (arrays or objects about a thousand "
            "levels deep); nothing was enqueued"
        ) from None


async def enqueue(dsn: str, schema: str, queue: str, payload: Any, options: dict[str, Any]) -> int:
    """Enqueue one job; its id (a duplicate's, with a dedup key that is taken)."""
    job_id, _ = await enqueue_reporting(dsn, schema, queue, payload, options)
    return job_id


async def enqueue_reporting(
    dsn: str, schema: str, queue: str, payload: Any, options: dict[str, Any]
) -> trioqueue.Enqueued:
    """Enqueue one job: its id and what was done (``added``, or the duplicate's fate)."""
    options = dict(options)
    dedup_key = options.pop("dedup_key", None)
    async with trioqueue.open_postgres(dsn, schema=schema, max_connections=1) as backend:
        if dedup_key is None or "depends_on" in options:
            # (with a policy other than keep, enqueue refuses: it needs a dedup key; and
            # depends_on with a dedup key it refuses too, naming the pair)
            job_id = await backend.enqueue(queue, payload, dedup_key=dedup_key, **options)
            return trioqueue.Enqueued(job_id, "added")
        return await backend.enqueue_deduplicated(queue, payload, dedup_key=dedup_key, **options)
