"""Stored strings cannot act on the terminal: every printer of the command line shows control
characters, bidi controls and line breaks escaped (trioqueue/cli/_escape.py).

What counts as unsafe is defined here on its own, from Unicode's categories and names, so
that a gap in the module's own list fails these tests. The commands on a real server, with
hostile strings written into every stored field, are in tests/postgres/test_cli_postgres.py.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import io
import logging
import re
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import trioqueue
from tests._hostile_text import unsafe, unsafe_in
from trioqueue._operator_types import AttemptInfo
from trioqueue.cli import _commands as cli
from trioqueue.cli import _schedule, _watch
from trioqueue.cli._commands import audit as audit_cmd
from trioqueue.cli._commands import common as common_cmd
from trioqueue.cli._commands import enqueue as enqueue_cmd
from trioqueue.cli._commands import job as job_cmd
from trioqueue.cli._commands import jobs as jobs_cmd
from trioqueue.cli._commands import migrate as migrate_cmd
from trioqueue.cli._commands import queue as queue_cmd
from trioqueue.cli._commands import schedule as schedule_cmd
from trioqueue.cli._commands import show as show_cmd
from trioqueue.cli._commands import status as status_cmd
from trioqueue.cli._commands import tables as tables_cmd
from trioqueue.cli._escape import say, visible, visible_lines
from trioqueue.cli._terminal import RESET, STATUS_STYLES, TextLogFormatter, clip

NOW = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)

#: Strings that forge lines, recolour or retitle the terminal, or read backwards.
HOSTILE = [
    "\x1b[31mred\x1b[0m",
    "\x1b]0;pwned\x07",
    "\x1b]8;;http://attacker.test\x1b\\link\x1b]8;;\x1b\\",
    "x\r\n  error     none",
    "x\rfake",
    "\x9b2J",  # a C1 CSI: clears the screen on some terminals
    "\u202eliam",
    "a\u2066b\u2069c\u200f",
    "\x7f\x00\x08\x0b\x0c\x1c\x85\u2028\u2029",
]
hostile_text = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(
        st.one_of(
            st.characters(codec="utf-8"),
            st.characters(categories=["Cc", "Cf", "Zl", "Zp"]),
            st.sampled_from(["\x1b", "\r", "\n", "\u202e", "\x9b"]),
        ),
        max_size=30,
    ),
)


# -- the function ---------------------------------------------------------------------------


@given(st.text(st.characters(codec="utf-8") | st.characters(categories=["Cs", "Cc", "Cf"])))
def test_visible_escapes_every_unsafe_character_and_nothing_else(text: str) -> None:
    shown = visible(text)
    assert not [c for c in shown if unsafe(c)]
    assert visible(shown) == shown
    if not any(unsafe(c) for c in text):
        assert shown == text


def test_visible_shows_what_it_escaped() -> None:
    assert (
        visible("a\x1b[31mb\r\nc\td\u202ee\x85\x7f") == "a\\x1b[31mb\\r\\nc\\td\\u202ee\\x85\\x7f"
    )
    assert visible('{"path": "C:\\\\x"} ü 日本 🙂') == '{"path": "C:\\\\x"} ü 日本 🙂'
    assert visible_lines("one\r\ntwo\n\x1b") == ["one\\r", "two", "\\x1b"]


def test_say_writes_one_visible_line_per_argument() -> None:
    out = io.StringIO()
    say("a\nb", "\x1b[2J", "", file=out)
    assert out.getvalue() == "a\\nb\n\\x1b[2J\n\n"


def test_clip_escapes_before_it_cuts() -> None:
    assert clip("\x1b[31m" + "x" * 40, 12) == "\\x1b[31mx..."


# -- every printer ---------------------------------------------------------------------------


def job(text: str, **changes: Any) -> trioqueue.JobInfo:
    """A job with ``text`` in every field that holds text."""
    fields: dict[str, Any] = {
        "id": 7,
        "queue": text,
        "payload": {text: [text, "\x85"]},
        "status": "failed",
        "attempts": 1,
        "max_attempts": 3,
        "priority": 0,
        "progress": 0.5,
        "last_error": f"{text}\nsecond line {text}",
        "created_at": NOW,
        "finished_at": NOW,
        "worker_id": text,
        "result": text,
        "group": text,
        "cancel_requested_at": NOW,
        "finished_by": text,
        "checkpoint": {text: [text]},
        "checkpointed_at": NOW,
        "snoozes": 2,
        "waiting_on": (3, 4),
    }
    return trioqueue.JobInfo(**(fields | changes))


def attempt(text: str, number: int = 1) -> AttemptInfo:
    """An attempt with ``text`` in every field that holds text."""
    return AttemptInfo(
        job_id=7,
        attempt=number,
        claim_seq=number,
        outcome="failed",
        worker_id=text,
        host=text,
        claimed_at=NOW,
        started_at=NOW + timedelta(seconds=0.001),
        finished_at=NOW + timedelta(seconds=0.5),
        run_seconds=0.499,
        wait_seconds=1.0,
        error_type=text,
        error=f"ValueError: {text}",
        traceback=f"Traceback (most recent call last):\n  File {text}\nValueError: {text}",
    )


def audit_entry(text: str) -> trioqueue.AuditEntry:
    return trioqueue.AuditEntry(
        id=1, at=NOW, action=text, target=text, session=text, detail={text: text}
    )


def table_health(text: str) -> trioqueue.TableHealth:
    size = trioqueue.TableSize(
        name=text,
        total_bytes=8192,
        live_rows=3,
        dead_rows=1,
        last_autovacuum=NOW,
        last_autoanalyze=None,
    )
    index = trioqueue.TableSize(text, 16384, None, None, None, None)
    return trioqueue.TableHealth((size,), (index,), NOW, 7, None, None)


def stats(text: str) -> dict[str, trioqueue.QueueStats]:
    return {text: trioqueue.QueueStats(counts={"ready": 2}, oldest_ready_age=3.0, paused=True)}


def schedule(text: str) -> trioqueue.ScheduleInfo:
    return trioqueue.ScheduleInfo(
        name=text,
        queue=text,
        cron=text,
        timezone=text,
        payload=text,
        priority=0,
        max_attempts=1,
        next_run_at=NOW + timedelta(hours=1),
        last_run_at=NOW,
    )


def worker(text: str) -> trioqueue.WorkerInfo:
    return trioqueue.WorkerInfo(
        worker_id=text,
        host=text,
        pid=1,
        queue=text,
        concurrency=1,
        in_flight=0,
        abandoned_renewals=0,
        last_beat_at=NOW,
        started_at=NOW,
        stale=False,
        clock_skew=1.0,
        clock_verdict=text,  # a row another tool wrote may hold any verdict
    )


def printed(text: str) -> dict[str, list[str]]:
    """What each printer makes of ``text`` in every field."""
    info = job(text)
    succeeded = job(text, status="succeeded")
    title = f"trioqueue jobs --watch --queue {text}"
    frame = functools.partial(_watch.watch_frame, title=title, problem=text, width=300, height=40)
    return {
        "jobs": jobs_cmd.jobs_table([info, succeeded]),
        "show": show_cmd.job_report(info, [attempt(text), attempt(text, 2)])
        + show_cmd.job_report(succeeded),
        "show --tree": show_cmd.tree_lines(
            trioqueue.JobDependencies(
                7,
                (trioqueue.DependencyInfo(3, text, "ready"),),
                (trioqueue.DependencyInfo(9, text, "scheduled"),),
                trioqueue.DependencyInfo(1, text, "running"),
                (trioqueue.DependencyInfo(11, text, "ready"),),
            )
        ),
        "audit": audit_cmd.audit_table([audit_entry(text)]),
        "tables": tables_cmd.health_report(table_health(text), NOW),
        "status": status_cmd.status_table(
            {text: collections.Counter(ready=1)}, {text: 1.0}, {text: text}
        ),
        "workers": status_cmd.workers_table([worker(text)], NOW),
        "cancel": [
            job_cmd.cancel_report(7, a, job(text, status=s))
            for a in (True, False)
            for s in ("failed", "running", "ready")
        ],
        "schedule list": _schedule.schedules_table([schedule(text)], NOW),
        "schedule set": [_schedule.schedule_report(schedule(text))],
        "watch": frame([info], stats(text)),
        "watch in colour": [
            _strip_styles(line)
            for line in frame([info, succeeded], stats(text), colour=True, unicode=True)
        ],
        "queue line": [_watch.queue_line(text, stats(text)[text])],
    }


def _strip_styles(line: str) -> str:
    """``line`` without the SGR styles the watch adds on purpose (and only those)."""
    for style in (*STATUS_STYLES.values(), RESET):
        if style:
            line = line.replace(style, "")
    return line


@pytest.mark.parametrize("text", HOSTILE)
def test_no_printer_lets_a_hostile_string_through(text: str) -> None:
    for name, lines in printed(text).items():
        assert all("\n" not in line for line in lines), name
        assert not unsafe_in("\n".join(lines)), (name, lines)


@settings(max_examples=50)
@given(hostile_text)
def test_no_printer_lets_any_string_through(text: str) -> None:
    for name, lines in printed(text).items():
        assert not unsafe_in("\n".join(lines)), (name, lines)


@given(hostile_text)
def test_show_prints_each_field_once_whatever_the_fields_hold(text: str) -> None:
    """Fields start two spaces in; a multi-line error's further lines sit deeper, so no
    stored string can add a field line (a forged ``error none``)."""
    lines = "\n".join(show_cmd.job_report(job(text))).split("\n")  # as printed
    fields = [line.split()[0] for line in lines[1:] if re.match(r"  \S", line)]
    assert fields == ["payload", "priority", "group", "created", "waiting", "finished", "pool",
                      "snoozes", "progress", "worker", "cancel", "error", "checkpoint"]  # fmt: skip
    assert all(line.startswith("            ") for line in lines[1:] if not re.match(r"  \S", line))


def test_show_indents_the_lines_of_a_multi_line_error() -> None:
    lines = show_cmd.job_report(job("q", last_error="Traceback:\n  File x\r\nValueError: boom"))
    at = lines.index("  error     Traceback:")
    assert lines[at + 1 : at + 3] == ["              File x\\r", "            ValueError: boom"]


# -- the error line and the log -------------------------------------------------------------


def test_the_error_line_of_main_is_visible(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def delete_schedule(dsn: str, schema: str, name: str) -> bool:
        return False

    monkeypatch.setattr("trioqueue.cli._schedule.delete_schedule", delete_schedule)
    assert (
        cli.main(["--dsn", "postgresql://x@127.0.0.1:1/x", "schedule", "delete", "\u202eab"]) == 1
    )
    err = capsys.readouterr().err
    assert err == "trioqueue schedule: error: no schedule named '\\u202eab'\n"

    def fail(args: object) -> int:
        raise common_cmd.CliError("first \x1b[2J\nsecond\rthird")

    monkeypatch.setattr(migrate_cmd, "_run_migrate", fail)
    assert cli.main(["migrate"]) == 2
    assert capsys.readouterr().err == ("trioqueue migrate: error: first \\x1b[2J\nsecond\\rthird\n")


def test_text_log_lines_are_visible_and_continuations_indented() -> None:
    formatter = TextLogFormatter("%(levelname)s %(name)s: %(message)s")
    try:
        raise ValueError("boom\n2026-01-01 INFO trioqueue.worker: job 1 succeeded")
    except ValueError:
        import sys

        exc_info = sys.exc_info()
    record = logging.LogRecord(
        "trioqueue.worker", logging.ERROR, "", 0, "job %d failed: %s", (7, "\x1b[2Jx\ry"), exc_info
    )
    assert isinstance(common_cmd.stderr_log_handler("text").formatter, TextLogFormatter)
    lines = formatter.format(record).split("\n")
    assert lines[0] == "ERROR trioqueue.worker: job 7 failed: \\x1b[2Jx\\ry"
    assert all(line.startswith("    ") for line in lines[1:])
    assert not unsafe_in("\n".join(lines))


# -- every command, through main ------------------------------------------------------------


def _database_answers(text: str) -> dict[object, object]:
    """What each database function of the commands answers, ``text`` in every field."""
    return {
        status_cmd.count_jobs: (
            {text: collections.Counter(ready=1)},
            {text: 1.0},
            [worker(text)],
            {text: text},
            {text},
        ),
        jobs_cmd.list_jobs: [job(text), job(text, status="succeeded")],
        show_cmd.show_job: (job(text, status="failed"), False, [attempt(text)]),
        audit_cmd.list_audit: [audit_entry(text)],
        tables_cmd.table_health: table_health(text),
        _schedule.run_schedule_now: None,
        _schedule.enable_schedule: False,
        job_cmd.cancel: (True, job(text)),
        job_cmd.job_operation: (False, "succeeded"),
        queue_cmd.queue_limits: stats(text)[text],
        queue_cmd.pause_queue: None,
        enqueue_cmd.enqueue_reporting: trioqueue.Enqueued(7, "kept"),
        _schedule.list_schedules: [schedule(text)],
        _schedule.set_schedule: schedule(text),
        _schedule.delete_schedule: False,
    }


def _commands(text: str) -> list[list[str]]:
    # ``--opt=text`` and ``-- text``: a text that starts with a dash is still the value.
    return [
        ["status"], ["jobs"], ["jobs", f"--queue={text}"], ["show", "7"], ["cancel", "7"],
        ["retry", "7"], ["delete", "7"], ["schedule", "list"],
        ["schedule", "set", "n", "q", "* * * * *"], ["schedule", "delete", "--", text],
        ["queue", "limits", "--", text], ["queue", "pause", "--", text],
        ["enqueue", "q", "{}", f"--dedup-key={text}"], ["audit"], ["tables"],
        ["schedule", "run", "--", text], ["schedule", "disable", "--", text],
    ]  # fmt: skip


@settings(max_examples=25, deadline=None)
@given(hostile_text)
def test_no_command_prints_a_hostile_string_raw(text: str) -> None:
    """Every command that prints stored text, run through ``main`` with the database
    stood in for (tests/postgres/test_cli_postgres.py runs them on a real one)."""
    answers = _database_answers(text)

    def run_on_database(args: object, fn: object, *fn_args: object) -> object:
        return answers[fn]

    with contextlib.ExitStack() as patches:
        for module in (
            status_cmd, jobs_cmd, job_cmd, show_cmd, queue_cmd, enqueue_cmd, schedule_cmd,
            audit_cmd, tables_cmd,
        ):  # fmt: skip
            patches.enter_context(mock.patch.object(module, "run_on_database", run_on_database))
        for argv in _commands(text):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                cli.main(["--dsn", "postgresql://x@127.0.0.1:1/x", *argv])
            printed = out.getvalue() + err.getvalue()
            assert printed, argv
            assert not unsafe_in(printed), (argv, printed)
