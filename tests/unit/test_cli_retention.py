"""``trioqueue retention [set|clear|audit]`` and ``trioqueue prune`` on the memory backend
(docs/cli.rst; docs/protocol.rst §15).

Each command runs through ``main`` as a user runs it; ``trioqueue.open_postgres`` is stood in
for by a memory backend that the test's ``seed`` fills afresh on each open, and whose
settings and jobs are read back as the command left them. Each command's ``trio.run`` gets
a ``MockClock``, so that a seed can let days pass (``trio.sleep``) and its jobs grow old
without the test waiting.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import trio
import trio.testing

import trioqueue
from tests._hostile_text import unsafe_in
from trioqueue._types import Ack, Failure
from trioqueue.cli import _clock as cli_clock
from trioqueue.cli._commands import main
from trioqueue.cli._commands.prune import LEASE_SECONDS, preview_report
from trioqueue.cli._commands.retention import maintainer_text, settings_report
from trioqueue.cli._durations import duration_text, parse_duration
from trioqueue.cli._escape import say
from trioqueue.testing import hang

DSN = ["--dsn", "postgresql://nobody@127.0.0.1:1/none"]
DAY = 86_400.0
Seed = Callable[[trioqueue.MemoryBackend], Awaitable[None]]


@dataclass(frozen=True)
class After:
    """A store as a command left it."""

    retention: trioqueue.Retention
    maintainer: trioqueue.MaintainerInfo | None
    jobs: list[trioqueue.JobInfo]
    audit: list[trioqueue.AuditEntry]


async def nothing(backend: trioqueue.MemoryBackend) -> None:
    pass


@pytest.fixture
def on_memory(monkeypatch: pytest.MonkeyPatch) -> Callable[[Seed], list[After]]:
    """Stand a seeded memory backend in for PostgreSQL; returns the stores as each command
    left them (read before its backend closed). No command opens one before its input is
    checked: an empty list says nothing was even connected to."""
    real_run = trio.run

    def run(*args: Any, **kwargs: Any) -> Any:
        return real_run(*args, clock=trio.testing.MockClock(autojump_threshold=0), **kwargs)

    monkeypatch.setattr(trio, "run", run)

    def install(seed: Seed) -> list[After]:
        after: list[After] = []

        @asynccontextmanager
        async def open_postgres(dsn: str, **options: object) -> AsyncIterator[Any]:
            async with trioqueue.open_memory() as backend:
                await seed(backend)
                try:
                    yield backend
                finally:  # also after an error: what it left written
                    after.append(
                        After(
                            await backend.get_retention(),
                            await backend.maintainer(),
                            await backend.list_jobs(limit=1000),
                            await backend.list_audit(1000),
                        )
                    )

        monkeypatch.setattr(trioqueue, "open_postgres", open_postgres)
        return after

    return install


async def finish(
    backend: trioqueue.MemoryBackend, queue: str, *, succeeded: int = 0, failed: int = 0
) -> None:
    """``succeeded`` jobs of ``queue`` that succeed and ``failed`` that fail for good."""
    for n, outcome in [(succeeded, "ok"), (failed, "boom")]:
        if not n:
            continue
        await backend.enqueue_many(queue, [outcome] * n, max_attempts=1)
        claimed = await backend.claim(queue, limit=n, worker_id="w", visibility_timeout=60)
        if outcome == "ok":
            await backend.ack([Ack(c.job.id, c.job.claim_seq) for c in claimed])
        else:
            await backend.fail([Failure(c.job.id, c.job.claim_seq, "boom", None) for c in claimed])


def policies(after: After) -> dict[str | None, tuple[float | None, float | None]]:
    r = after.retention
    own = {p.queue: (p.succeeded, p.failed) for p in r.queues}
    return {None: (r.default.succeeded, r.default.failed)} | own


# -- durations ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90.0), ("90", 90.0), ("1.5", 1.5), ("30m", 1800.0), ("12h", 43_200.0),
        ("7d", 7 * DAY), ("2w", 14 * DAY), ("1d12h", 1.5 * DAY), (" 7D ", 7 * DAY),
        ("forever", None), ("FOREVER", None),
    ],
)  # fmt: skip
def test_durations_parse(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "d", "7x", "-1d", "1d 2h", "1e3", "inf", "nan", "9" * 400])
def test_a_non_duration_is_refused_with_the_spellings_that_are(text: str) -> None:
    with pytest.raises(ValueError, match=r"not a duration: .*(e\.g\. 90s|too large)"):
        parse_duration(text)


@pytest.mark.parametrize("seconds", [90.0, 1.5, 0.25, 7 * DAY, 30 * DAY, 1.5 * DAY, 3661.0, None])
def test_a_duration_reads_back_as_it_is_shown(seconds: float | None) -> None:
    assert parse_duration(duration_text(seconds)) == seconds


def test_durations_are_shown_in_days_at_most() -> None:
    assert [duration_text(s) for s in (7 * DAY, 30 * DAY, 90.0, 1.5 * DAY, None)] == [
        "7d", "30d", "1m30s", "1d12h", "forever"
    ]  # fmt: skip


# -- retention: showing ----------------------------------------------------------------------


def test_retention_shows_the_defaults_and_no_maintainer(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    on_memory(nothing)
    assert main([*DSN, "retention"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "POLICY   SUCCEEDED  FAILED",
        "default  7d         30d",
        "",
        "audit log: kept 90d",
        "maintainer: none (no pool has taken the lease)",
    ]


def test_retention_shows_each_queues_own_and_the_maintainer(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    async def seed(backend: trioqueue.MemoryBackend) -> None:
        await backend.set_retention("mail", succeeded=DAY, failed=None)
        await backend.set_audit_retention(None)
        await backend.claim_maintainer("host-1:42:abcd", 30.0)

    on_memory(seed)
    assert main([*DSN, "retention"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        "POLICY      SUCCEEDED  FAILED",
        "default     7d         30d",
        "queue mail  1d         forever",
    ]
    assert lines[4] == "audit log: kept forever"
    assert lines[5].startswith("maintainer: host-1:42:abcd (lease 1), until ")
    assert re.search(r" UTC \(in (29|30)s\)$", lines[5])  # by the database's clock


def test_the_maintainers_time_left_is_counted_on_the_databases_clock(
    on_memory: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """This machine's clock ten minutes ahead of the database's: the lease, taken for an
    hour by the database's clock, still has an hour left (not 50 minutes)."""
    ahead = 600.0

    async def seed(backend: trioqueue.MemoryBackend) -> None:
        backend.wall_clock = lambda: trio.current_time() + ahead
        await backend.claim_maintainer("host-1:42:abcd", 3600.0)

    monkeypatch.setattr(
        cli_clock, "local_now", lambda: datetime.now(UTC) + timedelta(seconds=ahead)
    )
    on_memory(seed)
    assert main([*DSN, "retention"]) == 0
    [line] = [x for x in capsys.readouterr().out.splitlines() if x.startswith("maintainer:")]
    assert re.search(r" UTC \(in (59m59s|1h00m)\)$", line), line


def test_a_lapsed_lease_says_no_pool_holds_it() -> None:
    at = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    info = trioqueue.MaintainerInfo("w", 3, at, at + timedelta(seconds=60))
    assert maintainer_text(info, at + timedelta(seconds=61)) == (
        "w (lease 3), until 2026-03-28 12:01:00 UTC (lapsed: no pool holds it now)"
    )


def test_hostile_queue_names_and_holders_are_shown_escaped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No queue so named can be given a policy now (``set_retention`` refuses it), but a
    store an earlier release wrote may hold one; a holder is any worker id."""
    at = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    hostile = "\x1b]0;pwned\x07\u202eliam\nforged"
    retention = trioqueue.Retention(
        trioqueue.RetentionPolicy(None, 7 * DAY, 30 * DAY),
        (trioqueue.RetentionPolicy(hostile, DAY, DAY),),
        None,
    )
    lease = trioqueue.MaintainerInfo("\x1b[2J\u2066w", 1, at, at + timedelta(seconds=30))
    say(*settings_report((retention, lease), at))
    out = capsys.readouterr().out
    assert unsafe_in(out) == []
    assert "queue \\x1b]0;pwned\\x07\\u202eliam\\nforged  1d" in out
    assert "maintainer: \\x1b[2J\\u2066w (lease 1)" in out


# -- retention: changing ---------------------------------------------------------------------


def test_set_a_queues_policy(on_memory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    after = on_memory(nothing)
    assert main([*DSN, "retention", "set", "mail", "--succeeded", "1d", "--failed", "forever"]) == 0
    assert policies(after[-1]) == {None: (7 * DAY, 30 * DAY), "mail": (DAY, None)}
    assert "queue mail  1d         forever" in capsys.readouterr().out


def test_set_keeps_the_kind_not_given_as_it_is_in_force(on_memory: Any) -> None:
    """A queue without a policy of its own starts from the default's values; one with
    its own keeps its own."""

    async def seed(backend: trioqueue.MemoryBackend) -> None:
        await backend.set_retention(None, succeeded=2 * DAY, failed=3 * DAY)
        await backend.set_retention("sms", succeeded=DAY, failed=DAY)

    after = on_memory(seed)
    assert main([*DSN, "retention", "set", "mail", "--failed", "12h"]) == 0
    assert main([*DSN, "retention", "set", "sms", "--succeeded", "90s"]) == 0
    assert main([*DSN, "retention", "set", "--default", "--failed", "forever"]) == 0
    assert policies(after[0])["mail"] == (2 * DAY, 0.5 * DAY)
    assert policies(after[1])["sms"] == (90.0, DAY)
    assert policies(after[2])[None] == (2 * DAY, None)


@pytest.mark.parametrize(
    ("argv", "problems"),
    [
        pytest.param(
            ["--succeeded", "3x", "--failed", "bogus"],
            ["give the QUEUE to set, or --default", "--succeeded: not a duration: '3x'",
             "--failed: not a duration: 'bogus'"],
            id="no-queue-two-bad-durations",
        ),
        pytest.param(
            ["mail", "--default"],
            ["give a QUEUE or --default, not both", "give --succeeded, --failed or both"],
            id="both-targets-no-kind",
        ),
    ],
)  # fmt: skip
def test_bad_lines_name_every_problem_and_connect_to_nothing(
    on_memory: Any, capsys: pytest.CaptureFixture[str], argv: list[str], problems: list[str]
) -> None:
    after = on_memory(nothing)
    assert main([*DSN, "retention", "set", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trioqueue retention: error: ")
    assert err.count("\n") == 1  # one line
    for problem in problems:
        assert problem in err
    assert after == []


def test_values_the_backend_refuses_are_named_together_before_connecting(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The backend's own checks, asked first: a bad queue name and a keep-time of 0 are one
    usage error, even were the database unreachable, and nothing is written."""
    after = on_memory(nothing)
    assert main([*DSN, "retention", "set", "", "--succeeded", "0s", "--failed", "1d"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "queue" in err and "succeeded" in err
    assert after == []


@pytest.mark.parametrize("queue", ["", "a\u202eb", "x" * 129])
def test_clear_checks_the_queue_name_before_connecting(
    on_memory: Any, capsys: pytest.CaptureFixture[str], queue: str
) -> None:
    after = on_memory(nothing)
    assert main([*DSN, "retention", "clear", queue]) == 2
    assert "queue" in capsys.readouterr().err
    assert after == []


def test_clear_drops_a_queues_own_policy(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    async def seed(backend: trioqueue.MemoryBackend) -> None:
        await backend.set_retention("mail", succeeded=DAY, failed=DAY)

    after = on_memory(seed)
    assert main([*DSN, "retention", "clear", "mail"]) == 0
    assert main([*DSN, "retention", "clear", "sms"]) == 0
    assert policies(after[0]) == {None: (7 * DAY, 30 * DAY)}
    out = capsys.readouterr().out
    assert out.count("queue sms had no retention of its own: the default applies") == 1


def test_audit_sets_the_audit_logs_retention(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    after = on_memory(nothing)
    assert main([*DSN, "retention", "audit", "30d"]) == 0
    assert main([*DSN, "retention", "audit", "forever"]) == 0
    assert [a.retention.audit for a in after] == [30 * DAY, None]
    assert main([*DSN, "retention", "audit", "soon"]) == 2
    assert "not a duration: 'soon'" in capsys.readouterr().err
    assert len(after) == 2


# -- prune --------------------------------------------------------------------------------------


async def old_jobs(backend: trioqueue.MemoryBackend) -> None:
    """mail: 3 succeeded and 2 failed, kept a day; sms: 1 succeeded, on the default (7
    days); then 2 days pass, and one job of each queue is left unfinished."""
    await backend.set_retention("mail", succeeded=DAY, failed=DAY)
    await finish(backend, "mail", succeeded=3, failed=2)
    await finish(backend, "sms", succeeded=1)
    await backend.enqueue("mail", "waits")
    await backend.enqueue("sms", "waits")
    await trio.sleep(2 * DAY)


def test_prune_deletes_what_the_policies_say_and_nothing_else(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    after = on_memory(old_jobs)
    assert main([*DSN, "prune"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "QUEUE  STATUS     DELETED",
        "mail   failed     2",
        "mail   succeeded  3",
        "",
        "pruned 5 jobs and 0 audit entries in 1 batch",
        "oldest finished job kept: finished 2d00h ago",
    ]
    left = sorted((j.queue, j.status) for j in after[-1].jobs)
    assert left == [("mail", "ready"), ("sms", "ready"), ("sms", "succeeded")]
    assert after[-1].maintainer is not None
    assert after[-1].maintainer.holder.startswith("trioqueue-prune@")


async def old_jobs_and_audit(backend: trioqueue.MemoryBackend) -> None:
    """:func:`old_jobs`, and an audit entry kept a day, two days old."""
    await old_jobs(backend)
    await backend.record_audit("queue.pause", "mail", "open", {})
    await backend.set_audit_retention(DAY)
    await trio.sleep(2 * DAY)


def test_prune_works_in_batches_and_gives_the_lease_back(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    after = on_memory(old_jobs_and_audit)
    assert main([*DSN, "prune", "--batch-size", "2"]) == 0
    out = capsys.readouterr().out
    assert "pruned 5 jobs and 1 audit entry in 3 batches" in out
    lease = after[-1].maintainer
    assert lease is not None
    # Given back: it ends before the 60 s the command took it (and renewed it) for.
    assert lease.expires_at < lease.acquired_at + timedelta(seconds=LEASE_SECONDS)


def test_a_pool_takes_the_lease_at_once_after_prune(
    on_memory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    claims: list[int | None] = []
    on_memory(nothing)  # the MockClock

    # One store for both: the command's open, then a pool's claim, in one block.
    @asynccontextmanager
    async def open_postgres(dsn: str, **options: object) -> AsyncIterator[Any]:
        async with trioqueue.open_memory() as backend:
            await old_jobs(backend)
            yield backend
            claims.append(await backend.claim_maintainer("pool-2", 30.0))

    monkeypatch.setattr(trioqueue, "open_postgres", open_postgres)
    assert main([*DSN, "prune"]) == 0
    assert claims == [2]  # the command held fence 1, and gave it back


def test_prune_refuses_while_a_live_pool_holds_the_lease(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    async def seed(backend: trioqueue.MemoryBackend) -> None:
        await old_jobs(backend)
        await backend.claim_maintainer("host-1:42:abcd", 60.0)

    after = on_memory(seed)
    assert main([*DSN, "prune"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("trioqueue prune: error: the maintainer lease is held by host-1:42:abcd")
    assert "prunes by these policies on its own" in err
    assert len(after[-1].jobs) == 8  # nothing deleted
    assert after[-1].maintainer is not None and after[-1].maintainer.holder == "host-1:42:abcd"


@pytest.mark.parametrize(
    ("value", "message"),
    [("bogus", "--older-than: not a duration: 'bogus'"), ("forever", "would delete nothing")],
)
def test_prune_older_than_checks_its_duration_first(
    on_memory: Any, capsys: pytest.CaptureFixture[str], value: str, message: str
) -> None:
    after = on_memory(old_jobs)
    assert main([*DSN, "prune", "--older-than", value]) == 2
    assert message in capsys.readouterr().err
    assert after == []


def test_prune_older_than_deletes_by_age_in_batches(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The older prune, by age alone (``PostgresBackend.prune``; the memory backend has no
    such call, so the model's statement stands in for it here)."""
    calls: list[tuple[float, int]] = []

    async def seed(backend: trioqueue.MemoryBackend) -> None:
        await old_jobs(backend)

        async def prune(older_than: float, *, limit: int) -> int:
            calls.append((older_than, limit))
            return backend._model.prune(trio.current_time(), older_than, limit)

        backend.prune = prune  # type: ignore[attr-defined]

    after = on_memory(seed)
    assert main([*DSN, "prune", "--older-than", "1d", "--batch-size", "4"]) == 0
    assert capsys.readouterr().out == "pruned 6 jobs finished more than 1d ago, in 2 batches\n"
    assert calls == [(DAY, 4), (DAY, 4)]
    assert sorted(j.status for j in after[-1].jobs) == ["ready", "ready"]


def test_a_dry_run_counts_what_prune_would_delete_and_deletes_nothing(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    async def seed(backend: trioqueue.MemoryBackend) -> None:
        await old_jobs_and_audit(backend)
        await backend.claim_maintainer("host-1:42:abcd", 60.0)  # a live pool: no matter

    after = on_memory(seed)
    assert main([*DSN, "prune", "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "QUEUE  STATUS     WOULD DELETE",
        "mail   failed     2",
        "mail   succeeded  3",
        "",
        "would prune 5 jobs and 1 audit entry past their retention",
        "dry run: nothing was deleted",
    ]
    assert (len(after[-1].jobs), len(after[-1].audit)) == (8, 1)
    assert after[-1].maintainer is not None
    assert after[-1].maintainer.holder == "host-1:42:abcd"  # no lease taken


def test_a_dry_run_by_age_counts_every_old_job(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    after = on_memory(old_jobs)
    assert main([*DSN, "prune", "--older-than", "1d", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == [
        "would prune 6 jobs finished more than 1d ago",
        "dry run: nothing was deleted",
    ]
    assert "sms    succeeded  1" in out
    assert len(after[-1].jobs) == 8


def test_a_dry_run_shows_hostile_queue_names_escaped() -> None:
    """Such a queue can no longer be enqueued to, but a store an earlier release wrote may
    hold one."""
    hostile = "\x1b]52;c;bad\x07q"
    found = trioqueue.RetentionPreview(due={(hostile, "failed"): 2}, audit_due=0)
    lines = preview_report(found, None)
    assert all(unsafe_in(line) == [] for line in lines)
    assert lines[1] == "\\x1b]52;c;bad\\x07q  failed  2"
    assert lines[-2] == "would prune 2 jobs and 0 audit entries past their retention"


def test_prune_stops_when_its_lease_is_taken_over(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A renewal that fails between two batches (the lease ran out and a pool took it)
    ends the pass: what was deleted is reported, and the pool prunes the rest."""

    async def seed(backend: trioqueue.MemoryBackend) -> None:
        await old_jobs(backend)

        async def renew_maintainer(holder: str, seq: int, lease: float) -> bool:
            return False

        backend.renew_maintainer = renew_maintainer  # type: ignore[method-assign]

    after = on_memory(seed)
    assert main([*DSN, "prune", "--batch-size", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "pruned 2 jobs and 0 audit entries in 1 batch" in out
    assert (
        out[-1]
        == "stopped early: the maintainer lease ran out or was taken over; the maintainer prunes the rest"
    )
    assert len(after[-1].jobs) == 6


def test_prune_gives_up_a_batch_at_its_local_fence(
    on_memory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A batch that hangs past the lease the command holds is given up at the local
    fence (docs/protocol.rst §15), without the database's answer: the lease may be
    another holder's by then."""

    async def seed(backend: trioqueue.MemoryBackend) -> None:
        await old_jobs(backend)
        backend.inject("prune_retained", hang())

    after = on_memory(seed)
    assert main([*DSN, "prune"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "pruned 0 jobs and 0 audit entries in 0 batches" in out
    assert out[-1].startswith("stopped early: the maintainer lease ran out")
    assert len(after[-1].jobs) == 8
