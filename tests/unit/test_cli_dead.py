"""``trioqueue dead`` and ``trioqueue dead redrive`` on the memory backend (docs/cli.rst,
docs/howto/dead-letters.rst): the count, the breakdowns, the page and its next cursor, the
filters, and a redrive that counts first and acts with ``--yes``.

Each command runs through ``main`` as a user runs it; ``trioqueue.open_postgres`` is stood in
for by a memory backend that the test's seed fills afresh on each open (a command opens its
backend inside its own ``trio.run``).
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import trioqueue
from trioqueue._types import Failure
from trioqueue.cli._commands import main
from trioqueue.cli._commands.dead import moment, moment_at

DSN = ["--dsn", "postgresql://nobody@127.0.0.1:1/none"]


async def _fail(
    backend: trioqueue.MemoryBackend, queue: str, error: str, error_type: str | None
) -> int:
    job_id = await backend.enqueue(queue, {"q": queue}, max_attempts=1)
    [claimed] = await backend.claim(queue, limit=1, worker_id="w", visibility_timeout=60)
    failure = Failure(job_id, claimed.job.claim_seq, error, None, error_type=error_type)
    await backend.fail([failure])
    return job_id


async def dead_seed(backend: trioqueue.MemoryBackend) -> None:
    """Jobs 1-3 fail for good (two ValueErrors on mail, a KeyError on sms), job 4 is
    cancelled before it runs, job 5 waits."""
    await _fail(backend, "mail", "ValueError: bad address \x1b[2J", "builtins.ValueError")
    await _fail(backend, "mail", "ValueError: bounced", "builtins.ValueError")
    await _fail(backend, "sms", "KeyError: 'number'", "builtins.KeyError")
    cancelled = await backend.enqueue("mail", "later", delay=3600)
    await backend.cancel(cancelled)
    await backend.enqueue("mail", "waits")


@pytest.fixture
def on_memory(monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[list[trioqueue.JobInfo]]]:
    """A seeded memory backend in PostgreSQL's place; returns the jobs as each command
    left them (read before its backend closed)."""

    def install() -> list[list[trioqueue.JobInfo]]:
        after: list[list[trioqueue.JobInfo]] = []

        @asynccontextmanager
        async def open_postgres(dsn: str, **options: object) -> AsyncIterator[Any]:
            async with trioqueue.open_memory() as backend:
                await dead_seed(backend)
                yield backend
                after.append(await backend.list_jobs())

        monkeypatch.setattr(trioqueue, "open_postgres", open_postgres)
        return after

    return install


def test_dead_counts_breaks_down_and_lists_newest_first(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    on_memory()
    assert main([*DSN, "dead"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "4 dead letter(s) match every dead letter"
    assert lines[2].split() == ["QUEUE", "COUNT"]
    assert lines[3].split() == ["mail", "3"]
    assert lines[4].split() == ["sms", "1"]
    assert lines[7].split() == ["builtins.ValueError", "2"]
    assert lines[8].split() == ["-", "1"]  # the cancellation: no attempt, no error type
    assert lines[11].split()[0] == "ID"
    ids = [line.split()[0] for line in lines[12:]]
    assert ids == ["4", "3", "2", "1"]
    assert "cancelled" in lines[12]
    assert "\\x1b[2J" in out  # stored text, escaped
    assert "\x1b" not in out
    assert "next page" not in out


def test_dead_pages_by_after_and_says_the_next_cursor(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    on_memory()
    assert main([*DSN, "dead", "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "next page: --after 3"
    assert main([*DSN, "dead", "--limit", "2", "--after", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[-5:-2]] == ["ID", "2", "1"]
    assert lines[-1] == "next page: --after 1"


def test_dead_filters_and_a_capped_count(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    on_memory()
    assert main([*DSN, "dead", "--error-type", "builtins.KeyError"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == ("1 dead letter(s) match --error-type builtins.KeyError")
    assert main([*DSN, "dead", "--queue", "mail", "--no-cancelled", "--error", "BOUNCED"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("1 dead letter(s) match")
    assert main([*DSN, "dead", "--sample", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "2+ dead letter(s) match every dead letter"
    assert lines[1] == "(counted among the newest 2; --sample N counts more)"
    assert main([*DSN, "dead", "--queue", "none"]) == 0
    assert capsys.readouterr().out == "no dead letters match --queue none\n"


def test_redrive_counts_first_and_acts_with_yes(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    after = on_memory()
    assert main([*DSN, "dead", "redrive", "--error-type", "builtins.ValueError"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines()[-1] == (
        "trioqueue dead: error: 2 dead letter(s) match --error-type builtins.ValueError; "
        "nothing done: add --yes to redrive them"
    )
    assert [i.status for i in after[-1]] == ["failed", "failed", "failed", "failed", "ready"]
    command = [*DSN, "dead", "redrive", "--error-type", "builtins.ValueError", "--yes"]
    assert main(command) == 0
    assert capsys.readouterr().out == (
        "2 dead letter(s) matching --error-type builtins.ValueError redriven "
        "(back on their queues)\n"
    )
    assert [i.status for i in after[-1]] == ["ready", "ready", "failed", "failed", "ready"]
    assert main([*DSN, "dead", "redrive", "--cancelled-only", "--queue", "sms"]) == 0
    assert "nothing to redrive" in capsys.readouterr().out


def test_error_type_dash_selects_the_dead_letters_with_none_recorded(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--error-type -``: the cancellation (no attempt ran), as the tables show it."""
    after = on_memory()
    assert main([*DSN, "dead", "--error-type", "-"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "1 dead letter(s) match --error-type -"
    assert [line.split()[0] for line in lines[-2:]] == ["ID", "4"]
    assert main([*DSN, "dead", "redrive", "--error-type", "-", "--yes"]) == 0
    assert capsys.readouterr().out == (
        "1 dead letter(s) matching --error-type - redriven (back on their queues)\n"
    )
    assert [i.status for i in after[-1]] == ["failed", "failed", "failed", "ready", "ready"]


def test_redrive_refuses_a_range_that_ends_before_it_starts(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    on_memory()
    command = [*DSN, "dead", "redrive", "--since", "1h", "--before", "2h", "--yes"]
    assert main(command) == 2
    assert "failed_since must not be after failed_before" in capsys.readouterr().err


def test_a_moment_is_an_iso_time_or_a_duration_ago() -> None:
    assert moment("2026-11-30T08:00:00+00:00") == datetime(2026, 11, 30, 8, tzinfo=UTC)
    local = moment("2026-11-30T08:00")
    assert local.utcoffset() is not None  # this machine's local time
    assert local.replace(tzinfo=None) == datetime(2026, 11, 30, 8)
    now = datetime(2026, 11, 30, 8, tzinfo=UTC)
    assert moment_at("2h", now) == now - timedelta(hours=2)
    assert moment_at("1d12h", now) == now - timedelta(days=1, hours=12)
    with pytest.raises(argparse.ArgumentTypeError, match="not a time"):
        moment("yesterday")
