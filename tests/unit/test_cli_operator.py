"""The operator's commands on the memory backend: ``show`` with its attempts, ``jobs`` with
or without cancellations, ``retry`` / ``delete --all-matching``, ``schedule
enable|disable|run``, ``audit`` and ``tables`` (docs/cli.rst).

Each command runs through ``main`` as a user runs it; ``trioqueue.open_postgres`` is stood in
for by a memory backend that the test's ``seed`` fills afresh on each open (a command opens
its backend inside its own ``trio.run``). The jobs' attempts come from a real worker pool
run on it, ended as soon as every job is finished.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import trio

import trioqueue
from trioqueue._operator_types import AttemptInfo
from trioqueue.cli._commands import main
from trioqueue.cli._commands.jobs import jobs_table
from trioqueue.cli._commands.show import job_report

NOW = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
DSN = ["--dsn", "postgresql://nobody@127.0.0.1:1/none"]
Seed = Callable[[trioqueue.MemoryBackend], Awaitable[None]]


async def _handler(payload: Any, ctx: trioqueue.JobContext) -> None:
    if payload == "fail":
        raise ValueError("boom \x1b[2J")


async def _run_until_finished(backend: trioqueue.MemoryBackend, job_ids: list[int]) -> None:
    """Run a pool on ``backend`` until every job of ``job_ids`` is finished."""
    config = trioqueue.WorkerConfig(handler=_handler, queue="q", max_job_duration=60)
    async with trio.open_nursery() as nursery:
        await nursery.start(trioqueue.run_workers, backend, [config])
        with trio.fail_after(30):
            for job_id in job_ids:
                await backend.wait_for(job_id)
        nursery.cancel_scope.cancel()


async def jobs_seed(backend: trioqueue.MemoryBackend) -> None:
    """Job 1 fails for good (a traceback), job 2 succeeds, job 3 is cancelled before it
    runs, job 4 waits on another queue."""
    failing = await backend.enqueue("q", "fail", max_attempts=1)
    fine = await backend.enqueue("q", "fine")
    await _run_until_finished(backend, [failing, fine])
    cancelled = await backend.enqueue("q", "later", delay=3600)
    await backend.cancel(cancelled)
    await backend.enqueue("other", "waits")


@pytest.fixture
def on_memory(monkeypatch: pytest.MonkeyPatch) -> Callable[[Seed], list[list[trioqueue.JobInfo]]]:
    """Stand a seeded memory backend in for PostgreSQL; returns the jobs as each command
    left them (read before its backend closed)."""

    def install(seed: Seed) -> list[list[trioqueue.JobInfo]]:
        after: list[list[trioqueue.JobInfo]] = []

        @asynccontextmanager
        async def open_postgres(dsn: str, **options: object) -> AsyncIterator[Any]:
            async with trioqueue.open_memory() as backend:
                await seed(backend)
                yield backend
                after.append(await backend.list_jobs())

        monkeypatch.setattr(trioqueue, "open_postgres", open_postgres)
        return after

    return install


def test_show_lists_the_attempts(on_memory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    on_memory(jobs_seed)
    assert main([*DSN, "show", "1"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "job 1 in queue q: failed (attempt 1 of 1)"
    at = lines.index("  attempts")
    assert lines[at + 1].startswith("    #1 failed    claimed ")
    assert " finished +" in lines[at + 1] and " by " in lines[at + 1]
    assert lines[at + 2] == "       ValueError: boom \\x1b[2J"  # escaped, below, deeper
    assert "\x1b" not in out


def test_show_ends_with_the_last_failures_traceback() -> None:
    """Of the attempts with a traceback, the last one's, below its field, escaped."""
    info = trioqueue.JobInfo(
        id=1, queue="q", payload=None, status="failed", attempts=2, max_attempts=2,
        priority=0, progress=None, last_error="ValueError: two", created_at=NOW,
        finished_at=NOW,
    )  # fmt: skip
    attempts = [attempt(1, "Traceback:\n  one"), attempt(2, "Traceback:\n  two\x1b[2J")]
    lines = job_report(info, attempts)
    at = lines.index("  traceback of attempt 2")
    assert lines[at:] == [
        "  traceback of attempt 2",
        "            Traceback:",
        "              two\\x1b[2J",
    ]


def attempt(number: int, traceback: str) -> AttemptInfo:
    return AttemptInfo(
        job_id=1, attempt=number, claim_seq=number, outcome="failed", worker_id="w",
        host="h", claimed_at=NOW, started_at=NOW, finished_at=NOW + timedelta(seconds=1),
        run_seconds=1.0, wait_seconds=0.0, error_type="ValueError", error="ValueError: x",
        traceback=traceback,
    )  # fmt: skip


def test_show_labels_a_cancellation_and_a_job_with_no_attempt(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    on_memory(jobs_seed)
    assert main([*DSN, "show", "3"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "job 3 in queue q: failed (cancelled) (attempt 0 of 10)"
    assert "attempts" not in out and "traceback" not in out


@pytest.mark.parametrize(
    ("flag", "ids"),
    [([], ["1", "3"]), (["--no-cancelled"], ["1"]), (["--cancelled-only"], ["3"])],
)
def test_jobs_tells_failures_from_cancellations(
    on_memory: Any, capsys: pytest.CaptureFixture[str], flag: list[str], ids: list[str]
) -> None:
    on_memory(jobs_seed)
    assert main([*DSN, "jobs", "--status", "failed", *flag]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [row.split()[0] for row in rows] == ids


def test_jobs_refuses_both_cancellation_flags_and_watch_with_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit:
        main([*DSN, "jobs", "--no-cancelled", "--cancelled-only"])
    assert exit.value.code == 2
    capsys.readouterr()
    assert main([*DSN, "jobs", "--watch", "--no-cancelled"]) == 2
    assert "not with --no-cancelled" in capsys.readouterr().err


def test_retry_all_matching_counts_first_and_acts_with_yes(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    after = on_memory(jobs_seed)
    assert main([*DSN, "retry", "--all-matching", "--search", "boom"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines()[-1] == (  # after the seeding pool's log line of the failure
        "trioqueue retry: error: 1 job(s) match --search boom --status failed; "
        "nothing done: add --yes to retry them"
    )
    assert [info.status for info in after[-1]] == ["failed", "succeeded", "failed", "ready"]
    assert main([*DSN, "retry", "--all-matching", "--search", "boom", "--yes"]) == 0
    assert capsys.readouterr().out == (
        "1 job(s) matching --search boom --status failed retried (back on their queues)\n"
    )
    assert [info.status for info in after[-1]] == ["ready", "succeeded", "failed", "ready"]


def test_retry_all_matching_can_leave_cancellations_out(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    after = on_memory(jobs_seed)
    assert main([*DSN, "retry", "--all-matching", "--no-cancelled", "--yes"]) == 0
    assert capsys.readouterr().out == (
        "1 job(s) matching --no-cancelled --status failed retried (back on their queues)\n"
    )
    # job 1 (a real failure) is back; job 3 (cancelled before it ran) stays failed
    assert [info.status for info in after[-1]] == ["ready", "succeeded", "failed", "ready"]
    assert main([*DSN, "delete", "--all-matching", "--cancelled-only", "--yes"]) == 0
    assert capsys.readouterr().out == "1 job(s) matching --cancelled-only deleted\n"
    assert [info.id for info in after[-1]] == [1, 2, 4]


def test_delete_all_matching_deletes_only_what_matches(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    after = on_memory(jobs_seed)
    assert main([*DSN, "delete", "--all-matching", "--search", "later", "--yes"]) == 0
    assert capsys.readouterr().out == "1 job(s) matching --search later deleted\n"
    assert [info.id for info in after[-1]] == [1, 2, 4]
    assert main([*DSN, "delete", "--all-matching", "--queue", "none"]) == 0
    assert capsys.readouterr().out == "no job matches --queue none: nothing to delete\n"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["retry"], "give the job's ID, or --all-matching with filters"),
        (["retry", "1", "--all-matching"], "give ID or --all-matching"),
        (["delete", "1", "--queue", "q"], "give ID or --all-matching"),
        (["delete", "1", "--yes"], "give ID or --all-matching"),
    ],
)
def test_an_id_and_filters_exclude_each_other(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*DSN, *argv]) == 2
    assert says in capsys.readouterr().err


def test_retry_takes_no_status(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([*DSN, "retry", "--all-matching", "--status=ready"])
    assert "unrecognized arguments: --status=ready" in capsys.readouterr().err


# -- schedules, the audit log, table health ---------------------------------------------------


async def schedule_seed(backend: trioqueue.MemoryBackend) -> None:
    await backend.set_schedule("nightly", "q", "0 3 * * *", payload={"n": 1})
    await backend.record_audit("queue.pause", "q\x1b[2J", "s1234", {"paused": True})


def test_schedule_disable_enable_and_run(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    after = on_memory(schedule_seed)
    assert main([*DSN, "schedule", "disable", "nightly"]) == 0
    assert capsys.readouterr().out == "schedule 'nightly' disabled\n"
    assert main([*DSN, "schedule", "enable", "nightly"]) == 0
    assert capsys.readouterr().out == "schedule 'nightly' enabled\n"
    assert main([*DSN, "schedule", "run", "nightly"]) == 0
    [job_id] = capsys.readouterr().out.split()
    [job] = after[-1]
    assert (str(job.id), job.queue, job.payload) == (job_id, "q", {"n": 1})
    for action in ("enable", "disable", "run"):
        assert main([*DSN, "schedule", action, "weekly"]) == 1
        assert capsys.readouterr().err == (
            "trioqueue schedule: error: no schedule named 'weekly'\n"
        )


def test_schedule_list_says_disabled(on_memory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    async def seed(backend: trioqueue.MemoryBackend) -> None:
        await schedule_seed(backend)
        await backend.set_schedule_enabled("nightly", False)

    on_memory(seed)
    assert main([*DSN, "schedule", "list"]) == 0
    [_, row] = capsys.readouterr().out.splitlines()
    assert row.split()[7:10] == ["UTC", "disabled", "-"]  # after the cron's five fields


def test_audit_lists_the_entries_escaped(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    on_memory(schedule_seed)
    assert main([*DSN, "audit"]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == ["ID", "AT", "ACTION", "TARGET", "SESSION", "DETAIL"]
    assert row.split()[3:] == ["queue.pause", "q\\x1b[2J", "s1234", '{"paused":true}']
    assert main([*DSN, "audit", "--action", "job.cancel"]) == 0
    assert capsys.readouterr().out == "no audit entries in schema trioqueue\n"


def test_tables_shows_the_rows_and_the_oldest_work(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    on_memory(jobs_seed)
    assert main([*DSN, "tables"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["TABLE", "SIZE", "LIVE"]
    assert any(line.startswith("jobs ") for line in lines)
    assert lines[-2] == "oldest running: none"
    assert lines[-1].startswith("oldest ready: job 4, for ")


def test_jobs_shows_when_each_finished_and_how_long_it_took() -> None:
    created = NOW
    finished = NOW + timedelta(minutes=3, seconds=5)
    common: dict[str, Any] = {
        "queue": "q", "payload": None, "attempts": 1, "max_attempts": 3, "priority": 0,
        "progress": None, "last_error": None, "created_at": created,
    }  # fmt: skip
    done = trioqueue.JobInfo(id=1, status="succeeded", finished_at=finished, **common)
    waiting = trioqueue.JobInfo(id=2, status="ready", finished_at=None, **common)
    header, *rows = jobs_table([done, waiting])
    assert header.split()[6:9] == ["CREATED", "FINISHED", "TOOK"]
    local = finished.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    assert rows[0].split()[8:11] == [*local.split(), "3m05s"]
    assert rows[1].split()[8:10] == ["-", "-"]


async def many_seed(backend: trioqueue.MemoryBackend) -> None:
    """Five jobs waiting on one queue."""
    await backend.enqueue_many("q", [1, 2, 3, 4, 5])


def test_jobs_pages_by_cursor_and_says_the_next_one(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    on_memory(many_seed)
    assert main([*DSN, "jobs", "--limit", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:3]] == ["1", "2"]
    assert lines[-2:-1] == [""]
    word, cursor = lines[-1].rsplit(" ", 1)
    assert word == "next page: --after"
    assert main([*DSN, "jobs", "--limit", "2", "--after", cursor]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:3]] == ["3", "4"]
    cursor = lines[-1].rsplit(" ", 1)[1]
    assert main([*DSN, "jobs", "--limit", "2", "--after", cursor]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["5"]
    assert "next page" not in out  # not a full page: the last one


def test_jobs_refuses_a_bad_cursor_and_one_with_an_offset(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    on_memory(many_seed)
    assert main([*DSN, "jobs", "--after", "not-a-cursor"]) == 2
    assert "cursor" in capsys.readouterr().err
    assert main([*DSN, "jobs", "--after", "x", "--offset", "3"]) == 2
    assert "give --offset or --after, not both" in capsys.readouterr().err
    assert main([*DSN, "jobs", "--after", "x", "--watch"]) == 2
    assert "not with --after" in capsys.readouterr().err
